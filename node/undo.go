package node

import (
	"github.com/fcap-io/fcap/node/metrics"
	"github.com/fcap-io/fcap/proto"
)

// Undo. A strict grant the node answered in time can still reach the
// client after it gave up (a starved client, a slow kernel queue): the
// client failed closed and showed nothing, yet the slot is used. The
// node remembers each strict Allow grant it answers, under a random id
// it returns in AllowResult.Grant, for grants.TTL; the client sends
// the id back in an Undo, and the node takes the grant back exactly as
// it takes back one it could not answer in time (revoke: engine.RevokeGrantWrite,
// logged and replicated, and taken out of the backups that applied it).
// The id names the grant, so an Undo never takes
// back another caller's impression: each grant is taken back at most
// once, and an Undo for an id the node does not hold (soft, unknown,
// already undone, forgotten, another viewer's) changes nothing.
//
// The memory is this node's only: an Undo that reaches a new owner after
// the ring changed finds nothing and changes nothing (the grant stands,
// as before Undo existed).

// undo answers an Undo: the grant it names is taken back if this node
// still holds it, else nothing changes.
func (h *handler) undo(out []byte, v *view, hdr proto.Header, body []byte) ([]byte, metrics.Op, metrics.Outcome) {
	var m proto.Undo
	epoch := v.ring.Epoch()
	if err := proto.Decode(body, &m); err != nil {
		return h.failErr(out, hdr, err, epoch, metrics.OpUndo)
	}
	if err := h.n.engine.ValidateViewer(m.Viewer); err != nil {
		return h.failErr(out, hdr, err, epoch, metrics.OpUndo)
	}
	wr := &h.wr
	if code := h.begin(wr, m.Viewer, false, nil); code != 0 {
		return h.refuse(out, hdr, code, epoch, metrics.OpUndo)
	}
	wr.local = true // a strict grant's take-back
	g, ok := h.n.grants.Take(m.Viewer, m.Grant)
	if ok {
		if _, err := h.n.engine.RevokeGrantWrite(&wr.eng, g.Viewer, g.Tag, g.Now, g.Caps); err != nil {
			h.n.log.Error("undo a strict grant", "err", err) // it was granted with these: a bug
		}
	}
	seq := h.commit(wr)
	res := "unknown"
	if ok {
		res = "undone"
	}
	h.n.metrics.Undos.WithLabelValues(res).Inc()
	if seq == 0 {
		return h.reply(out, hdr.ID, &proto.UndoResult{Epoch: epoch, Undone: ok}, metrics.OpUndo)
	}
	return h.later(out, h.start, func(out []byte) ([]byte, metrics.Op, metrics.Outcome) {
		h.n.waitLogged(seq)
		return h.reply(out, hdr.ID, &proto.UndoResult{Epoch: epoch, Undone: ok}, metrics.OpUndo)
	})
}

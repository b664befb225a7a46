package node

import (
	"context"
	"time"

	"github.com/fcap-io/fcap/proto"
)

// The handlers of the requests that are not client writes (writes.go):
// reads, peer traffic, identity and admin requests. Each parses its
// request, operates and answers.

func (h *handler) ping(out []byte, v *view, hdr proto.Header, _ []byte) ([]byte, opKind, outcome) {
	return h.reply(out, hdr.ID, &proto.Pong{Epoch: v.ring.Epoch(), Name: h.n.cfg.Name}, opPing)
}

func (h *handler) topology(out []byte, v *view, hdr proto.Header, _ []byte) ([]byte, opKind, outcome) {
	return h.reply(out, hdr.ID, topologyOf(v.ring), opTopology)
}

func (h *handler) check(out []byte, v *view, hdr proto.Header, body []byte) ([]byte, opKind, outcome) {
	m := &h.checkMsg
	epoch := v.ring.Epoch()
	if err := proto.Decode(body, m); err != nil {
		return h.failErr(out, hdr, err, epoch, opCheck)
	}
	if late(h.deadline(m.Budget)) {
		return h.tooLate(out, hdr, epoch, opCheck)
	}
	stale := false
	if code := h.serves(v, m.Viewer); code != 0 {
		// A backup answers only a client that asked for it (the owner
		// did not answer); strict caps never ask.
		if code != proto.CodeNotOwner || !m.Backup || !v.backs(m.Viewer) || h.n.repl.Syncing(partitionOf(v, m.Viewer)) {
			return h.refuse(out, hdr, code, epoch, opCheck)
		}
		stale = true
		h.n.metrics.backupReads.Inc()
	}
	now := h.now(m.Now, m.HasNow)
	res := &h.checkRes
	res.Stale = stale
	var err error
	res.Verdicts, h.left, err = h.n.engine.CheckTableCaps(m.Viewer, &m.Table, now, res.Verdicts[:0], h.left[:0])
	if err != nil {
		return h.failErr(out, hdr, err, epoch, opCheck)
	}
	res.Left = res.Left[:0]
	for _, l := range h.left {
		res.Left = append(res.Left, uint16(min(l, 0xFFFF)))
	}
	res.Epoch, res.Now = epoch, now
	return h.reply(out, hdr.ID, res, opCheck)
}

func (h *handler) replicate(out []byte, v *view, hdr proto.Header, body []byte) ([]byte, opKind, outcome) {
	m := &h.replicateMsg
	epoch := v.ring.Epoch()
	if err := proto.Decode(body, m); err != nil {
		return h.failErr(out, hdr, err, epoch, opReplicate)
	}
	res, err := h.n.repl.Apply(m)
	if err != nil {
		return h.failErr(out, hdr, err, epoch, opReplicate)
	}
	res.Epoch = epoch
	return h.reply(out, hdr.ID, &res, opReplicate)
}

func (h *handler) syncRequest(out []byte, v *view, hdr proto.Header, body []byte) ([]byte, opKind, outcome) {
	var m proto.SyncRequest
	if err := proto.Decode(body, &m); err != nil {
		return h.failErr(out, hdr, err, v.ring.Epoch(), opReplicate)
	}
	return h.reply(out, hdr.ID, &proto.SyncResult{Pushing: h.n.repl.ServeSync(m.From, m.Partitions, m.Handoffs)}, opReplicate)
}

func (h *handler) statusRequest(out []byte, _ *view, hdr proto.Header, _ []byte) ([]byte, opKind, outcome) {
	return h.reply(out, hdr.ID, h.n.status(), opStatus)
}

func (h *handler) inspect(out []byte, v *view, hdr proto.Header, body []byte) ([]byte, opKind, outcome) {
	var m proto.Inspect
	if err := proto.Decode(body, &m); err != nil {
		return h.failErr(out, hdr, err, v.ring.Epoch(), opStatus)
	}
	return h.reply(out, hdr.ID, h.n.inspect(v, m.Viewer), opStatus)
}

func (h *handler) verify(out []byte, v *view, hdr proto.Header, body []byte) ([]byte, opKind, outcome) {
	var m proto.Verify
	if err := proto.Decode(body, &m); err != nil {
		return h.failErr(out, hdr, err, v.ring.Epoch(), opVerify)
	}
	res, err := h.n.verify(v, &m)
	if err != nil {
		return h.failErr(out, hdr, err, v.ring.Epoch(), opVerify)
	}
	return h.reply(out, hdr.ID, res, opVerify)
}

func (h *handler) resolveOp(out []byte, v *view, hdr proto.Header, body []byte) ([]byte, opKind, outcome) {
	var m proto.Resolve
	if err := proto.Decode(body, &m); err != nil {
		return h.failErr(out, hdr, err, v.ring.Epoch(), opIdentity)
	}
	res, code, err := h.resolve(v, &m, v.ring.Epoch())
	return h.identityReply(out, hdr, res, code, err, v.ring.Epoch())
}

func (h *handler) linkOp(out []byte, v *view, hdr proto.Header, body []byte) ([]byte, opKind, outcome) {
	var m proto.Link
	if err := proto.Decode(body, &m); err != nil {
		return h.failErr(out, hdr, err, v.ring.Epoch(), opIdentity)
	}
	res, code, err := h.link(v, &m, v.ring.Epoch())
	return h.identityReply(out, hdr, res, code, err, v.ring.Epoch())
}

func (h *handler) unlinkOp(out []byte, v *view, hdr proto.Header, body []byte) ([]byte, opKind, outcome) {
	var m proto.Unlink
	if err := proto.Decode(body, &m); err != nil {
		return h.failErr(out, hdr, err, v.ring.Epoch(), opIdentity)
	}
	res, code, err := h.unlink(v, &m, v.ring.Epoch())
	return h.identityReply(out, hdr, res, code, err, v.ring.Epoch())
}

func (h *handler) linkDeviceOp(out []byte, v *view, hdr proto.Header, body []byte) ([]byte, opKind, outcome) {
	var m proto.LinkDevice
	if err := proto.Decode(body, &m); err != nil {
		return h.failErr(out, hdr, err, v.ring.Epoch(), opIdentity)
	}
	res, code, err := h.linkDevice(&m)
	return h.identityReply(out, hdr, res, code, err, v.ring.Epoch())
}

func (h *handler) drain(out []byte, v *view, hdr proto.Header, body []byte) ([]byte, opKind, outcome) {
	var m proto.Drain
	if err := proto.Decode(body, &m); err != nil {
		return h.failErr(out, hdr, err, v.ring.Epoch(), opDrain)
	}
	ctx := context.Background()
	if m.TimeoutMillis > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(m.TimeoutMillis)*time.Millisecond)
		defer cancel()
	}
	sent, err := h.n.Drain(ctx)
	if err != nil {
		return h.failErr(out, hdr, err, v.ring.Epoch(), opDrain)
	}
	return h.reply(out, hdr.ID, &proto.DrainResult{Partitions: uint64(sent)}, opDrain)
}

func (h *handler) gossipKey(out []byte, v *view, hdr proto.Header, body []byte) ([]byte, opKind, outcome) {
	var m proto.GossipKey
	if err := proto.Decode(body, &m); err != nil {
		return h.failErr(out, hdr, err, v.ring.Epoch(), opGossipKey)
	}
	res, err := h.n.gossipKeys.Apply(&m)
	if err != nil {
		return h.failErr(out, hdr, err, v.ring.Epoch(), opGossipKey)
	}
	return h.reply(out, hdr.ID, res, opGossipKey)
}

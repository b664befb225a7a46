package node

import (
	"fmt"
	"strconv"
	"time"

	"github.com/fcap-io/fcap/node/metrics"
	"github.com/fcap-io/fcap/proto"
)

// void answers a Void (invalid-traffic refunds) on the viewer's owner:
// the engine takes the impression out of its counters and keeps a void
// mark (engine/void.go), logged under the stripe lock like any write;
// the answer waits for the log and for every backup, like a strict write
// (it runs apart from the reader: pending.go), so an acknowledged Void
// survives a crash of the owner and no older copy brings the impression
// back. Voiding again waits again.
func (h *handler) void(out []byte, v *view, hdr proto.Header, body []byte) ([]byte, metrics.Op, metrics.Outcome) {
	var m proto.Void
	epoch := v.ring.Epoch()
	if err := proto.Decode(body, &m); err != nil {
		return h.failErr(out, hdr, err, epoch, metrics.OpVoid)
	}
	wr := &h.wr
	if code := h.begin(wr, m.Viewer, false, nil); code != 0 {
		return h.refuse(out, hdr, code, epoch, metrics.OpVoid)
	}
	voided, err := h.n.engine.VoidWrite(&wr.eng, m.Viewer, m.Impression)
	seq := h.commit(wr)
	if err != nil {
		return h.failErr(out, hdr, err, epoch, metrics.OpVoid)
	}
	if wr.eng.Changed {
		h.n.metrics.Voided.WithLabelValues(strconv.FormatBool(voided)).Inc()
	}
	h.n.waitLogged(seq)
	if err := h.syncStrict(wr.v, m.Viewer, time.Time{}); err != nil {
		return h.failErr(out, hdr, fmt.Errorf("voided on its owner, not yet on every backup (void again to wait): %w", err), epoch, metrics.OpVoid)
	}
	return h.reply(out, hdr.ID, &proto.VoidResult{Epoch: epoch, Voided: voided}, metrics.OpVoid)
}

package node

import (
	"errors"
	"fmt"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/node/engine"
	"github.com/fcap-io/fcap/node/metrics"
	"github.com/fcap-io/fcap/proto"
)

// Deadlines. A client waits for an answer only so long (5ms by default)
// and tells the node how long in the request (proto.Allow.Budget and the
// like). The node counts that budget from when the request reached it:
// it does not start a request whose budget has run out, and a strict
// grant it can acknowledge only after the budget ran out (the sync to the
// backups took too long) is taken back, so a slot is never used by a
// grant the client never saw. Soft writes the client gave up on stand:
// the client already counted its verdict as failed open (ARCHITECTURE.md,
// "Deadlines").

// errLate is why a strict grant was taken back: its answer would have
// reached the client after it gave up.
var errLate = fmt.Errorf("%w: the answer would arrive after the client's deadline", proto.ErrDeadlineExceeded)

// deadline is when the request's answer stops being of use to the
// client: its budget counted from when the request arrived. The zero
// time when the request set no budget.
func (h *handler) deadline(budget time.Duration) time.Time {
	if budget <= 0 {
		return time.Time{}
	}
	at := h.arrived
	if at.IsZero() {
		at = time.Now()
	}
	return at.Add(budget)
}

// late reports whether deadline d has passed; never for the zero time.
func late(d time.Time) bool { return !d.IsZero() && !time.Now().Before(d) }

// tooLate answers a request the node did not start because its budget ran
// out before its turn came (it waited behind others on its connection,
// or in the socket).
func (h *handler) tooLate(out []byte, hdr proto.Header, epoch uint64, op metrics.Op) ([]byte, metrics.Op, metrics.Outcome) {
	h.n.metrics.LateRefusals.Inc()
	msg := &proto.Error{Code: proto.CodeDeadlineExceeded, Message: "the request's budget ran out before it started", Epoch: epoch}
	b, _ := proto.AppendFrame(out, hdr.ID, msg)
	return b, op, metrics.OutcomeDeadline
}

// strictTimeout is how long a strict write may wait for its backups:
// StrictTimeout, and no longer than the request's deadline, since an
// answer after it would be taken back anyway. It reports whether the
// deadline is what bounds it.
func (h *handler) strictTimeout(deadline time.Time) (time.Duration, bool) {
	t := h.n.cfg.StrictTimeout
	if deadline.IsZero() {
		return t, false
	}
	if left := time.Until(deadline); left < t {
		return left, true
	}
	return t, false
}

// revoke takes back a strict Allow this node granted at now under the
// engine tag tag but could not acknowledge: the client never saw the
// grant (it fails closed, or asks again, maybe another owner), so it must
// not use up a slot. The change reaches the backups like any other; they
// merge what they receive, and the tag's void mark takes the grant out of
// a backup that already applied it (engine.RevokeGrantWrite), where a
// union alone would keep it.
//
// held is the view the grant was made under: the take-back is marked
// for the targets of its plan and of every plan since. When the ring
// moved meanwhile, one of them is the primary this node handed the
// partition over to, which took the grant with the hand-over and,
// without the take-back, would count it on top of the client's next
// try there (the current plan has no target for the partition on a node
// that is no longer its primary).
func (h *handler) revoke(held *view, viewer string, tag uint64, now int64, caps []fcap.Cap) {
	wr := &write{v: h.enter(), eng: engine.Write{Journal: h.n.journal}, local: true}
	_, err := h.n.engine.RevokeGrantWrite(&wr.eng, viewer, tag, now, caps)
	h.markHeld(held, wr)
	h.commit(wr)
	if err != nil {
		// The same viewer, time and caps were just granted: a bug.
		h.n.log.Error("revoke a strict grant", "err", err)
		return
	}
	h.n.metrics.StrictRevoked.Inc()
}

// unreserve takes back a strict reservation this node could not
// acknowledge (see revoke).
func (h *handler) unreserve(held *view, viewer string, id uint64) {
	wr := &write{v: h.enter(), eng: engine.Write{Journal: h.n.journal}, local: true}
	h.n.engine.ReleaseWrite(&wr.eng, viewer, id)
	h.markHeld(held, wr)
	h.commit(wr)
	h.n.metrics.StrictRevoked.Inc()
}

// markHeld marks the viewer a take-back changed for the targets of the
// plan its grant was made under and of every plan since
// (Plan.MarkThrough), when that is no longer the current one.
func (h *handler) markHeld(held *view, wr *write) {
	if wr.eng.Changed && held != wr.v {
		wr.v.plan.MarkThrough(held.plan, wr.eng.Key)
	}
}

// lateErr is the error a strict write whose sync ended with err answers
// with, given its deadline: errLate when the answer cannot be in time
// (whether or not the backups acknowledged), else err.
func lateErr(err error, deadline time.Time) error {
	if late(deadline) || errors.Is(err, proto.ErrDeadlineExceeded) {
		return errLate
	}
	return err
}

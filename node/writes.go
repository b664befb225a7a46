package node

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/node/engine"
	"github.com/fcap-io/fcap/node/metrics"
	"github.com/fcap-io/fcap/node/replication"
	"github.com/fcap-io/fcap/proto"
	"github.com/fcap-io/fcap/ring"
)

// The write path. Every client write (Allow, Record, Reserve, Release,
// and the take-backs of strict grants) goes the same way:
//
//   - begin: enter the plan of the current view (a hand-over waits for
//     the writes in flight under the plan it leaves), and check that this
//     node serves the viewer, or may stand in for its owner;
//   - the engine operation, which reports the viewer it changed and logs
//     the viewer's new state under the same stripe lock (engine.Write);
//   - commit: mark the viewer for the peers that receive this node's
//     changes of its partition, and leave the plan;
//   - then, apart from the connection's reader when there is anything to
//     wait for: the log record, and for strict caps the backups (sync).

// write is one client write in progress.
type write struct {
	v       *view
	standIn bool         // this node takes the write for an owner the client could not reach
	eng     engine.Write // what the engine changed, and the log it appended to
	// caps are the write's caps, and local says it takes a strict grant
	// back: with peer regions, only soft changes are shipped to them
	// (region.go).
	caps  []fcap.Cap
	local bool
}

// begin starts a write to viewer under the current view. backup says the
// client could not reach the owner and accepts a stand-in for caps. It
// returns the code to refuse with, having left the plan, or 0.
func (h *handler) begin(wr *write, viewer string, backup bool, caps []fcap.Cap) proto.Code {
	wr.v = h.enter()
	wr.standIn, wr.caps, wr.local = false, caps, false
	wr.eng = engine.Write{Journal: h.n.journal}
	if code := h.serves(wr.v, viewer); code != 0 {
		if !backup || !h.standsIn(wr.v, code, viewer, caps) {
			h.leave(wr.v)
			return code
		}
		wr.standIn = true
	}
	if strict(caps) {
		if code := h.authority(wr.v, partitionOf(wr.v, viewer)); code != 0 {
			h.leave(wr.v)
			return code
		}
	}
	return 0
}

// commit marks the viewer the write changed, if any, for the peers that
// receive it, and leaves the plan. It returns the log record to wait
// for, 0 for none.
func (h *handler) commit(wr *write) uint64 {
	h.mark(wr)
	h.leave(wr.v)
	return wr.eng.Seq
}

// commitOrHold is commit; for a strict grant that waits for its backups
// (hold), it also keeps the plans linked (Replicator.HoldPlans) until
// the caller releases them, once the grant stands or is taken back: a
// take-back is marked through every plan since the grant's (revoke).
func (h *handler) commitOrHold(wr *write, hold bool) uint64 {
	if hold {
		h.n.repl.HoldPlans()
	}
	return h.commit(wr)
}

// mark queues the changed viewer for the partition's targets (or, for a
// stand-in write, its other owners).
func (h *handler) mark(wr *write) {
	if !wr.eng.Changed {
		return
	}
	if r := h.n.shipping; r != nil {
		shipSoft(r, wr)
	}
	if wr.standIn {
		wr.v.plan.MarkStandIn(wr.eng.Key)
		h.n.metrics.StandInWrites.Inc()
		return
	}
	wr.v.plan.Mark(wr.eng.Key)
}

// partition is the partition of the viewer a write changed.
func (wr *write) partition() int { return ring.PartitionOf(wr.eng.Key, wr.v.ring.Partitions()) }

func (h *handler) allow(out []byte, v *view, hdr proto.Header, body []byte) ([]byte, metrics.Op, metrics.Outcome) {
	m := &h.allowMsg
	epoch := v.ring.Epoch()
	if err := proto.Decode(body, m); err != nil {
		return h.failErr(out, hdr, err, epoch, metrics.OpAllow)
	}
	deadline := h.deadline(m.Budget)
	if late(deadline) {
		return h.tooLate(out, hdr, epoch, metrics.OpAllow)
	}
	wr := &h.wr
	if code := h.begin(wr, m.Viewer, m.Backup, m.Caps); code != 0 {
		return h.refuse(out, hdr, code, epoch, metrics.OpAllow)
	}
	now := h.now(m.Now, m.HasNow)
	isStrict := strict(m.Caps)
	var vkey uint64
	if isStrict {
		// Marked before the engine applies it: an Allow refused by a
		// count that holds it finds the mark (strictInFlight).
		vkey = fcap.ViewerKey(m.Viewer)
		h.n.inflight.add(vkey)
		// Tagged, so that taking it back (revoke, Undo) reaches the
		// backups that applied it, not only this copy.
		wr.eng.Grant = rand.Uint64() | 1
	}
	vd, err := h.n.engine.AllowWrite(&wr.eng, m.Viewer, now, m.Caps)
	sync := err == nil && vd.Allowed && isStrict
	seq := h.commitOrHold(wr, sync)
	if wr.eng.ShareSpent {
		h.shareSpent(m.Viewer, &m.Caps[vd.Blocking])
	}
	if isStrict && !sync {
		h.n.inflight.done(vkey)
	}
	if err != nil {
		return h.failErr(out, hdr, err, epoch, metrics.OpAllow)
	}
	if isStrict && !vd.Allowed && h.n.inflight.has(vkey) {
		// Refused by a count that may hold another caller's grant still
		// waiting for its backups, which may yet be taken back: the
		// refusal would be a read of what may never have been. Ask again.
		return h.failErr(out, hdr, errStrictInFlight, epoch, metrics.OpAllow)
	}
	if seq == 0 && !sync {
		h.allowRes = proto.AllowResult{Epoch: epoch, Now: now, Verdict: vd}
		return h.reply(out, hdr.ID, &h.allowRes, metrics.OpAllow)
	}
	// It waits (its log record, its backups): apart from the reader,
	// with its own copies of what the reader's buffer holds.
	wv, key, p, tag := wr.v, wr.eng.Key, wr.partition(), wr.eng.Grant
	viewer, caps := m.Viewer, m.Caps
	if sync {
		viewer, caps = strings.Clone(viewer), cloneCaps(caps)
	}
	return h.later(out, h.start, func(out []byte) ([]byte, metrics.Op, metrics.Outcome) {
		if sync {
			defer h.n.repl.ReleasePlans()
		}
		h.n.waitLogged(seq)
		if sync {
			// A strict grant stands only if the backups hold it and the
			// client will see it: otherwise it is taken back, and the
			// client fails closed on a slot that stays free.
			err := h.syncKey(wv, key, p, deadline)
			if errors.Is(err, replication.ErrOtherRing) && !late(deadline) {
				err = h.resync(viewer, key, deadline, err)
			}
			if err != nil || late(deadline) {
				h.revoke(wv, viewer, tag, now, caps)
				h.n.inflight.done(vkey)
				return h.failErr(out, hdr, lateErr(err, deadline), epoch, metrics.OpAllow)
			}
			h.n.inflight.done(vkey)
		}
		var grant uint64
		if sync {
			// Its answer may still reach the client after it gave up: it
			// can give the slot back with an Undo (undo.go).
			grant = h.n.grants.Put(viewer, tag, now, caps)
		}
		return h.reply(out, hdr.ID, &proto.AllowResult{Epoch: epoch, Now: now, Verdict: vd, Grant: grant}, metrics.OpAllow)
	})
}

func (h *handler) record(out []byte, v *view, hdr proto.Header, body []byte) ([]byte, metrics.Op, metrics.Outcome) {
	m := &h.recordMsg
	epoch := v.ring.Epoch()
	if err := proto.Decode(body, m); err != nil {
		return h.failErr(out, hdr, err, epoch, metrics.OpRecord)
	}
	res := &h.recordRes
	res.Epoch = epoch
	res.Results = res.Results[:0]
	wv := h.enter()
	var seq uint64
	var syncs []strictItem // items to wait for their backups
	// A replicated acknowledgement waits for every owner, so no backup
	// stands in for the owner (it has no one to wait for).
	backup := m.Backup && !m.Replicated
	for i := range m.Items {
		r, wr := h.recordItem(wv, &m.Items[i], backup)
		res.Results = append(res.Results, r)
		seq = max(seq, wr.eng.Seq)
		if r.Code != 0 {
			continue
		}
		// Strict impressions wait for the backups once recorded; with
		// a replicated acknowledgement, a duplicate too (its first
		// attempt may not have reached them).
		if r.Status == fcap.Recorded && strict(m.Items[i].Impression.Caps) ||
			m.Replicated && (r.Status == fcap.Recorded || r.Status == fcap.Duplicate) {
			syncs = append(syncs, strictItem{i, fcap.ViewerKey(m.Items[i].Viewer), partitionOf(wv, m.Items[i].Viewer)})
		}
	}
	h.leave(wv)
	if seq == 0 && len(syncs) == 0 {
		return h.reply(out, hdr.ID, res, metrics.OpRecord)
	}
	// It waits: apart from the reader, with its own copy of the results
	// (the handler reuses its own).
	res = &proto.RecordResult{Epoch: epoch, Results: slices.Clone(res.Results)}
	return h.later(out, h.start, func(out []byte) ([]byte, metrics.Op, metrics.Outcome) {
		h.n.waitLogged(seq)
		// All of the batch's items wait for the same replication
		// batches, not one after another.
		for i, err := range h.syncKeys(wv, syncs) {
			if err != nil {
				// Counted here, not yet on the backups: the client
				// retries, and the id memory makes the retry a no-op.
				res.Results[syncs[i].i] = proto.ItemResult{Code: proto.CodeOverloaded}
			}
		}
		return h.reply(out, hdr.ID, res, metrics.OpRecord)
	})
}

// strictItem is an item of a Record batch that waits for its backups.
type strictItem struct {
	i    int    // its index in the batch
	key  uint64 // its viewer's key
	part int    // its viewer's partition
}

// recordItem applies one impression of a batch under the view v the
// batch entered; backup says the client could not reach the owner and
// accepts this node standing in for it.
func (h *handler) recordItem(v *view, it *proto.RecordItem, backup bool) (proto.ItemResult, *write) {
	wr := &h.wr
	wr.v, wr.standIn, wr.eng = v, false, engine.Write{Journal: h.n.journal}
	wr.caps, wr.local = it.Impression.Caps, false
	if code := h.serves(v, it.Viewer); code != 0 {
		if !backup || it.Impression.Reservation != 0 || !h.standsIn(v, code, it.Viewer, it.Impression.Caps) {
			if code == proto.CodeNotOwner {
				h.n.metrics.NotOwner.Inc()
			}
			return proto.ItemResult{Code: code}, wr
		}
		wr.standIn = true
	}
	if strict(it.Impression.Caps) {
		if code := h.authority(v, partitionOf(v, it.Viewer)); code != 0 {
			return proto.ItemResult{Code: code}, wr
		}
	}
	imp := it.Impression
	if !it.HasTime {
		imp.Time = h.n.clock()
	}
	st, err := h.n.engine.RecordWrite(&wr.eng, it.Viewer, imp)
	h.mark(wr)
	if err != nil {
		h.n.metrics.Time.RefusedTime(metrics.OpRecord, err)
		return proto.ItemResult{Code: proto.CodeOf(err)}, wr
	}
	return proto.ItemResult{Status: st}, wr
}

func (h *handler) reserve(out []byte, v *view, hdr proto.Header, body []byte) ([]byte, metrics.Op, metrics.Outcome) {
	m := &h.reserveMsg
	epoch := v.ring.Epoch()
	if err := proto.Decode(body, m); err != nil {
		return h.failErr(out, hdr, err, epoch, metrics.OpReserve)
	}
	deadline := h.deadline(m.Budget)
	if late(deadline) {
		return h.tooLate(out, hdr, epoch, metrics.OpReserve)
	}
	wr := &h.wr
	if code := h.begin(wr, m.Viewer, false, m.Caps); code != 0 {
		return h.refuse(out, hdr, code, epoch, metrics.OpReserve)
	}
	now := h.now(m.Now, m.HasNow)
	vd, id, err := h.n.engine.ReserveWrite(&wr.eng, m.Viewer, fcap.Candidate{Caps: m.Caps}, now, m.TTL)
	sync := err == nil && vd.Allowed && strict(m.Caps)
	seq := h.commitOrHold(wr, sync)
	if wr.eng.ShareSpent {
		h.shareSpent(m.Viewer, &m.Caps[vd.Blocking])
	}
	if err != nil {
		return h.failErr(out, hdr, err, epoch, metrics.OpReserve)
	}
	if seq == 0 && !sync {
		h.reserveRes = proto.ReserveResult{Epoch: epoch, Now: now, Verdict: vd, ID: id}
		return h.reply(out, hdr.ID, &h.reserveRes, metrics.OpReserve)
	}
	wv, key, p := wr.v, wr.eng.Key, wr.partition()
	viewer := m.Viewer
	if sync {
		viewer = strings.Clone(viewer) // the reader reuses the buffer it aliases
	}
	return h.later(out, h.start, func(out []byte) ([]byte, metrics.Op, metrics.Outcome) {
		if sync {
			defer h.n.repl.ReleasePlans()
		}
		h.n.waitLogged(seq)
		if sync {
			if err := h.syncKey(wv, key, p, deadline); err != nil || late(deadline) {
				// The reservation holds here but not on the backups, or
				// the client will not see it: drop it, the client fails
				// closed.
				h.unreserve(wv, viewer, id)
				return h.failErr(out, hdr, lateErr(err, deadline), epoch, metrics.OpReserve)
			}
		}
		return h.reply(out, hdr.ID, &proto.ReserveResult{Epoch: epoch, Now: now, Verdict: vd, ID: id}, metrics.OpReserve)
	})
}

func (h *handler) release(out []byte, v *view, hdr proto.Header, body []byte) ([]byte, metrics.Op, metrics.Outcome) {
	m := &h.releaseMsg
	epoch := v.ring.Epoch()
	if err := proto.Decode(body, m); err != nil {
		return h.failErr(out, hdr, err, epoch, metrics.OpRelease)
	}
	wr := &h.wr
	if code := h.begin(wr, m.Viewer, false, nil); code != 0 {
		return h.refuse(out, hdr, code, epoch, metrics.OpRelease)
	}
	err := h.n.engine.ReleaseWrite(&wr.eng, m.Viewer, m.ID)
	seq := h.commit(wr)
	if err != nil {
		return h.failErr(out, hdr, err, epoch, metrics.OpRelease)
	}
	if seq == 0 {
		h.releaseRes = proto.ReleaseResult{Epoch: epoch}
		return h.reply(out, hdr.ID, &h.releaseRes, metrics.OpRelease)
	}
	return h.later(out, h.start, func(out []byte) ([]byte, metrics.Op, metrics.Outcome) {
		h.n.waitLogged(seq)
		return h.reply(out, hdr.ID, &proto.ReleaseResult{Epoch: epoch}, metrics.OpRelease)
	})
}

// strict reports whether any cap is strict: its writes are acknowledged
// only once every backup applied them.
func strict(caps []fcap.Cap) bool {
	for i := range caps {
		if caps[i].Mode == fcap.Strict {
			return true
		}
	}
	return false
}

// syncStrict waits until every backup of the viewer applied its current
// state, for StrictTimeout at most and never past the request's deadline
// (the zero time: none). Cut short by the deadline, it fails with
// ErrDeadlineExceeded.
func (h *handler) syncStrict(v *view, viewer string, deadline time.Time) error {
	return h.syncKey(v, fcap.ViewerKey(viewer), partitionOf(v, viewer), deadline)
}

// syncKey is syncStrict for the viewer with key, of partition p.
func (h *handler) syncKey(v *view, key uint64, p int, deadline time.Time) error {
	timeout, byDeadline := h.strictTimeout(deadline)
	if err := v.plan.WaitSynced(key, p, timeout); err != nil {
		if byDeadline && late(deadline) {
			return fmt.Errorf("%w: %v", proto.ErrDeadlineExceeded, err)
		}
		h.n.metrics.StrictFailures.Inc()
		return fmt.Errorf("%w: %w", proto.ErrOverloaded, err)
	}
	return nil
}

// syncKeys waits, within StrictTimeout, for the backups of every item of
// a batch to apply it: one wait for all of them.
func (h *handler) syncKeys(v *view, items []strictItem) []error {
	if len(items) == 0 {
		return nil
	}
	ws := make([]replication.Synced, len(items))
	for i, it := range items {
		ws[i] = replication.Synced{Key: it.key, Partition: it.part}
	}
	timeout, _ := h.strictTimeout(time.Time{})
	errs := v.plan.WaitSyncedAll(ws, timeout)
	for _, err := range errs {
		if err != nil {
			h.n.metrics.StrictFailures.Inc()
		}
	}
	return errs
}

// cloneCaps copies caps and their strings, which alias the reader's
// buffer, for a request that outlives it.
func cloneCaps(caps []fcap.Cap) []fcap.Cap {
	out := slices.Clone(caps)
	for i := range out {
		out[i].Scope, out[i].ID = strings.Clone(out[i].Scope), strings.Clone(out[i].ID)
	}
	return out
}

// standsIn reports whether this node takes a write for a viewer it does
// not serve (code) in place of its owner, which the client could not
// reach: only as one of the viewer's backup owners holding its partition,
// and only for soft caps. The write is replicated to the other owners
// (Plan.MarkStandIn), whose copies merge it in; strict caps stay with the
// owner alone and fail closed without it.
func (h *handler) standsIn(v *view, code proto.Code, viewer string, caps []fcap.Cap) bool {
	return code == proto.CodeNotOwner && !h.n.left.Load() && !strict(caps) &&
		v.backs(viewer) && !h.n.repl.Syncing(partitionOf(v, viewer))
}

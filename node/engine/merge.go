package engine

import "github.com/fcap-io/fcap"

// Merging a replicated viewer state into the one held.
//
// A push from a node that was paused or cut off by a gossip partition
// may carry an older copy of a viewer than the receiver holds: the
// receiver (an interim owner meanwhile) acknowledged impressions the
// pusher never saw. Replacing the held state with the pushed one would
// lose them, so a state is merged instead: every counter ends up with
// what either copy counted. Both copies descend from one history plus
// impressions each side added, so the merge of a sliding counter is the
// union of the two timestamp multisets (each timestamp as many times as
// the copy holding it more often), of a fixed counter the newer window
// (the larger count when both are in the same window), of a bucketed
// counter the larger count of each bucket. Remembered impression ids and
// live reservations are united. A sliding counter loses nothing either
// side counted (its timestamps are the impressions); fixed and bucketed
// counts carry no identity, so two impressions in one window or bucket,
// one on each side, count once. What only one side removed early (a
// released reservation) comes back until it expires: it can deny, never
// over-grant.

// mergeViewer merges nv into v. The stripe's lock is held. An erasure
// either copy carries applies to both first (erase.go).
func (e *Engine) mergeViewer(v, nv *viewer) {
	floor := e.eraseMerge(v, nv)
	e.voidMerge(v, nv, floor)
	e.mergeCounters(v, nv, floor)
	if nv.ext == nil {
		return
	}
	if floor >= 0 {
		// nv had not seen v's erasure: of its extras, only identity
		// decisions dated after it count.
		if nv.ext.id != nil {
			if id := nv.ext.id.after(floor); id != nil {
				v.ensureID().merge(id)
			}
		}
		return
	}
	e.mergeExt(v, nv)
}

// mergeCounters merges nv's counters into v, skipping what is dated at
// or before floor (-1: nothing skipped): a sliding timestamp, a fixed
// window or a bucket that starts there.
func (e *Engine) mergeCounters(v, nv *viewer, floor int64) {
	for i := range nv.nkeys() {
		nh := nv.header(i)
		e.mergeCounter(v, nv, &nh, floor)
	}
}

// replay records n impressions at t in v's counter of nh, a counter of
// another viewer or copy, creating it like nh. The caller has checked the
// counter limits.
func (e *Engine) replay(v *viewer, nh *header, t, n int64) {
	if nh.lane && n > 0 {
		e.ensureLane(v, nh) // record makes counters of this region's own
	}
	c := [1]fcap.Cap{{Limit: int64(nh.limit), Window: fcap.Millis(nh.window), Algorithm: nh.algo}}
	kh := [1]uint64{nh.hash}
	for range n {
		e.record(v, c[:], kh[:], t)
	}
}

// mergeExt merges nv's identity, remembered ids and reservations into v.
func (e *Engine) mergeExt(v, nv *viewer) {
	if nv.ext.id != nil {
		v.ensureID().merge(nv.ext.id)
	}
	for _, s := range nv.ext.seen {
		e.remember(v, s.hash(), s.untilMillis())
	}
	e.mergeReservations(v, nv)
}

// mergeReservations unites nv's live reservations into v's.
func (e *Engine) mergeReservations(v, nv *viewer) {
	for _, r := range nv.ext.res {
		if v.ext == nil {
			v.ext = &viewerExt{}
		}
		dup := false
		for _, have := range v.ext.res {
			if have.id == r.id {
				dup = true
				break
			}
		}
		if !dup {
			v.ext.res = append(v.ext.res, reservation{id: r.id, expires: r.expires, keys: append([]uint64(nil), r.keys...)})
		}
	}
}

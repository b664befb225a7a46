package engine

import (
	"slices"

	"github.com/cespare/xxhash/v2"
	"github.com/fcap-io/fcap"
)

// Voiding an impression (invalid-traffic refunds). Void takes one
// recorded impression back out of every counter it was recorded on and
// keeps a void mark: the impression's id hash, its time and the counters
// it counted on, until it could no longer count anyway (its time plus
// its longest window, as its remembered id).
//
// The mark is what keeps the refund: replicas merge copies by union
// (merge.go), so taking timestamps out of one copy alone would be undone
// by the next merge with a copy that still holds them, and a late
// Record of the same id would count it again. So:
//
//   - a Record of a voided id counts nothing (it is answered Duplicate);
//   - a merge first brings both copies to the same marks: a copy that
//     lacks a mark the other holds has the impression taken out of its
//     counters if it remembers the id (a copy remembers every id it
//     counted; one that never saw the id never counted it), then the
//     counters are united as before. Neither copy then holds the
//     impression, and the union cannot bring it back.
//
// A counter knows impressions only by their timestamps, so a void takes
// out one timestamp equal to the impression's time from each of its
// counters (Revoke's step): if another impression of the viewer at the
// same millisecond was on the counter and the voided one had already
// been pushed out of it (a sliding counter keeps its newest `limit`),
// that one goes instead. The caller names the impression as recorded
// (its id, time and caps: counters hold no ids), and the engine checks
// that against the id it remembers: the time plus the longest window
// must give the horizon it remembered for the id, to the second, else
// the void is refused (fcap.ErrVoidMismatch) and changes nothing.
//
// Void of an id the viewer does not remember (never recorded here,
// already forgotten) takes nothing out and answers false, but keeps the
// mark: a Record of it that is still on its way counts nothing. Voiding
// again is a no-op with the same answer. A viewer keeps at most
// Config.MaxDedupePerViewer marks; past it the mark nearest its expiry
// is forgotten (counted as a forgotten id).

// voidMark is one voided impression.
type voidMark struct {
	id    uint64   // xxhash of the impression id
	at    int64    // the impression's time
	until int64    // forgotten once the high-water mark reaches it
	keys  []uint64 // the distinct counter keys it counted on
}

// voidSet is a viewer's void marks, sorted by id. It sits behind a
// pointer in viewerExt, so viewers that never saw a void pay 8 bytes.
type voidSet struct{ marks []voidMark }

// voidMarkBytes is a mark's estimated size, without its keys.
const voidMarkBytes = 48

func cmpMark(m voidMark, id uint64) int {
	switch {
	case m.id < id:
		return -1
	case m.id > id:
		return 1
	}
	return 0
}

// Void takes the impression imp (as recorded: its id, time and caps) of
// viewer back out of every counter it counted on, and keeps it from
// counting again. It reports whether the viewer had recorded the id
// (false: nothing was taken out, the id is barred all the same).
func (e *Engine) Void(viewer string, imp fcap.Impression) (bool, error) {
	return e.VoidWrite(nil, viewer, imp)
}

// VoidWrite is Void that reports the viewer it changed through w (see
// Write).
func (e *Engine) VoidWrite(w *Write, viewer string, imp fcap.Impression) (voided bool, err error) {
	if err := e.validateViewer(viewer); err != nil {
		return false, err
	}
	if err := imp.Validate(e.lim); err != nil {
		return false, err
	}
	mark, err := e.checkTime(imp.Time)
	if err != nil {
		return false, err
	}
	var buf [16]uint64
	khs := keyHashes(buf[:0], imp.Caps)
	var longest int64
	for i := range imp.Caps {
		longest = max(longest, imp.Caps[i].WindowMillis())
	}
	m := voidMark{id: xxhash.Sum64String(imp.ID), at: imp.Time, until: imp.Time + longest}
	for i, kh := range khs {
		if firstOf(khs, i) {
			m.keys = append(m.keys, kh)
		}
	}
	e.observe(mark)

	h, s := e.lockViewer(viewer)
	defer s.mu.Unlock()
	v := s.lookup(h)
	if v != nil && v.ext != nil {
		if i, ok := slices.BinarySearchFunc(v.ext.seen, m.id, cmpSeen); ok {
			if v.ext.seen[i].until != seenSeconds(m.until) {
				return false, fcap.ErrVoidMismatch
			}
			voided = true
		}
		if v.voided(m.id) {
			return voided, nil // voided before: nothing changes
		}
	}
	if m.until <= e.hw.Load() || !v.recordable(m.at) {
		// It could no longer count (aged out, or erased): nothing to
		// take back, nothing to bar.
		return voided, nil
	}
	if v, err = e.prepare(s, v, h, nil, false); err != nil {
		return false, err
	}
	if w != nil {
		defer w.wrote(e, s, h)
	}
	before, keys := v.bytes(), v.nkeys()
	e.applyVoid(v, m)
	e.settle(s, v, before, keys)
	return voided, nil
}

// Voided reports whether viewer holds a void mark for impression id.
func (e *Engine) Voided(viewer, id string) bool {
	h, s := e.lockViewer(viewer)
	defer s.mu.Unlock()
	return s.lookup(h).voided(xxhash.Sum64String(id))
}

// voided reports whether v (maybe nil) holds a mark for id hash.
func (v *viewer) voided(id uint64) bool {
	if v == nil || v.ext == nil || v.ext.voids == nil {
		return false
	}
	_, ok := slices.BinarySearchFunc(v.ext.voids.marks, id, cmpMark)
	return ok
}

// applyVoid brings v to know mark m: if v counted the impression (it
// remembers the id) it is taken out of its counters, and the mark is
// kept. v must not hold m yet.
func (e *Engine) applyVoid(v *viewer, m voidMark) {
	if v.ext != nil && v.ext.hasSeen(m.id) {
		v.unrecord(m.keys, m.at)
	}
	if v.ext == nil {
		v.ext = &viewerExt{}
	}
	if v.ext.voids == nil {
		v.ext.voids = &voidSet{}
	}
	vs := v.ext.voids
	if len(vs.marks) >= e.cfg.MaxDedupePerViewer {
		vs.prune(e.hw.Load())
		if len(vs.marks) >= e.cfg.MaxDedupePerViewer {
			vs.forgetNearest()
			e.overflow.Add(1)
		}
	}
	i, _ := slices.BinarySearchFunc(vs.marks, m.id, cmpMark)
	m.keys = slices.Clone(m.keys)
	vs.marks = slices.Insert(vs.marks, i, m)
}

// unrecord takes one impression at t out of each counter of khs (distinct
// keys) that still holds one, and reports whether it took any.
func (v *viewer) unrecord(khs []uint64, t int64) (removed bool) {
	for i, kh := range khs {
		if !firstOf(khs, i) {
			continue
		}
		idx, ok := v.find(kh)
		if !ok {
			continue
		}
		hd := v.header(idx)
		removed = v.uncount(idx, &hd, t) || removed
	}
	return removed
}

// voidMerge brings v and nv (a copy being merged into v, which the merge
// may change) to the same void marks before their counters are united:
// each takes out of its counters what the other voided and it counted.
// Marks of nv at or before floor (an erasure nv had not seen) are
// dropped with the rest of what nv dated there.
func (e *Engine) voidMerge(v, nv *viewer, floor int64) {
	if v.ext != nil && v.ext.voids != nil && nv.ext != nil {
		for _, m := range v.ext.voids.marks {
			if !nv.voided(m.id) && nv.ext.hasSeen(m.id) {
				nv.unrecord(m.keys, m.at)
			}
		}
	}
	if nv.ext == nil || nv.ext.voids == nil {
		return
	}
	hw := e.hw.Load()
	for _, m := range nv.ext.voids.marks {
		if m.at > floor && m.until > hw && !v.voided(m.id) && v.recordable(m.at) {
			e.applyVoid(v, m)
		}
	}
}

// prune forgets the marks whose impression can no longer count at now.
func (vs *voidSet) prune(now int64) {
	vs.marks = slices.DeleteFunc(vs.marks, func(m voidMark) bool { return m.until <= now })
}

// forgetNearest forgets the mark nearest its expiry.
func (vs *voidSet) forgetNearest() {
	n := 0
	for i := range vs.marks {
		if vs.marks[i].until < vs.marks[n].until {
			n = i
		}
	}
	vs.marks = slices.Delete(vs.marks, n, n+1)
}

// after returns the marks dated after t (an erasure), nil if none.
func (vs *voidSet) after(t int64) *voidSet {
	if vs == nil {
		return nil
	}
	var out voidSet
	for _, m := range vs.marks {
		if m.at > t {
			out.marks = append(out.marks, m)
		}
	}
	if len(out.marks) == 0 {
		return nil
	}
	return &out
}

// bytes is the set's estimated size.
func (vs *voidSet) bytes() int64 {
	b := int64(24 + cap(vs.marks)*voidMarkBytes)
	for i := range vs.marks {
		b += int64(cap(vs.marks[i].keys)) * 8
	}
	return b
}

// until is the latest expiry of the marks.
func (vs *voidSet) until() int64 {
	var u int64
	if vs != nil {
		for i := range vs.marks {
			u = max(u, vs.marks[i].until)
		}
	}
	return u
}

// count is the number of marks of a set that may be nil.
func (vs *voidSet) count() int {
	if vs == nil {
		return 0
	}
	return len(vs.marks)
}

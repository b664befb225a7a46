package engine

import "math"

// Fixed counters count impressions in calendar-aligned windows
// [k*window, (k+1)*window) with one integer. Their data is three words:
//
//	[0] [1]  k, the window the count belongs to
//	[2]      the count
//
// An impression counts at now iff it falls in now's window. An impression
// for an earlier window than the stored one no longer matters and is
// dropped; one for a later window starts a new count.

const fixedWords = 3

func (v *viewer) fixedCount(h *header, now int64) int64 {
	if get64(v.arena, h.off) != now/h.window {
		return 0
	}
	return int64(v.arena[h.off+2])
}

func (v *viewer) fixedRecord(h *header, t int64) {
	k := t / h.window
	stored, count := get64(v.arena, h.off), v.arena[h.off+2]
	switch {
	case k > stored || count == 0:
		put64(v.arena, h.off, k)
		v.arena[h.off+2] = 1
	case k == stored && count < math.MaxUint32:
		v.arena[h.off+2]++
	}
}

// fixedLive reports whether the counter can still count at time now or
// later.
func (v *viewer) fixedLive(h *header, now int64) bool {
	return v.arena[h.off+2] > 0 && get64(v.arena, h.off) >= now/h.window
}

// fixedRemove uncounts an impression at t, if t's window is the one the
// counter holds.
func (v *viewer) fixedRemove(h *header, t int64) bool {
	if get64(v.arena, h.off) != t/h.window || v.arena[h.off+2] == 0 {
		return false
	}
	v.arena[h.off+2]--
	return true
}

func (v *viewer) fixedHeld(h *header) int64 { return int64(v.arena[h.off+2]) }

// fixedDigest feeds word the window of now and the count in it.
func (v *viewer) fixedDigest(h *header, now int64, word func(uint64)) {
	word(uint64(now / h.window))
	word(uint64(v.fixedCount(h, now)))
}

func (v *viewer) fixedExport(h *header, k *KeyState) {
	k.Bucket = get64(v.arena, h.off)
	k.Counts = []int64{int64(v.arena[h.off+2])}
}

// fixedMerge keeps the newer window, and the larger count when both
// copies are in the same one.
func (e *Engine) fixedMerge(v, nv *viewer, nh *header, floor int64) {
	inBucket, inCount := get64(nv.arena, nh.off), int64(nv.arena[nh.off+2])
	if inCount == 0 || inBucket*nh.window <= floor {
		return
	}
	var held int64
	if j, ok := v.find(nh.hash); ok {
		h := v.header(j)
		b, n := get64(v.arena, h.off), int64(v.arena[h.off+2])
		switch {
		case n > 0 && b > inBucket:
			return // v's window is newer
		case n > 0 && b == inBucket:
			held = n
		}
	}
	e.replay(v, nh, inBucket*nh.window, inCount-held)
}

func (e *Engine) fixedAdd(v, nv *viewer, nh *header) int64 {
	k, n := get64(nv.arena, nh.off), int64(nv.arena[nh.off+2])
	e.replay(v, nh, k*nh.window, n)
	return n
}

func fixedCheck(i int, h *header) (int, error) {
	if h.n != fixedWords {
		return 0, badState("fixed counter %d of %d words", i, h.n)
	}
	return h.n, nil
}

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

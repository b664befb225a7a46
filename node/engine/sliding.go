package engine

import "github.com/fcap-io/fcap"

// Sliding counters: a log of timestamps in ascending order, trimmed to the
// newest `limit` entries and to the counter's retention window. Keeping
// only the newest `limit` entries keeps every verdict exact: if a window
// holds at least `limit` impressions, the newest `limit` entries all lie
// in it, so the count still reaches the limit; if it holds fewer, they
// are all among the newest.

// at returns timestamp j of the sliding counter whose data starts at off.
func (v *viewer) at(off, j int) int64 {
	if v.wide() {
		return get64(v.arena, off+2*j)
	}
	return v.base + int64(v.arena[off+j])
}

func (v *viewer) put(off, j int, t int64) {
	if v.wide() {
		put64(v.arena, off+2*j, t)
		return
	}
	v.arena[off+j] = uint32(t - v.base)
}

// firstAfter returns the index of the first timestamp greater than t.
func (v *viewer) firstAfter(h *header, t int64) int {
	lo, hi := 0, h.n
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if v.at(h.off, m) <= t {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// slidingCount is the number of timestamps t with t > now-window. A
// timestamp later than now (an impression reported with a clock slightly
// ahead) counts too.
func (v *viewer) slidingCount(h *header, now, window int64) int64 {
	return int64(h.n - v.firstAfter(h, now-window))
}

// slidingPrune drops the timestamps at or before cutoff from counter i.
func (v *viewer) slidingPrune(i int, h *header, cutoff int64) {
	p := v.firstAfter(h, cutoff)
	if p == 0 {
		return
	}
	w := v.width()
	v.splice(h.off, p*w, 0)
	v.shiftOffsets(i+1, -p*w)
	h.n -= p
	v.setN(i, h.n)
}

// slidingInsert adds timestamp t to counter i, keeping the newest
// h.limit. It reports whether t was kept.
func (v *viewer) slidingInsert(i int, h *header, t int64) bool {
	p := v.firstAfter(h, t) // after equal times: stable order
	if h.n >= h.limit {
		if p == 0 {
			return false // older than every kept entry: trimmed at once
		}
		// Drop the oldest and slide the entries before p down one.
		for j := 0; j < p-1; j++ {
			v.put(h.off, j, v.at(h.off, j+1))
		}
		v.put(h.off, p-1, t)
		return true
	}
	w := v.width()
	v.splice(h.off+p*w, 0, w)
	v.shiftOffsets(i+1, w)
	h.n++
	v.setN(i, h.n)
	v.put(h.off, p, t)
	return true
}

// fits reports whether t can be stored as a narrow timestamp.
func (v *viewer) fits(t int64) bool {
	d := t - v.base
	return d >= 0 && d < narrowSpan
}

// makeRoom makes sure timestamp t can be stored: it moves the narrow base
// when the viewer's timestamps and t span less than 2^32 ticks, and
// otherwise widens every timestamp to two words. Timestamps that can no
// longer count as of the high-water mark hw are dropped first, so a
// viewer the sweeper has not reached yet does not widen for nothing.
func (v *viewer) makeRoom(t, hw int64) {
	if v.wide() || v.fits(t) {
		return
	}
	for i := range v.nkeys() {
		if h := v.header(i); h.algo == fcap.Sliding {
			v.slidingPrune(i, &h, hw-h.window)
		}
	}
	lo, hi, any := t, t, false
	for i := range v.nkeys() {
		h := v.header(i)
		if h.algo != fcap.Sliding || h.n == 0 {
			continue
		}
		any = true
		lo = min(lo, v.at(h.off, 0))
		hi = max(hi, v.at(h.off, h.n-1))
	}
	if !any {
		v.base = t - narrowSpan/2
		return
	}
	if span := hi - lo; span < narrowSpan {
		v.rebase(lo - (narrowSpan-1-span)/2)
		return
	}
	v.widen()
}

// rebase rewrites every narrow timestamp against a new base.
func (v *viewer) rebase(base int64) {
	for i := range v.nkeys() {
		h := v.header(i)
		if h.algo != fcap.Sliding {
			continue
		}
		for j := range h.n {
			v.arena[h.off+j] = uint32(v.base + int64(v.arena[h.off+j]) - base)
		}
	}
	v.base = base
}

// widen rewrites the arena with two-word timestamps.
func (v *viewer) widen() {
	k := v.nkeys()
	extra := 0
	for i := range k {
		if h := v.header(i); h.algo == fcap.Sliding {
			extra += h.n
		}
	}
	old := v.arena
	oldBase := v.base
	b := allocWords(len(old) + extra)
	copy(b, old[:hdrPos(k)])
	w := hdrPos(k)
	for i := range k {
		h := (&viewer{arena: old}).header(i)
		src := old[h.off : h.off+h.n]
		h.off = w
		(&viewer{arena: b}).setHeader(i, h)
		if h.algo == fcap.Sliding {
			for _, d := range src {
				put64(b, w, oldBase+int64(d))
				w += 2
			}
		} else {
			w += copy(b[w:], src)
		}
	}
	v.arena = b
	if v.ext == nil {
		v.ext = &viewerExt{}
	}
	v.ext.wide = true
}

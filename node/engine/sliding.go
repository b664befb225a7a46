package engine

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

// slidingRecord records t in counter i: what its retention window no
// longer holds as of t goes first.
func (v *viewer) slidingRecord(i int, h *header, t int64) {
	v.slidingPrune(i, h, t-h.window)
	v.slidingInsert(i, h, t)
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

// slidingRemove drops one timestamp equal to t from counter i.
func (v *viewer) slidingRemove(i int, h *header, t int64) bool {
	p := v.firstAfter(h, t) - 1 // the last entry at or before t
	if p < 0 || v.at(h.off, p) != t {
		return false
	}
	w := v.width()
	v.splice(h.off+p*w, w, 0)
	v.shiftOffsets(i+1, -w)
	h.n--
	v.setN(i, h.n)
	return true
}

// slidingLive drops the timestamps that can no longer count at hw or
// later, and reports whether any is left.
func (v *viewer) slidingLive(i int, h *header, hw int64) bool {
	v.slidingPrune(i, h, hw-h.window)
	return h.n > 0
}

// slidingHeld is the number of timestamps held.
func (v *viewer) slidingHeld(h *header) int64 { return int64(h.n) }

// slidingDigest feeds word the timestamps inside the window at now.
func (v *viewer) slidingDigest(h *header, now int64, word func(uint64)) {
	for j := v.firstAfter(h, now-h.window); j < h.n; j++ {
		word(uint64(v.at(h.off, j)))
	}
}

func (v *viewer) slidingExport(h *header, k *KeyState) {
	k.Limit = h.limit
	for j := range h.n {
		k.Times = append(k.Times, v.at(h.off, j))
	}
}

// slidingMerge unites the timestamp multisets: each timestamp as many
// times as the copy holding it more often.
func (e *Engine) slidingMerge(v, nv *viewer, nh *header, floor int64) {
	var have []int64
	if j, ok := v.find(nh.hash); ok {
		h := v.header(j)
		for x := range h.n {
			have = append(have, v.at(h.off, x))
		}
	}
	// Both lists ascend: walk them, adding what v lacks.
	var add []int64
	x := 0
	for j := range nh.n {
		t := nv.at(nh.off, j)
		for x < len(have) && have[x] < t {
			x++
		}
		if x < len(have) && have[x] == t {
			x++ // v holds this one
			continue
		}
		if t <= floor {
			continue
		}
		add = append(add, t)
	}
	for _, t := range add {
		e.replay(v, nh, t, 1)
	}
}

func (e *Engine) slidingAdd(v, nv *viewer, nh *header) int64 {
	for j := range nh.n {
		e.replay(v, nh, nv.at(nh.off, j), 1)
	}
	return int64(nh.n)
}

func (v *viewer) slidingCheck(i int, h *header) (int, error) {
	if h.limit < 1 || h.n > h.limit {
		return 0, badState("counter %d holds %d of limit %d", i, h.n, h.limit)
	}
	return h.n * v.width(), nil
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
		if h := v.header(i); KeepsTimes(h.algo) {
			v.slidingPrune(i, &h, hw-h.window)
		}
	}
	lo, hi, any := t, t, false
	for i := range v.nkeys() {
		h := v.header(i)
		if !KeepsTimes(h.algo) || h.n == 0 {
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
		if !KeepsTimes(h.algo) {
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
		if h := v.header(i); KeepsTimes(h.algo) {
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
		if KeepsTimes(h.algo) {
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

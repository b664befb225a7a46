package engine

// Sweep visits up to budget viewer slots, continuing where the previous
// call stopped, and frees what has aged out as of the high-water mark:
// timestamps past their counter's window, counters with nothing left,
// expired reservations, impression ids past their horizon, and viewers
// left with nothing. It holds one stripe lock at a time, for at most
// Config.SweepBatch slots. It returns the slots visited and the viewers
// freed; one call visits each slot at most once.
func (e *Engine) Sweep(budget int) (visited, freed int) {
	e.sweepMu.Lock()
	defer e.sweepMu.Unlock()
	hw := e.hw.Load()
	if hw < 0 {
		return 0, 0
	}
	for stripes := 0; budget > 0 && stripes < len(e.stripes); {
		s := &e.stripes[e.sweepStripe]
		n, f, done := e.sweepStripeBatch(s, min(budget, e.cfg.SweepBatch), hw)
		visited += n
		freed += f
		budget -= max(n, 1)
		if done {
			e.sweepStripe = (e.sweepStripe + 1) % len(e.stripes)
			e.sweepSlot = 0
			stripes++
			if e.sweepStripe == 0 { // a full pass: publish its tally
				e.heldImpressions.Store(e.passImpressions)
				e.heldReservations.Store(e.passReservations)
				e.passImpressions, e.passReservations = 0, 0
			}
		}
	}
	return visited, freed
}

// sweepStripeBatch sweeps up to n slots of s from the cursor. done says
// the stripe's last slot was reached.
func (e *Engine) sweepStripeBatch(s *stripe, n int, hw int64) (visited, freed int, done bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	end := uint32(len(s.chunks)) << chunkBits
	slot := e.sweepSlot
	for ; slot < end && visited < n; slot++ {
		visited++
		ch := s.chunks[slot>>chunkBits]
		if ch == nil {
			slot |= chunkSize - 1 // skip the freed chunk
			continue
		}
		v := &ch[slot&(chunkSize-1)]
		if v.key == 0 {
			continue
		}
		before, keys := v.bytes(), v.nkeys()
		empty := v.sweep(hw)
		e.settle(s, v, before, keys)
		if empty {
			e.charge(s, v.bytes(), 0)
			s.remove(slot)
			e.viewers.Add(-1)
			freed++
			continue
		}
		e.passImpressions += v.impressions()
		if v.ext != nil {
			e.passReservations += int64(len(v.ext.res))
		}
	}
	e.sweepSlot = slot
	return visited, freed, slot >= end
}

// sweep drops what can no longer count at hw or later and reports whether
// nothing is left.
func (v *viewer) sweep(hw int64) bool {
	for i := 0; i < v.nkeys(); {
		h := v.header(i)
		if v.live(i, &h, hw) {
			i++
		} else {
			v.removeKey(i)
		}
	}
	v.dropLanesBit()
	if x := v.ext; x != nil {
		x.pruneReservations(hw)
		x.pruneSeen(hw)
		x.pruneErasure(hw)
		if x.voids != nil {
			if x.voids.prune(hw); len(x.voids.marks) == 0 {
				x.voids = nil
			}
		}
		if x.id != nil {
			if x.id.prune(hw); x.id.empty() {
				x.id = nil
			}
		}
		if x.empty() {
			v.ext = nil
		}
	}
	v.compact()
	return v.nkeys() == 0 && v.ext == nil
}

// impressions counts what the viewer's counters hold: a sliding counter's
// timestamps, a fixed or bucketed counter's counts.
func (v *viewer) impressions() int64 {
	var n int64
	for i := range v.nkeys() {
		h := v.header(i)
		n += v.held(&h)
	}
	return n
}

package engine

// ExportUntil is Export that also returns the time from which nothing in
// the exported state matters any more: every counter's impressions have
// aged out of its window, every remembered id and reservation has
// expired. A log of exported states (node/wal) may drop a state once the
// high-water mark reaches it. It is conservative: the newest time given
// plus the viewer's longest window (and, with a Config.Clock, the
// MaxFuture a given time may run ahead of it), or a later id or
// reservation expiry.
func (e *Engine) ExportUntil(key uint64, dst []byte) ([]byte, int64) {
	s := e.stripeOf(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	return e.exportUntil(dst, key, s.lookup(key))
}

// exportUntil is ExportUntil of the viewer v (nil: absent) under its
// stripe's lock.
func (e *Engine) exportUntil(dst []byte, key uint64, v *viewer) ([]byte, int64) {
	// With a clock, impressions may lie up to MaxFuture ahead of the
	// high-water mark, which stays at the clock: they matter that much
	// longer.
	until := e.hw.Load() + e.futureSlack()
	if v != nil {
		var longest int64
		for i := range v.nkeys() {
			longest = max(longest, v.header(i).window)
		}
		until += longest
		if v.ext != nil {
			for _, x := range v.ext.seen {
				until = max(until, x.untilMillis())
			}
			for _, r := range v.ext.res {
				until = max(until, r.expires)
			}
			until = max(until, v.ext.voids.until())
		}
	}
	return exportViewer(dst, key, v), until
}

// futureSlack is how far ahead of the high-water mark the times the
// engine accepted may lie: MaxFuture with a clock, 0 without (the mark is
// then the newest time given).
func (e *Engine) futureSlack() int64 {
	if e.cfg.Clock == nil {
		return 0
	}
	return e.cfg.MaxFuture
}

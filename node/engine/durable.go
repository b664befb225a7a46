package engine

// ExportUntil is Export that also returns the time from which nothing in
// the exported state matters any more: every counter's impressions have
// aged out of its window, every remembered id and reservation has
// expired. A log of exported states (node/wal) may drop a state once the
// high-water mark reaches it. It is conservative: the newest time given
// plus the viewer's longest window, or a later id or reservation expiry.
func (e *Engine) ExportUntil(key uint64, dst []byte) ([]byte, int64) {
	s := e.stripeOf(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.lookup(key)
	until := e.hw.Load()
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
		}
	}
	return exportViewer(dst, key, v), until
}

package engine

import "github.com/fcap-io/fcap"

// Stats is a snapshot of the engine's size and health.
type Stats struct {
	Viewers      int64 // viewers held
	Keys         int64 // counters held
	Bytes        int64 // estimated bytes of state
	MemoryLimit  int64 // Config.MemoryLimit (0: none)
	OverLimit    bool  // new counters are being refused
	Refused      int64 // requests refused by the memory limit, since start
	ForgottenIDs int64 // impression ids forgotten early (MaxDedupePerViewer), since start
	HighWater    int64 // newest time given, -1 before any
	// Impressions held (a sliding counter's timestamps, a fixed or
	// bucketed counter's counts) and reservations held, as of the
	// sweeper's last full pass (Config.SweepPass); 0 before the first.
	Impressions  int64
	Reservations int64
}

// Stats returns current figures. It takes each stripe's lock briefly.
func (e *Engine) Stats() Stats {
	st := Stats{
		Bytes:        e.bytes.Load(),
		MemoryLimit:  e.cfg.MemoryLimit,
		OverLimit:    e.overLimit(),
		Refused:      e.refused.Load(),
		ForgottenIDs: e.overflow.Load(),
		HighWater:    e.hw.Load(),
		Impressions:  e.heldImpressions.Load(),
		Reservations: e.heldReservations.Load(),
	}
	for i := range e.stripes {
		s := &e.stripes[i]
		s.mu.Lock()
		st.Viewers += int64(s.count)
		st.Keys += int64(s.keys)
		s.mu.Unlock()
	}
	return st
}

// KeyState is one counter of a viewer, for inspection (fcapctl keys).
type KeyState struct {
	Hash      uint64         // KeyHash of the caps that read it
	Algorithm fcap.Algorithm //
	Window    int64          // the window (Sliding: the longest it retains for)
	Limit     int            // Sliding: the most timestamps it retains
	Times     []int64        // Sliding: timestamps, ascending
	Bucket    int64          // Fixed: the calendar window index; Buckets: the newest bucket's index
	Counts    []int64        // Fixed: the count; Buckets: counts, oldest bucket first
	Lane      bool           // another region's counter (lane.go); Hash is then its lane key
}

// Values are the counter's times when its algorithm keeps them
// (KeepsTimes), else its counts.
func (k *KeyState) Values() []int64 {
	if KeepsTimes(k.Algorithm) {
		return k.Times
	}
	return k.Counts
}

// ViewerState is everything the engine holds for one viewer.
type ViewerState struct {
	Keys          []KeyState
	Reservations  int // held, live or not yet swept
	RememberedIDs int // impression ids remembered for idempotency
	VoidedIDs     int // impressions voided, their marks not yet expired (void.go)
	// LinkedTo is the viewer this id counts as when it is a linked device;
	// Devices are the devices linked to it now (identity.go).
	LinkedTo string
	Devices  []string
}

// Viewer returns a copy of one viewer's state, and false if the engine
// holds nothing for it.
func (e *Engine) Viewer(viewer string) (ViewerState, bool) {
	h, s := e.lockViewer(viewer)
	defer s.mu.Unlock()
	v := s.lookup(h)
	if v == nil || v.tombstone() {
		// An erasure's tombstone holds nothing of the viewer.
		return ViewerState{}, false
	}
	var st ViewerState
	for i := range v.nkeys() {
		h := v.header(i)
		k := KeyState{Hash: h.hash, Algorithm: h.algo, Window: h.window, Lane: h.lane}
		v.exportCounter(&h, &k)
		st.Keys = append(st.Keys, k)
	}
	if v.ext != nil {
		st.Reservations = len(v.ext.res)
		st.RememberedIDs = len(v.ext.seen)
		st.VoidedIDs = v.ext.voids.count()
		if id := v.ext.id; id != nil {
			st.LinkedTo = id.viewer
			for _, d := range id.devices {
				if !d.gone {
					st.Devices = append(st.Devices, d.name)
				}
			}
		}
	}
	return st, true
}

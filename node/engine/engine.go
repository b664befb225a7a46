// Package engine is fcap's cap engine: per-viewer frequency counters with
// exact sliding windows, approximate bucketed windows and fixed calendar
// windows, checked and recorded atomically per viewer.
//
// Every operation takes its time as int64 ticks (Unix milliseconds in
// production, anything from 0 in tests), and background work judges age
// by the newest time the engine has been given (HighWater). An
// impression recorded at tick t counts at now iff t > now-window. With a
// Config.Clock the engine also bounds what it is given: a time more than
// Config.MaxFuture ahead of the clock is refused, and the high-water mark
// never passes the clock, so no caller, replica or log can age the
// engine's state ahead of its own time. Without one (tests, replays) it
// never reads a clock and takes every time as given.
//
// State is striped by viewer hash, each stripe behind its own lock, and
// all counters of one viewer live together, so a check of a hundred
// candidates is one lookup and one lock. Operations whose time lags the
// high-water mark by more than a counter's window may find that counter
// already swept; the node bounds how far a request's time may stray from
// its clock.
//
// Of fcap it imports only the vocabulary (package fcap: Cap, Candidate,
// Impression, Verdict and the errors), so the node and tests use it
// directly.
package engine

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fcap-io/fcap"
)

// Engine is the cap engine. It is safe for concurrent use.
type Engine struct {
	cfg     Config
	lim     fcap.Limits // cfg's request limits, for validation
	stripes []stripe
	mask    uint64
	// With Config.Partitions (parts), a key of partition p lives in
	// stripe p + parts*j, j < spread (Stripes >= parts), or in stripe
	// p & mask (fewer stripes than partitions: spread 0).
	parts, spread uint64

	hw       atomic.Int64 // newest time given, -1 before any
	bytes    atomic.Int64 // estimated bytes held
	viewers  atomic.Int64 // live viewers
	refused  atomic.Int64 // requests refused by the memory limit
	overflow atomic.Int64 // dedupe ids forgotten early (MaxDedupePerViewer)

	names names    // counter names, for inspection (names.go)
	lanes laneTags // the regions whose lanes checks count (lane.go)

	sweepMu sync.Mutex
	// The cursor below is guarded by sweepMu.
	sweepStripe int
	sweepSlot   uint32
	// What the current pass tallied so far (guarded by sweepMu), and the
	// totals of the last full pass.
	passImpressions, passReservations int64
	heldImpressions, heldReservations atomic.Int64
}

// New returns an empty engine. It starts no goroutines; call Run to sweep
// idle counters in the background, or Sweep to do it by hand.
func New(cfg Config) (*Engine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.Scopes = append([]string(nil), cfg.Scopes...)
	e := &Engine{
		cfg:     cfg,
		lim:     cfg.Limits(),
		stripes: make([]stripe, cfg.Stripes),
		mask:    uint64(cfg.Stripes - 1),
		parts:   uint64(cfg.Partitions),
	}
	if e.parts > 0 {
		e.spread = uint64(cfg.Stripes) / e.parts
	}
	e.hw.Store(-1)
	return e, nil
}

// Config returns the engine's configuration.
func (e *Engine) Config() Config { return e.cfg }

// HighWater returns the newest time any operation has given the engine,
// or -1 if none has.
func (e *Engine) HighWater() int64 { return e.hw.Load() }

// checkTime validates a time an operation was given: in [0, MaxTime]
// and, with a clock, no more than MaxFuture ahead of it. It returns the
// mark the operation may advance the high-water mark to (observe): t, or
// with a clock the earlier of t and the clock's time, so that a time
// accepted within the skew counts from when it says but does not move
// the engine's "now" past its own.
func (e *Engine) checkTime(t int64) (mark int64, err error) {
	if !validTime(t) {
		return 0, fcap.ErrBadTime
	}
	if c := e.cfg.Clock; c != nil {
		now := c()
		if ahead := t - now; ahead > e.cfg.MaxFuture {
			return 0, fmt.Errorf("%w: %d ticks ahead, at most %d accepted", fcap.ErrFutureTime, ahead, e.cfg.MaxFuture)
		}
		return min(t, now), nil
	}
	return t, nil
}

// observe advances the high-water mark to t, a mark checkTime returned.
func (e *Engine) observe(t int64) {
	for {
		cur := e.hw.Load()
		if t <= cur || e.hw.CompareAndSwap(cur, t) {
			return
		}
	}
}

func (e *Engine) stripeOf(h uint64) *stripe { return &e.stripes[e.stripeIndex(h)] }

// stripeIndex is the stripe of key h: its low bits, or with partitions
// its partition's stripes (Engine.parts), chosen among them by the
// quotient's low 32 bits (multiply-shift, no second division).
func (e *Engine) stripeIndex(h uint64) uint64 {
	if e.parts == 0 {
		return h & e.mask
	}
	q := h / e.parts
	p := h - q*e.parts
	if e.spread == 0 {
		return p & e.mask
	}
	return p + e.parts*((q&0xffffffff)*e.spread>>32)
}

// lockViewer hashes viewer and locks its stripe, returning both; the
// caller unlocks s.mu.
func (e *Engine) lockViewer(viewer string) (h uint64, s *stripe) {
	h = fcap.ViewerKey(viewer)
	s = e.stripeOf(h)
	s.mu.Lock()
	return h, s
}

// Run sweeps idle counters every Config.SweepInterval until ctx is done.
// Each step does bounded work under one stripe lock at a time, sized so
// that every viewer is visited about once per Config.SweepPass.
func (e *Engine) Run(ctx context.Context) {
	t := time.NewTicker(e.cfg.SweepInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			e.Sweep(e.sweepBudget())
		}
	}
}

func (e *Engine) sweepBudget() int {
	steps := int64(e.cfg.SweepPass / e.cfg.SweepInterval)
	// Slots outnumber viewers by the free slots of partial chunks; a
	// little headroom covers them.
	slots := e.viewers.Load() + e.viewers.Load()/4 + int64(len(e.stripes))*chunkSize
	return int(max(int64(e.cfg.SweepBatch), slots/max(steps, 1)))
}

// charge accounts for a viewer's change in estimated size.
func (e *Engine) charge(s *stripe, before, after int64) {
	if d := after - before; d != 0 {
		s.bytes += d
		e.bytes.Add(d)
	}
}

// overLimit reports whether new state must be refused.
func (e *Engine) overLimit() bool {
	return e.cfg.MemoryLimit > 0 && e.bytes.Load() >= e.cfg.MemoryLimit
}

// keyHashes returns the key hash of every cap, in buf's storage when it
// is large enough.
func keyHashes(buf []uint64, caps []fcap.Cap) []uint64 {
	return keyHashesAppend(buf[:0], caps)
}

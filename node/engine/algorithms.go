package engine

import (
	"fmt"

	"github.com/fcap-io/fcap"
)

// The operations on one counter, by its algorithm.
//
// Each algorithm is one file holding its whole set of operations
// (sliding.go, buckets.go, fixed.go); the functions below send each
// operation to the counter's algorithm, one switch per operation. The
// calls stay direct, so a header passed by pointer stays on the stack:
// the check counts hundreds of counters a request, and a call through an
// interface or a func value would move each header to the heap.
//
// An unknown algorithm here is a programmer error and panics: a request's
// caps are checked before they reach a counter (fcap.Limits.CheckCap,
// validateCaps), and so is an imported state (checkState).
//
// Adding an algorithm: its file, its constant in package fcap, and its
// case in each function below; TestAlgorithmOps runs every operation on
// every algorithm, so a missing case fails it.

// unknownAlgorithm is the message of the panic on an unknown algorithm,
// kept out of line so the operations stay small enough to inline.
//
//go:noinline
func unknownAlgorithm(a fcap.Algorithm) string {
	return "engine: no operation for a counter of " + a.String() + " (algorithms.go)"
}

// newWords is the data size of a new counter of algorithm a for a window,
// given the configured number of sub-buckets; 0 for one that grows with
// what it records.
func newWords(a fcap.Algorithm, window int64, buckets int) int {
	switch a {
	case fcap.Sliding:
		return 0
	case fcap.Fixed:
		return fixedWords
	case fcap.Buckets:
		return bucketWords(window, buckets)
	default:
		panic(unknownAlgorithm(a))
	}
}

// KeepsTimes reports whether a counter of algorithm a keeps the times of
// its impressions (n counts them, and they widen with the viewer), not
// counts: its KeyState holds Times, not Counts. a must be known
// (fcap.ParseAlgorithm, fcap.Limits.CheckCap).
func KeepsTimes(a fcap.Algorithm) bool {
	switch a {
	case fcap.Sliding:
		return true
	case fcap.Fixed, fcap.Buckets:
		return false
	default:
		panic(unknownAlgorithm(a))
	}
}

// count is how many impressions counter h counts at now for a cap of the
// given window (a sliding log serves caps of several windows; the others
// count for their own).
func (v *viewer) count(h *header, now, window int64) int64 {
	switch h.algo {
	case fcap.Sliding:
		return v.slidingCount(h, now, window)
	case fcap.Fixed:
		return v.fixedCount(h, now)
	case fcap.Buckets:
		return v.bucketsCount(h, now)
	default:
		panic(unknownAlgorithm(h.algo))
	}
}

// recordAt records one impression at t in counter i.
func (v *viewer) recordAt(i int, h *header, t int64) {
	switch h.algo {
	case fcap.Sliding:
		v.slidingRecord(i, h, t)
	case fcap.Fixed:
		v.fixedRecord(h, t)
	case fcap.Buckets:
		v.bucketsRecord(h, t)
	default:
		panic(unknownAlgorithm(h.algo))
	}
}

// uncount takes one impression at t out of counter i, if it still holds
// one, and reports whether it did.
func (v *viewer) uncount(i int, h *header, t int64) bool {
	switch h.algo {
	case fcap.Sliding:
		return v.slidingRemove(i, h, t)
	case fcap.Fixed:
		return v.fixedRemove(h, t)
	case fcap.Buckets:
		return v.bucketsRemove(h, t)
	default:
		panic(unknownAlgorithm(h.algo))
	}
}

// live drops from counter i what can no longer count at hw or later, and
// reports whether the counter can still count.
func (v *viewer) live(i int, h *header, hw int64) bool {
	switch h.algo {
	case fcap.Sliding:
		return v.slidingLive(i, h, hw)
	case fcap.Fixed:
		return v.fixedLive(h, hw)
	case fcap.Buckets:
		return v.bucketsLive(h, hw)
	default:
		panic(unknownAlgorithm(h.algo))
	}
}

// held counts the impressions counter h holds, counting or not.
func (v *viewer) held(h *header) int64 {
	switch h.algo {
	case fcap.Sliding:
		return v.slidingHeld(h)
	case fcap.Fixed:
		return v.fixedHeld(h)
	case fcap.Buckets:
		return v.bucketsHeld(h)
	default:
		panic(unknownAlgorithm(h.algo))
	}
}

// digestCounter feeds word what counter h counts at now (digest.go).
func (v *viewer) digestCounter(h *header, now int64, word func(uint64)) {
	switch h.algo {
	case fcap.Sliding:
		v.slidingDigest(h, now, word)
	case fcap.Fixed:
		v.fixedDigest(h, now, word)
	case fcap.Buckets:
		v.bucketsDigest(h, now, word)
	default:
		panic(unknownAlgorithm(h.algo))
	}
}

// exportCounter fills k with what counter h holds, for inspection.
func (v *viewer) exportCounter(h *header, k *KeyState) {
	switch h.algo {
	case fcap.Sliding:
		v.slidingExport(h, k)
	case fcap.Fixed:
		v.fixedExport(h, k)
	case fcap.Buckets:
		v.bucketsExport(h, k)
	default:
		panic(unknownAlgorithm(h.algo))
	}
}

// mergeCounter merges counter nh of nv, a copy of v, into v: v ends up
// counting what either copy counted, but what is dated at or before
// floor (-1: nothing) (merge.go).
func (e *Engine) mergeCounter(v, nv *viewer, nh *header, floor int64) {
	switch nh.algo {
	case fcap.Sliding:
		e.slidingMerge(v, nv, nh, floor)
	case fcap.Fixed:
		e.fixedMerge(v, nv, nh, floor)
	case fcap.Buckets:
		e.bucketsMerge(v, nv, nh, floor)
	default:
		panic(unknownAlgorithm(nh.algo))
	}
}

// addCounter adds everything counter nh of nv, another viewer, counted to
// v and returns the impressions added (identity.go).
func (e *Engine) addCounter(v, nv *viewer, nh *header) int64 {
	switch nh.algo {
	case fcap.Sliding:
		return e.slidingAdd(v, nv, nh)
	case fcap.Fixed:
		return e.fixedAdd(v, nv, nh)
	case fcap.Buckets:
		return e.bucketsAdd(v, nv, nh)
	default:
		panic(unknownAlgorithm(nh.algo))
	}
}

// checkCounter checks the header of an imported counter i, h, and
// returns the size of its data, or why it is not one the engine could
// have built (replica.go). The caller has checked its algorithm is known.
func (v *viewer) checkCounter(i int, h *header) (size int, err error) {
	switch h.algo {
	case fcap.Sliding:
		return v.slidingCheck(i, h)
	case fcap.Fixed:
		return fixedCheck(i, h)
	case fcap.Buckets:
		return bucketsCheck(i, h)
	default:
		panic(unknownAlgorithm(h.algo))
	}
}

// badState is an error for an imported state the engine could not have
// built.
func badState(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrBadState}, args...)...)
}

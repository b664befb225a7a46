package engine

import (
	"cmp"
	"math"
	"slices"
)

// The impression ids a viewer remembers for idempotency: a slice sorted
// by id hash, 12 bytes an id (a map would take about 40).

// seenID is one remembered id. The hash is kept as two words so the
// struct is 4-byte aligned: with a uint64 it would be padded to 16 bytes,
// and ids are most of a recording viewer's memory.
type seenID struct {
	hi, lo uint32 // xxhash of the impression id
	until  uint32 // Unix seconds, rounded up: forgotten once the high-water mark reaches it
}

func newSeen(hash uint64, untilMillis int64) seenID {
	return seenID{hi: uint32(hash >> 32), lo: uint32(hash), until: seenSeconds(untilMillis)}
}

func (s seenID) hash() uint64 { return uint64(s.hi)<<32 | uint64(s.lo) }

// untilMillis is when the id may be forgotten, in milliseconds.
func (s seenID) untilMillis() int64 { return int64(s.until) * 1000 }

// seenSeconds rounds a horizon in milliseconds up to whole seconds: an id
// is remembered up to a second longer, never shorter. Horizons outside
// 1970-2106 are clamped.
func seenSeconds(millis int64) uint32 {
	switch {
	case millis <= 0:
		return 0
	case millis >= math.MaxUint32*1000:
		return math.MaxUint32
	}
	return uint32((millis + 999) / 1000)
}

func cmpSeen(s seenID, hash uint64) int { return cmp.Compare(s.hash(), hash) }

func cmpSeenIDs(a, b seenID) int { return cmp.Compare(a.hash(), b.hash()) }

// hasSeen reports whether the viewer remembers the id hash.
func (x *viewerExt) hasSeen(hash uint64) bool {
	_, ok := slices.BinarySearchFunc(x.seen, hash, cmpSeen)
	return ok
}

// addSeen remembers an id hash until the given time.
func (x *viewerExt) addSeen(hash uint64, until int64) {
	i, ok := slices.BinarySearchFunc(x.seen, hash, cmpSeen)
	if ok {
		x.seen[i].until = max(x.seen[i].until, seenSeconds(until))
		return
	}
	if len(x.seen) == cap(x.seen) {
		// Grow by an eighth, to the allocator's size class, not by
		// doubling: ids are most of a busy viewer's memory.
		grown := append([]seenID(nil), make([]seenID, len(x.seen)+len(x.seen)/8+1)...)
		x.seen = grown[:copy(grown, x.seen)]
	}
	x.seen = slices.Insert(x.seen, i, newSeen(hash, until))
}

// pruneSeen forgets the ids whose horizon has passed at now.
func (x *viewerExt) pruneSeen(now int64) {
	x.seen = slices.DeleteFunc(x.seen, func(s seenID) bool { return s.untilMillis() <= now })
	if len(x.seen) == 0 {
		x.seen = nil
	} else if cap(x.seen) > 2*len(x.seen)+8 {
		x.seen = slices.Clip(slices.Clone(x.seen))
	}
}

// forgetOldest drops the half of the ids closest to their horizon and
// returns how many it dropped.
func (x *viewerExt) forgetOldest() int {
	horizons := make([]uint32, len(x.seen))
	for i, s := range x.seen {
		horizons[i] = s.until
	}
	slices.Sort(horizons)
	cut := horizons[len(horizons)/2]
	before := len(x.seen)
	x.seen = slices.DeleteFunc(x.seen, func(s seenID) bool { return s.until <= cut })
	return before - len(x.seen)
}

package engine

import (
	"cmp"
	"slices"
)

// The impression ids a viewer remembers for idempotency: a slice sorted
// by id hash, 16 bytes an id (a map would take about 40).

type seenID struct {
	hash  uint64 // xxhash of the impression id
	until int64  // forgotten once the high-water mark reaches it
}

func cmpSeen(s seenID, hash uint64) int { return cmp.Compare(s.hash, hash) }

// hasSeen reports whether the viewer remembers the id hash.
func (x *viewerExt) hasSeen(hash uint64) bool {
	_, ok := slices.BinarySearchFunc(x.seen, hash, cmpSeen)
	return ok
}

// addSeen remembers an id hash until the given time.
func (x *viewerExt) addSeen(hash uint64, until int64) {
	i, ok := slices.BinarySearchFunc(x.seen, hash, cmpSeen)
	if ok {
		x.seen[i].until = max(x.seen[i].until, until)
		return
	}
	if len(x.seen) == cap(x.seen) {
		// Grow by an eighth, to the allocator's size class, not by
		// doubling: ids are most of a busy viewer's memory.
		grown := append([]seenID(nil), make([]seenID, len(x.seen)+len(x.seen)/8+1)...)
		x.seen = grown[:copy(grown, x.seen)]
	}
	x.seen = slices.Insert(x.seen, i, seenID{hash, until})
}

// pruneSeen forgets the ids whose horizon has passed at now.
func (x *viewerExt) pruneSeen(now int64) {
	x.seen = slices.DeleteFunc(x.seen, func(s seenID) bool { return s.until <= now })
	if len(x.seen) == 0 {
		x.seen = nil
	} else if cap(x.seen) > 2*len(x.seen)+8 {
		x.seen = slices.Clip(slices.Clone(x.seen))
	}
}

// forgetOldest drops the half of the ids closest to their horizon and
// returns how many it dropped.
func (x *viewerExt) forgetOldest() int {
	horizons := make([]int64, len(x.seen))
	for i, s := range x.seen {
		horizons[i] = s.until
	}
	slices.Sort(horizons)
	cut := horizons[len(horizons)/2]
	before := len(x.seen)
	x.seen = slices.DeleteFunc(x.seen, func(s seenID) bool { return s.until <= cut })
	return before - len(x.seen)
}

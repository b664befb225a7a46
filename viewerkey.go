package fcap

import "github.com/cespare/xxhash/v2"

// ViewerKey is the 64-bit key of a viewer id: xxhash.Sum64String(viewer),
// except that 0 becomes 1 (0 marks a free slot in the cap engine's
// table). The ring routes a viewer by its key (ring.PartitionOf) and the
// cap engine stores the viewer under it, so the keys a node holds map to
// the partitions their viewers route to.
//
// Like counters, viewers are known by this hash and not by their id: it
// saves the id's bytes and a cache miss on every lookup. Two viewers of
// one node share counters with probability about N*N/2^65 for N viewers
// (3 in a million for 10 million viewers).
func ViewerKey(viewer string) uint64 {
	if h := xxhash.Sum64String(viewer); h != 0 {
		return h
	}
	return 1
}

package ring

import (
	"encoding/binary"
	"math"

	"github.com/cespare/xxhash/v2"
)

// PartitionOf returns the partition of a viewer key (fcap.ViewerKey):
// key % partitions. It
// returns 0 if partitions is not positive.
func PartitionOf(key uint64, partitions int) int {
	if partitions <= 0 {
		return 0
	}
	return int(key % uint64(partitions))
}

// xxhasher is the consistent.Hasher of a ring: xxhash of the bytes.
type xxhasher struct{}

// Sum64 returns the xxhash of b.
func (xxhasher) Sum64(b []byte) uint64 { return xxhash.Sum64(b) }

// epochVersion is hashed first into every epoch. Change it whenever Build
// would compute a different table for the same Config and members (a new
// placement rule, a new consistent), so nodes running the two versions
// side by side see different epochs.
const epochVersion = 1

// computeEpoch returns the epoch of a ring: a 64-bit xxhash of its
// content, never 0.
//
// The content is epochVersion, the config (partitions, replicas, virtual
// nodes, load bound), every member in name order (Name, Addr, HTTPAddr,
// State, Incarnation; strings length-prefixed so no two member lists
// encode alike) and the owners table. Two nodes with the same membership
// view and config compute the same epoch; any change to any of it changes
// the epoch (but for a 2^-64 chance of collision). An epoch says "same" or
// "different", not "newer": a client that sees an epoch other than its
// own refreshes its topology. 0 means "unknown" on the wire, so a hash of
// 0 becomes 1.
func computeEpoch(partitions, replicas, virtualNodes int, load float64, members []Member, table []uint16) uint64 {
	d := xxhash.New()
	var b [8]byte
	putU64 := func(v uint64) {
		binary.LittleEndian.PutUint64(b[:], v)
		_, _ = d.Write(b[:])
	}
	putString := func(s string) {
		putU64(uint64(len(s)))
		_, _ = d.WriteString(s)
	}
	putU64(epochVersion)
	putU64(uint64(partitions))
	putU64(uint64(replicas))
	putU64(uint64(virtualNodes))
	putU64(math.Float64bits(load))
	putU64(uint64(len(members)))
	for _, m := range members {
		putString(m.Name)
		putString(m.Addr)
		putString(m.HTTPAddr)
		putU64(uint64(m.State))
		putU64(uint64(m.Incarnation))
	}
	putU64(uint64(len(table)))
	for _, o := range table {
		binary.LittleEndian.PutUint16(b[:2], o)
		_, _ = d.Write(b[:2])
	}
	if e := d.Sum64(); e != 0 {
		return e
	}
	return 1
}

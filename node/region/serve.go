package region

import (
	"sync"
	"time"

	"github.com/fcap-io/fcap/proto"
	"github.com/fcap-io/fcap/ring"
)

// Answering RegionDigest (the node's handler calls ServeDigest). The
// sender asks for a partition a slice at a time, and finding a
// partition's viewers is a pass over every viewer the node holds; so the
// viewers of the partition last asked for are kept, by slice, for the
// next slices of the same cut (servedTTL at most, for one ring epoch;
// slice 0 starts a comparison and walks the viewers again): a partition
// cut in k slices costs one pass, not k. A viewer added meanwhile is
// missing from the answer, which only makes the sender ship it again.

// servedTTL is how long the viewers of the partition last digested are
// used for its next slices.
const servedTTL = time.Minute

// served is the partition last digested: its viewers by slice.
type served struct {
	epoch       uint64
	parts, p, n uint32
	at          time.Time
	bySlice     [][]uint64
}

// digestServer answers one RegionDigest at a time.
type digestServer struct {
	slot chan struct{} // held while one is answered

	mu sync.Mutex
	// last is guarded by mu.
	last served
}

// DigestSlot takes the slot a RegionDigest is answered in, and reports
// false when another holds it: answering one may be a pass over every
// viewer, so a node answers one at a time. release frees it.
func (ls *Links) DigestSlot() (release func(), ok bool) {
	select {
	case ls.served.slot <- struct{}{}:
		return func() { <-ls.served.slot }, true
	default:
		return nil, false
	}
}

// ServeDigest answers m, a RegionDigest the caller checked (names a
// peer region, the node's partition count, a partition it is primary
// of in the ring of epoch), while holding the DigestSlot: keys walks
// every viewer the node holds (engine.Keys), digest is the origin's
// lane digest of one (engine.LaneDigest), 0 when it counts nothing. At
// most MaxRegionDigests digests are answered; past them the result
// says Truncated.
func (ls *Links) ServeDigest(m *proto.RegionDigest, epoch uint64, keys func(fn func(key uint64) bool), digest func(key uint64) uint64) *proto.RegionDigestResult {
	n := max(m.Slices, 1)
	slice := uint32(0)
	if n > 1 {
		slice = m.Slice
	}
	s := &ls.served
	s.mu.Lock()
	defer s.mu.Unlock()
	now := ls.clock()
	if l := &s.last; slice == 0 || l.bySlice == nil || l.epoch != epoch || l.parts != m.Partitions || l.p != m.Partition || l.n != n || now.Sub(l.at) > servedTTL || now.Before(l.at) {
		*l = served{epoch: epoch, parts: m.Partitions, p: m.Partition, n: n, at: now, bySlice: make([][]uint64, n)}
		keys(func(key uint64) bool {
			if ring.PartitionOf(key, int(m.Partitions)) == int(m.Partition) {
				i := (key / uint64(m.Partitions)) % uint64(n)
				l.bySlice[i] = append(l.bySlice[i], key)
			}
			return true
		})
	}
	res := &proto.RegionDigestResult{Epoch: epoch}
	for _, key := range s.last.bySlice[slice] {
		d := digest(key)
		if d == 0 {
			continue
		}
		if len(res.Digests) == proto.MaxRegionDigests {
			res.Truncated = true
			break
		}
		res.Digests = append(res.Digests, proto.ViewerDigest{Key: key, Sum: d})
	}
	return res
}

package region

import (
	"strings"
	"sync"
	"time"

	"github.com/fcap-io/fcap/proto"
	"github.com/fcap-io/fcap/ring"
)

// Answering RegionDigest (the node's handler calls ServeDigest). Finding
// a partition's viewers is a pass over every viewer the node holds, and
// a peer region's node compares every partition it is primary of in
// turn (one request a partition, or a slice of one): a pass per request
// made a round cost the answering node as many passes as it is primary
// of partitions (about 90 of 271 in a region of three), most of the
// region digests' CPU in a loaded bed. So one pass gathers the viewers
// of every partition the node is primary of, by partition, and answers
// the requests of the next servedFresh from them (the slices of a
// comparison begun meanwhile, for servedTTL), for one ring epoch; a
// region that compares a partition again (a catch-up right after a
// round) gets a new pass, so that what it sent since counts. Past
// maxServedKeys viewers a pass keeps only the partition asked for, as
// the memory the lists take is the node's to bound.
//
// A viewer added after the pass is missing from the answers, which only
// makes the sender ship it again (a merge is idempotent); one removed
// since digests to 0 and is left out, as if absent. Digests themselves
// are always read at the time of the answer.

// servedFresh is how old a pass may be to answer a new comparison
// (slice 0 of a partition); servedTTL how old for the next slices of a
// comparison begun.
const (
	servedFresh = 10 * time.Second
	servedTTL   = time.Minute
)

// maxServedKeys bounds the viewers one pass keeps (8 bytes each); a
// variable for the tests.
var maxServedKeys = 1 << 21

// served is the last pass: the viewers of the partitions it kept.
type served struct {
	epoch    uint64
	parts    uint32
	at       time.Time
	byPart   map[uint32][]uint64
	answered map[compared]bool // the comparisons begun from this pass
}

// compared is a partition a peer region compared.
type compared struct {
	origin string
	p      uint32
}

// fresh reports whether s answers m (under epoch) at now: a new
// comparison (first) within servedFresh of the pass and not begun from
// it before by the same region, a comparison's next slice within
// servedTTL.
func (s *served) fresh(m *proto.RegionDigest, epoch uint64, first bool, now time.Time) bool {
	if s.byPart == nil || s.epoch != epoch || s.parts != m.Partitions || now.Before(s.at) {
		return false
	}
	if _, ok := s.byPart[m.Partition]; !ok {
		return false
	}
	age := now.Sub(s.at)
	if !first {
		return age <= servedTTL
	}
	return age <= servedFresh && len(s.answered) < maxAnswered && !s.answered[compared{m.Origin, m.Partition}]
}

// maxAnswered bounds served.answered (origins are names a caller sent):
// past it a new comparison gets a new pass, as every one did before
// passes were kept.
const maxAnswered = 1 << 12

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
// the viewers the node holds in the partitions it marks
// (engine.PartitionKeys), primary lists the
// partitions the node is primary of in that ring (read only for a pass),
// digest is the origin's lane digest of one viewer (engine.LaneDigest),
// 0 when it counts nothing. At most MaxRegionDigests digests are
// answered; past them the result says Truncated.
func (ls *Links) ServeDigest(m *proto.RegionDigest, epoch uint64, keys func(want []bool, fn func(key uint64) bool), primary func() []int, digest func(key uint64) uint64) *proto.RegionDigestResult {
	first := m.Slices <= 1 || m.Slice == 0
	s := &ls.served
	s.mu.Lock()
	defer s.mu.Unlock()
	now := ls.clock()
	if !s.last.fresh(m, epoch, first, now) {
		s.last = pass(m, epoch, keys, primary(), now)
	}
	if first && len(s.last.answered) < maxAnswered && !s.last.answered[compared{m.Origin, m.Partition}] {
		// m.Origin aliases the request's frame, which the reader reuses.
		s.last.answered[compared{strings.Clone(m.Origin), m.Partition}] = true
	}
	res := &proto.RegionDigestResult{Epoch: epoch}
	for _, key := range s.last.byPart[m.Partition] {
		if m.Slices > 1 && !m.InSlice(key) {
			continue
		}
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

// pass walks keys once over m's partition and every partition in
// primary, and keeps their viewers by partition; past maxServedKeys,
// only m's partition's.
func pass(m *proto.RegionDigest, epoch uint64, keys func(want []bool, fn func(key uint64) bool), primary []int, now time.Time) served {
	want := make([]bool, m.Partitions)
	want[m.Partition] = true
	for _, p := range primary {
		if p >= 0 && p < len(want) {
			want[p] = true
		}
	}
	byPart := map[uint32][]uint64{}
	kept := 0
	only := false // past maxServedKeys: m's partition alone
	keys(want, func(key uint64) bool {
		p := uint32(ring.PartitionOf(key, int(m.Partitions)))
		if !want[p] || only && p != m.Partition {
			return true
		}
		if kept == maxServedKeys && !only {
			// Too many to keep them all: only the partition asked for.
			own := byPart[m.Partition]
			clear(byPart)
			byPart[m.Partition] = own
			only = true
			kept = len(own)
			if p != m.Partition {
				return true
			}
		}
		byPart[p] = append(byPart[p], key)
		kept++
		return true
	})
	for p, w := range want {
		if _, ok := byPart[uint32(p)]; w && !ok && (!only || uint32(p) == m.Partition) {
			byPart[uint32(p)] = nil // walked, and holds no viewer: answered empty
		}
	}
	return served{epoch: epoch, parts: m.Partitions, at: now, byPart: byPart, answered: map[compared]bool{}}
}

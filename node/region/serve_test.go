package region

import (
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/fcap-io/fcap/proto"
)

// digestBed is a Links answering RegionDigests of held viewers, with a
// clock the test moves and a count of the passes over the viewers.
type digestBed struct {
	t      *testing.T
	ls     *Links
	mu     sync.Mutex
	now    time.Time
	held   []uint64
	passes int
}

// digestParts and digestPerPartition shape the viewers a digestBed
// holds: past MaxRegionDigests a partition, 4 in 5 of which count
// anything.
const digestParts, digestPerPartition = 7, proto.MaxRegionDigests*5/4 + 100

// digestPrimary are the partitions the bed's node is primary of.
var digestPrimary = []int{1, 3, 4}

func newDigestBed(t *testing.T) *digestBed {
	b := &digestBed{t: t, now: time.Unix(1_800_000_000, 0)}
	ls, err := New(Config{Name: "b"}, Deps{Logger: quiet, Clock: func() time.Time {
		b.mu.Lock()
		defer b.mu.Unlock()
		return b.now
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ls.Close)
	b.ls = ls
	for k := uint64(1); k <= digestParts*digestPerPartition; k++ {
		b.held = append(b.held, k)
	}
	return b
}

func (b *digestBed) advance(d time.Duration) {
	b.mu.Lock()
	b.now = b.now.Add(d)
	b.mu.Unlock()
}

// ask asks, as region a, for slice s of n of partition p under epoch
// and checks the answer: only viewers of the slice, each with its
// digest.
func (b *digestBed) ask(p, n, s uint32, epoch uint64) *proto.RegionDigestResult {
	b.t.Helper()
	return b.askFrom("a", p, n, s, epoch)
}

func (b *digestBed) askFrom(origin string, p, n, s uint32, epoch uint64) *proto.RegionDigestResult {
	b.t.Helper()
	keys := func(want []bool, fn func(uint64) bool) {
		b.passes++
		for _, k := range b.held {
			if !want[k%uint64(len(want))] {
				continue
			}
			if !fn(k) {
				return
			}
		}
	}
	primary := func() []int { return digestPrimary }
	digest := func(k uint64) uint64 {
		if k%5 == 0 {
			return 0 // counts nothing
		}
		return k * 3
	}
	m := &proto.RegionDigest{Origin: origin, Partitions: digestParts, Partition: p, Slices: n, Slice: s}
	res := b.ls.ServeDigest(m, epoch, keys, primary, digest)
	for _, d := range res.Digests {
		if !m.InSlice(d.Key) || d.Sum != d.Key*3 {
			b.t.Fatalf("slice %d/%d of partition %d answered %+v", s, n, p, d)
		}
	}
	return res
}

// TestServeDigestOnePassForManyPartitions: one pass over the viewers
// answers the slices of a comparison and the comparisons of every
// partition the node is primary of that begin within servedFresh; a new
// comparison after that, one a region begins again from the same pass,
// another epoch, a partition the pass did not keep, or a slice past
// servedTTL walk them again. Each answer holds
// the viewers of its slice that count anything, at most
// MaxRegionDigests of them, past which it says Truncated.
func TestServeDigestOnePassForManyPartitions(t *testing.T) {
	b := newDigestBed(t)
	total := 0
	for s := range uint32(4) {
		res := b.ask(3, 4, s, 1)
		if res.Truncated {
			t.Fatalf("slice %d of 4 truncated", s)
		}
		total += len(res.Digests)
	}
	if want := digestPerPartition * 4 / 5; total < want-1 || total > want+1 {
		t.Errorf("%d digests over the 4 slices, want about %d (those counting anything)", total, want)
	}
	b.ask(4, 4, 0, 1) // another partition the node is primary of
	b.ask(1, 2, 0, 1)
	b.askFrom("c", 3, 4, 0, 1) // another region compares partition 3
	if b.passes != 1 {
		t.Errorf("%d passes for the comparisons of three partitions within %v, want 1", b.passes, servedFresh)
	}
	b.ask(3, 4, 0, 1) // a compares partition 3 again: what it shipped since counts
	if b.passes != 2 {
		t.Errorf("a comparison of partition 3 again by the same region: %d passes in all, want 2", b.passes)
	}
	for i, c := range []struct {
		p, n, s uint32
		epoch   uint64
		after   time.Duration
		walks   bool
	}{
		{3, 4, 1, 1, servedFresh + time.Second, false}, // a comparison's next slice, within servedTTL
		{3, 4, 0, 1, 0, true},                          // a new comparison past servedFresh
		{4, 4, 1, 2, 0, true},                          // another epoch
		{2, 4, 0, 2, 0, true},                          // a partition the pass did not keep
		{2, 4, 1, 2, servedTTL + time.Second, true},    // a slice past servedTTL
	} {
		b.advance(c.after)
		was := b.passes
		b.ask(c.p, c.n, c.s, c.epoch)
		if walked := b.passes > was; walked != c.walks {
			t.Errorf("case %d %+v: walked the viewers %v, want %v", i, c, walked, c.walks)
		}
	}
	res := b.ask(3, 1, 0, 2)
	if !res.Truncated || len(res.Digests) != proto.MaxRegionDigests {
		t.Errorf("a whole partition of more than %d viewers answered %d digests, truncated %v", proto.MaxRegionDigests, len(res.Digests), res.Truncated)
	}
}

// TestServeDigestPastTheBound: a pass that finds more viewers than
// maxServedKeys keeps only the partition asked for, and answers it
// whole; the next partition walks again.
func TestServeDigestPastTheBound(t *testing.T) {
	defer func(was int) { maxServedKeys = was }(maxServedKeys)
	maxServedKeys = digestPerPartition + digestPerPartition/2 // more than one partition, less than two
	b := newDigestBed(t)
	for _, p := range []uint32{4, 1, 3} { // each pass passes the bound: it keeps only the partition asked for
		was := b.passes
		total := 0
		for s := range uint32(4) {
			total += len(b.ask(p, 4, s, 1).Digests)
		}
		if want := digestPerPartition * 4 / 5; total < want-1 || total > want+1 {
			t.Errorf("partition %d: %d digests over the 4 slices, want about %d", p, total, want)
		}
		if b.passes != was+1 {
			t.Errorf("partition %d: %d passes, want 1 (past the bound only the partition asked for is kept)", p, b.passes-was)
		}
	}
}

// TestServeDigestKeepsItsOwnOrigin: a decoded RegionDigest's Origin
// aliases the request's frame, which the connection's reader reuses for
// the next one. The comparisons a pass remembers must not change when
// that buffer does: region a comparing partition 3 again gets a new
// pass even after a's frame was overwritten.
func TestServeDigestKeepsItsOwnOrigin(t *testing.T) {
	b := newDigestBed(t)
	frame := []byte("a")
	origin := unsafe.String(&frame[0], len(frame)) // as proto.Decode leaves it
	b.askFrom(origin, 3, 4, 0, 1)
	frame[0] = 'c' // the reader's next frame
	was := b.passes
	b.askFrom("a", 3, 4, 0, 1)
	if b.passes != was+1 {
		t.Fatalf("region a compared partition 3 again from the same pass: %d new passes, want 1 (the remembered origin changed with the frame)", b.passes-was)
	}
}

package region

import (
	"testing"

	"github.com/fcap-io/fcap/proto"
)

// TestServeDigestWalksOncePerPartition: the slices of one partition's
// comparison are answered from one pass over the viewers; slice 0 (a new
// comparison), another partition, another cut or another epoch walk
// them again. Each answer holds the viewers of its slice that count
// anything, at most MaxRegionDigests of them, past which it says
// Truncated.
func TestServeDigestWalksOncePerPartition(t *testing.T) {
	ls, err := New(Config{Name: "b"}, Deps{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer ls.Close()
	const parts, perPartition = 7, proto.MaxRegionDigests*5/4 + 100 // 4 in 5 count: past the bound
	var held []uint64
	for k := uint64(1); k <= parts*perPartition; k++ {
		held = append(held, k)
	}
	passes := 0
	keys := func(fn func(uint64) bool) {
		passes++
		for _, k := range held {
			if !fn(k) {
				return
			}
		}
	}
	digest := func(k uint64) uint64 {
		if k%5 == 0 {
			return 0 // counts nothing
		}
		return k * 3
	}
	ask := func(p, n, s uint32, epoch uint64) *proto.RegionDigestResult {
		t.Helper()
		m := &proto.RegionDigest{Origin: "a", Partitions: parts, Partition: p, Slices: n, Slice: s}
		res := ls.ServeDigest(m, epoch, keys, digest)
		for _, d := range res.Digests {
			if !m.InSlice(d.Key) || d.Sum != d.Key*3 {
				t.Fatalf("slice %d/%d of partition %d answered %+v", s, n, p, d)
			}
		}
		return res
	}
	total := 0
	for s := range uint32(4) {
		res := ask(3, 4, s, 1)
		if res.Truncated {
			t.Fatalf("slice %d of 4 truncated", s)
		}
		total += len(res.Digests)
	}
	if passes != 1 {
		t.Errorf("%d passes for 4 slices of one partition, want 1", passes)
	}
	if want := perPartition * 4 / 5; total < want-1 || total > want+1 {
		t.Errorf("%d digests over the 4 slices, want about %d (those counting anything)", total, want)
	}
	for i, c := range []struct {
		p, n, s uint32
		epoch   uint64
	}{
		{3, 4, 0, 1}, // a new comparison
		{3, 4, 1, 2}, // another epoch
		{4, 4, 1, 2}, // another partition
		{4, 8, 1, 2}, // another cut
	} {
		ask(c.p, c.n, c.s, c.epoch)
		if passes != 2+i {
			t.Errorf("%+v: %d passes, want %d", c, passes, 2+i)
		}
	}
	res := ask(3, 1, 0, 1)
	if !res.Truncated || len(res.Digests) != proto.MaxRegionDigests {
		t.Errorf("a whole partition of more than %d viewers answered %d digests, truncated %v", proto.MaxRegionDigests, len(res.Digests), res.Truncated)
	}
}

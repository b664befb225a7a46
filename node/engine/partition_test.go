package engine_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/node/engine"
)

// PartitionKeys visits exactly the viewers of the partitions asked for,
// and PartitionSizes counts every partition's viewers, whether the
// stripes are laid out by partition (as many stripes as partitions or
// more, or fewer) or not, and whether the walk asks for the engine's own
// partition count or another, after deletes freed chunks of stripes.
// Each viewer is read back from its stripe after the walk, so a layout
// that put a key where stripeOf does not look would fail the lookups.
func TestPartitionKeys(t *testing.T) {
	for _, tc := range []struct{ stripes, parts, asked int }{
		{1024, 271, 271}, {64, 271, 271}, {16, 13, 13}, {64, 0, 271}, {64, 13, 271}, {64, 64, 64},
	} {
		t.Run(fmt.Sprintf("stripes=%d/parts=%d/asked=%d", tc.stripes, tc.parts, tc.asked), func(t *testing.T) {
			e := newEngine(t, func(c *engine.Config) { c.Stripes, c.Partitions = tc.stripes, tc.parts })
			c := campaign("c", 5, 1000)
			var keys []uint64
			for i := range 3000 {
				v := fmt.Sprint("viewer-", i)
				if _, err := e.Record(v, fcap.Impression{ID: "x", Time: 10, Caps: []fcap.Cap{c}}); err != nil {
					t.Fatal(err)
				}
				keys = append(keys, fcap.ViewerKey(v))
			}
			// The first half deleted: whole chunks of the stripes freed.
			for _, k := range keys[:1500] {
				e.DeleteViewer(k)
			}
			keys = keys[1500:]
			rng := rand.New(rand.NewPCG(1, uint64(tc.asked)))
			P := uint64(tc.asked)
			for range 5 {
				want := make([]bool, tc.asked)
				for p := range want {
					want[p] = rng.IntN(4) == 0
				}
				var got, exp []uint64
				e.PartitionKeys(want, func(k uint64) bool { got = append(got, k); return true })
				for _, k := range keys {
					if want[k%P] {
						exp = append(exp, k)
					}
				}
				slices.Sort(got)
				slices.Sort(exp)
				if !slices.Equal(got, exp) {
					t.Fatalf("PartitionKeys visited %d viewers, want the %d of the partitions asked", len(got), len(exp))
				}
			}
			sizes := e.PartitionSizes(tc.asked)
			exp := make([]int, tc.asked)
			for _, k := range keys {
				exp[k%P]++
			}
			if !slices.Equal(sizes, exp) {
				t.Fatalf("PartitionSizes = %v, want %v", sizes, exp)
			}
			for i := 1500; i < 3000; i++ {
				if d, _ := e.Digest(fcap.ViewerKey(fmt.Sprint("viewer-", i)), 10); d == 0 {
					t.Fatalf("viewer-%d is not found in its stripe", i)
				}
			}
			n := 0
			e.PartitionKeys(make([]bool, tc.asked), func(uint64) bool { n++; return true })
			e.PartitionKeys(slices.Repeat([]bool{true}, tc.asked), func(uint64) bool { n++; return n < 10 })
			if n != 10 {
				t.Fatalf("PartitionKeys went on after fn returned false, or visited an unasked partition: %d calls", n)
			}
		})
	}
}

package ring

import (
	"fmt"
	"slices"
	"testing"
)

// moveStats are the figures of adding a fifth Active node to four, over
// many sets of node names.
type moveStats struct {
	sets                  int
	primaries, owners     []float64 // fraction of partitions moved, per set
	spreadSum, spreadMax  float64   // max/min primaries per member, 5 nodes
	spreadAllSum          float64   // max/min partitions owned at any rank
	canonical, canonicalO float64   // the set fcap-0 .. fcap-4
}

// moveFigures measures cfg over the canonical name set and sets more.
func moveFigures(t testing.TB, cfg Config, sets int) moveStats {
	st := moveStats{sets: sets}
	for s := -1; s < sets; s++ {
		names := make([]Member, 5)
		for i := range names {
			name := fmt.Sprintf("fcap-%d", i)
			if s >= 0 {
				name = fmt.Sprintf("fcap-%d.fcap-%d.svc", i, s)
			}
			names[i] = Member{Name: name, Addr: name + ":7070", State: Active}
		}
		four, five := mustBuild(t, cfg, names[:4]), mustBuild(t, cfg, names)
		p := float64(MovedPrimaries(four, five)) / float64(cfg.Partitions)
		o := float64(MovedOwners(four, five)) / float64(cfg.Partitions)
		if s < 0 {
			st.canonical, st.canonicalO = p, o
			continue
		}
		st.primaries = append(st.primaries, p)
		st.owners = append(st.owners, o)
		sp := loadSpread(five, false)
		st.spreadSum += sp
		st.spreadMax = max(st.spreadMax, sp)
		st.spreadAllSum += loadSpread(five, true)
	}
	slices.Sort(st.primaries)
	slices.Sort(st.owners)
	return st
}

func mean(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

func (st moveStats) String() string {
	n := len(st.primaries)
	return fmt.Sprintf("fcap-0..4: primaries %.1f%%, owner sets %.1f%%; over %d name sets: primaries mean %.1f%% p99 %.1f%% max %.1f%%, owner sets mean %.1f%% max %.1f%%; primaries per member max/min mean %.2f max %.2f (all ranks mean %.2f)",
		100*st.canonical, 100*st.canonicalO, st.sets,
		100*mean(st.primaries), 100*st.primaries[n*99/100], 100*st.primaries[n-1],
		100*mean(st.owners), 100*st.owners[n-1],
		st.spreadSum/float64(st.sets), st.spreadMax, st.spreadAllSum/float64(st.sets))
}

// loadSpread returns max/min partitions per Active member: as primary, or
// at any rank.
func loadSpread(r *Ring, anyRank bool) float64 {
	count := make(map[uint16]int)
	for p := range r.Partitions() {
		o := r.Owners(p)
		if !anyRank {
			o = o[:1]
		}
		for _, i := range o {
			count[i]++
		}
	}
	lo, hi := r.Partitions()*r.Replicas(), 0
	for i, m := range r.Members() {
		if m.State == Active {
			lo, hi = min(lo, count[uint16(i)]), max(hi, count[uint16(i)])
		}
	}
	return float64(hi) / float64(max(lo, 1))
}

// Adding a fifth Active node to four moves at most 35% of the primaries
// (ideally 20%: the new node's share), for every name set tried.
func TestMovedPartitions(t *testing.T) {
	cfg := DefaultConfig()
	st := moveFigures(t, cfg, 100)
	t.Logf("VirtualNodes %d, 4 -> 5 nodes: %v", cfg.VirtualNodes, st)
	if st.canonical > 0.35 || st.primaries[len(st.primaries)-1] > 0.35 {
		t.Fatalf("adding a fifth node moved more than 35%% of the primaries: %v", st)
	}
}

// BenchmarkVirtualNodes measures, per VirtualNodes value, the partitions a
// fifth node moves (mean over 200 name sets, as metrics) and the time to
// build a 64-member ring. It chose the default.
func BenchmarkVirtualNodes(b *testing.B) {
	for _, vn := range []int{10, 20, 40, 64, 100, 128, 160} {
		b.Run(fmt.Sprint("vn=", vn), func(b *testing.B) {
			cfg := DefaultConfig()
			cfg.VirtualNodes = vn
			st := moveFigures(b, cfg, 200)
			ms := members("node-", 64, Active)
			for b.Loop() {
				if _, err := Build(cfg, ms); err != nil {
					b.Fatal(err)
				}
			}
			n := len(st.primaries)
			b.ReportMetric(100*mean(st.primaries), "moved-primaries-%")
			b.ReportMetric(100*st.primaries[n-1], "max-moved-primaries-%")
			b.ReportMetric(100*mean(st.owners), "moved-owners-%")
			b.ReportMetric(st.spreadSum/float64(st.sets), "primary-spread")
		})
	}
}

package replication

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/fcap-io/fcap/proto"
)

// run runs every node's background loops (Run) until the test ends.
func (c *cluster) run() {
	ctx, cancel := context.WithCancel(context.Background())
	var running []chan struct{}
	for _, m := range c.nodes {
		done := make(chan struct{})
		running = append(running, done)
		go func() {
			defer close(done)
			m.r.Run(ctx)
		}()
	}
	c.t.Cleanup(func() {
		cancel()
		for _, done := range running {
			<-done
		}
	})
}

// aeFast runs anti-entropy often, so tests see rounds without waiting.
func aeFast(cfg *Config) { cfg.AntiEntropyInterval = 20 * time.Millisecond }

func TestAntiEntropyRepairsBothWays(t *testing.T) {
	for _, tc := range []struct {
		name string
		// diverge makes the copies of partition p on prim and back
		// differ and returns the viewers that differ.
		diverge func(c *cluster, p int, prim, back string) []uint64
	}{
		{"a lost batch each way", func(c *cluster, p int, prim, back string) []uint64 {
			// A batch each way is lost after its acknowledgement: the
			// primary's write never reaches the backup, the backup's
			// stand-in write never reaches the primary.
			c.net.setFault(prim, back, fault{swallow: 1, only: proto.TypeReplicate})
			c.net.setFault(back, prim, fault{swallow: 1, only: proto.TypeReplicate})
			k1 := c.record(prim, c.viewerIn(p, "lost1"), "i1")
			k2 := c.recordOnly(back, c.viewerIn(p, "lost2"), "i2")
			c.nodes[back].plan.Load().MarkStandIn(k2)
			eventually(c.t, "both batches are swallowed", func() bool {
				q1, _ := c.nodes[prim].r.Queued()
				q2, _ := c.nodes[back].r.Queued()
				return q1 == 0 && q2 == 0
			})
			return []uint64{k1, k2}
		}},
		{"a cut link, then healed", func(c *cluster, p int, prim, back string) []uint64 {
			// While the link is cut both copies take writes that no
			// batch carries (their senders' queues were dropped), and
			// anti-entropy cannot reach the backup.
			c.net.partition(prim, back)
			k1 := c.recordOnly(prim, c.viewerIn(p, "cut1"), "i1")
			k2 := c.recordOnly(back, c.viewerIn(p, "cut2"), "i2")
			// The same viewer, written on both sides.
			v3 := c.viewerIn(p, "cut3")
			c.recordOnly(prim, v3, "i3a")
			c.clock.Advance(time.Second) // a digest covers times, not ids
			k3 := c.recordOnly(back, v3, "i3b")
			r := c.nodes[prim].r
			before := r.AntiEntropy().Rounds
			eventually(c.t, "a round finds the backup unreachable", func() bool {
				st := r.AntiEntropy()
				return st.Rounds > before+1 && st.Unreached == 1
			})
			if r.AntiEntropy().Repaired != 0 {
				c.t.Fatal("repaired across a cut link")
			}
			c.net.heal(prim, back)
			return []uint64{k1, k2, k3}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, aeFast, "a", "b")
			x := c.form("a", "b")
			c.run()
			p := 4
			owners := names(x, p)
			prim, back := owners[0], owners[1]
			keys := tc.diverge(c, p, prim, back)
			eventually(t, "the copies converge", func() bool {
				for _, k := range keys {
					if c.digest(prim, k) != c.digest(back, k) {
						return false
					}
				}
				return true
			})
			for _, k := range keys {
				if c.digest(prim, k) == 0 {
					t.Fatalf("viewer %x counts nothing after the repair", k)
				}
			}
			m := c.nodes[prim]
			if got := value(m.metrics.RepairedViewers); got < float64(len(keys)) {
				t.Fatalf("repaired viewers metric %v, want at least %d", got, len(keys))
			}
			if value(m.metrics.DifferingPartitions) < 1 || value(m.metrics.AntiEntropyRounds) < 1 {
				t.Fatal("the rounds or the differing partition were not counted")
			}
			eventually(t, "a round finds the copies equal", func() bool {
				st := m.r.AntiEntropy()
				return st.Differing == 0 && st.Unreached == 0
			})
		})
	}
}

// TestAntiEntropyQuiet: copies that agree are compared and left alone;
// a backup still receiving a partition is not compared.
func TestAntiEntropyQuiet(t *testing.T) {
	c := newCluster(t, nil, "a", "b")
	x := c.form("a", "b")
	for p := range c.rcfg.Partitions {
		c.record(names(x, p)[0], c.viewerIn(p, "quiet"), "i")
	}
	c.settled(x)
	eventually(t, "the backups have every write", func() bool {
		for p := range c.rcfg.Partitions {
			k := c.recordKey(p, "quiet")
			if c.digest("a", k) != c.digest("b", k) {
				return false
			}
		}
		return true
	})
	ctx := context.Background()
	for _, l := range []link{{"a", "b"}, {"b", "a"}} {
		m := c.nodes[l.from]
		m.r.antiEntropyRound(ctx)
		if st := m.r.AntiEntropy(); st.Rounds != 1 || st.Differing != 0 || st.Repaired != 0 {
			t.Fatalf("%s: %+v after a round over equal copies", l.from, st)
		}
		if got := c.net.count(l.from, l.to, proto.TypePull); got != 0 {
			t.Fatalf("%s pulled %d times from equal copies", l.from, got)
		}
	}
	if c.net.count("a", "b", proto.TypeVerify)+c.net.count("b", "a", proto.TypeVerify) == 0 {
		t.Fatal("no copies were compared")
	}
	// b restarts: it holds nothing until its transfers end, and is not
	// compared meanwhile.
	c.net.cutLink("a", "b")
	c.start("b", nil)
	y := c.ring(nil, "a", "b")
	c.onRing(y)
	before := c.net.count("a", "b", proto.TypeVerify)
	c.nodes["a"].r.antiEntropyRound(ctx)
	if c.net.count("a", "b", proto.TypeVerify) != before {
		t.Fatal("compared with a backup still receiving its partitions")
	}
}

// recordKey is the key of the viewer viewerIn(p, salt) names.
func (c *cluster) recordKey(p int, salt string) uint64 {
	return keyOf(c.viewerIn(p, salt))
}

func TestServePullLeavesWhatDoesNotFit(t *testing.T) {
	c := newCluster(t, nil, "a")
	c.form("a")
	var keys []uint64
	for p := range c.rcfg.Partitions {
		keys = append(keys, c.record("a", c.viewerIn(p, "pull"), "i"))
	}
	absent := keyOf("nobody")
	res := c.nodes["a"].r.ServePull(&proto.Pull{From: "b", Keys: append(keys, absent)})
	if res.Left != 0 || res.From != "a" || len(res.States) == 0 {
		t.Fatalf("pull of %d small viewers: left %d, from %q, %d bytes", len(keys)+1, res.Left, res.From, len(res.States))
	}
	// Merged into another engine, the answer brings every viewer and
	// nothing for the absent one.
	d := newCluster(t, nil, "b")
	d.form("b")
	if _, err := d.nodes["b"].r.Apply(&proto.Replicate{From: res.From, States: res.States}); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if c.digest("a", k) != d.digest("b", k) {
			t.Fatalf("viewer %x: pulled copy differs", k)
		}
	}
	if d.digest("b", absent) != 0 {
		t.Fatal("a viewer nobody holds came back counting")
	}
}

// TestAntiEntropyBudget: differing partitions past the per-round budget
// are compared in later rounds, in turn, and one with more viewers than
// the budget a slice at a time.
func TestAntiEntropyBudget(t *testing.T) {
	c := newCluster(t, nil, "a", "b")
	x := c.form("a", "b")
	a := c.nodes["a"]
	a.r.ae.budget = 2
	var small []int
	big := -1
	for p := range c.rcfg.Partitions {
		if names(x, p)[0] != "a" {
			continue
		}
		if big < 0 {
			big = p
		} else {
			small = append(small, p)
		}
	}
	if big < 0 || len(small) < 3 {
		t.Fatalf("a is primary of %d partitions, want 4", len(small)+1)
	}
	var keys []uint64
	for i := range 3 { // the big partition: 3 viewers b lacks
		keys = append(keys, c.recordOnly("a", c.viewerIn(big, "big"+strconv.Itoa(i)), "i"))
	}
	for _, p := range small[:3] { // a viewer b lacks, and one a lacks
		keys = append(keys, c.recordOnly("a", c.viewerIn(p, "small-a"), "i"))
		keys = append(keys, c.recordOnly("b", c.viewerIn(p, "small-b"), "i"))
	}
	ctx := context.Background()
	rounds := 0
	eventually(t, "the copies converge", func() bool {
		a.r.antiEntropyRound(ctx)
		rounds++
		for _, k := range keys {
			if c.digest("a", k) != c.digest("b", k) {
				return false
			}
		}
		return true
	})
	if n := c.net.count("a", "b", proto.TypeSyncRequest); n != 0 {
		t.Fatalf("asked for %d whole partitions", n)
	}
	// The big partition in 3 slices, each compared twice (a viewer is
	// repaired when it differs twice), then three of one viewer each
	// side, two a round, each compared twice: at least 9 rounds (2
	// without the budget).
	if rounds < 9 {
		t.Fatalf("converged in %d rounds with a budget of 2 viewers", rounds)
	}
	if got := a.r.AntiEntropy().Repaired; got != 9 {
		t.Fatalf("repaired %d viewers, want 9", got)
	}
}

// TestAntiEntropyLeavesChangesOnTheirWay: a viewer that differs in one
// round only (its batch was on its way) is not repaired.
func TestAntiEntropyLeavesChangesOnTheirWay(t *testing.T) {
	c := newCluster(t, nil, "a", "b")
	x := c.form("a", "b")
	p := 6
	prim, back := names(x, p)[0], names(x, p)[1]
	m := c.nodes[prim]
	key := c.recordOnly(prim, c.viewerIn(p, "onitsway"), "i")
	ctx := context.Background()
	m.r.antiEntropyRound(ctx)
	if st := m.r.AntiEntropy(); st.Differing != 1 || st.Repaired != 0 {
		t.Fatalf("after a first round over a viewer the backup lacks: %+v, want 1 differing partition and nothing repaired yet", st)
	}
	m.plan.Load().Mark(key) // its batch arrives
	eventually(t, "the backup has the viewer", func() bool { return c.digest(back, key) == c.digest(prim, key) })
	m.r.antiEntropyRound(ctx)
	if st := m.r.AntiEntropy(); st.Differing != 0 || st.Repaired != 0 {
		t.Fatalf("after the batch arrived: %+v, want nothing differing or repaired", st)
	}
	if c.net.count(prim, back, proto.TypePull) != 0 {
		t.Fatal("pulled a viewer whose batch was on its way")
	}
}

// TestAntiEntropyShare: a round digests a bounded share of the viewers,
// here and on the backup, the partitions in turn, so a copy that
// differs is found within a sweep; and one that differed is compared
// again in the next round, so its repair does not wait another sweep.
func TestAntiEntropyShare(t *testing.T) {
	const budget = 4
	c := newCluster(t, func(cfg *Config) { cfg.AntiEntropyViewers = budget }, "a", "b")
	x := c.form("a", "b")
	a, b := c.nodes["a"], c.nodes["b"]
	var mine []int
	for p := range c.rcfg.Partitions {
		if names(x, p)[0] == "a" {
			mine = append(mine, p)
		}
	}
	if len(mine) < 3 {
		t.Fatalf("a is primary of %d partitions, want 3", len(mine))
	}
	var keys []uint64
	for _, p := range mine { // 3 viewers each, on both copies
		for i := range 3 {
			keys = append(keys, c.record("a", c.viewerIn(p, "share"+strconv.Itoa(i)), "i"))
		}
	}
	c.settled(x)
	eventually(t, "the backup has every write", func() bool {
		for _, k := range keys {
			if c.digest("a", k) != c.digest("b", k) {
				return false
			}
		}
		return true
	})
	last := mine[len(mine)-1] // the turn reaches it last
	lost := c.recordOnly("a", c.viewerIn(last, "lost"), "i")
	ctx := context.Background()
	rounds := 0
	for a.r.AntiEntropy().Repaired == 0 {
		if rounds > 4*len(mine) {
			t.Fatalf("not repaired after %d rounds over %d partitions", rounds, len(mine))
		}
		a.r.antiEntropyRound(ctx)
		rounds++
	}
	eventually(t, "the repair reaches the backup", func() bool { return c.digest("b", lost) == c.digest("a", lost) })
	// One partition of 3 viewers fits a round's budget of 4: the lost
	// viewer's partition is compared in round len(mine), found
	// differing, and compared again (a repair needs two comparisons) in
	// the next. Comparing every partition every round repairs in 2.
	if rounds != len(mine)+1 {
		t.Fatalf("repaired in round %d, want %d: one partition a round, the differing one again the next", rounds, len(mine)+1)
	}
	b.digestedMu.Lock()
	defer b.digestedMu.Unlock()
	if len(b.digested) != rounds {
		t.Fatalf("b answered %d partition digests in %d rounds", len(b.digested), rounds)
	}
	for i, n := range b.digested {
		// The budget, or one partition past it: the differing one (4
		// viewers on a, 3 here) and one in turn.
		if n > budget+3 {
			t.Fatalf("round %d digested %d viewers on the backup, budget %d", i+1, n, budget)
		}
	}
}

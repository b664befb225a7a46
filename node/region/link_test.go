package region

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestLinkShipsEveryChangeToItsOwner: viewers marked after each change
// reach their owners in the peer region with their newest state, each
// owner getting only its own viewers, and the link says the region is
// reachable with nothing waiting.
func TestLinkShipsEveryChangeToItsOwner(t *testing.T) {
	eng, peer := newFakeEngine(), newFakeRegion(t, "b-0", "b-1", "b-2")
	ls := startLinks(t, testConfig(), eng, peer)
	for round := range 3 {
		for key := uint64(1); key <= 200; key++ {
			if key%uint64(round+1) == 0 {
				eng.write(key)
				ls.Mark(key)
			}
		}
	}
	eventually(t, "every viewer's newest state in region b", func() bool { return len(missing(eng, peer)) == 0 })
	eventually(t, "the link reachable, nothing waiting", func() bool {
		st := ls.Status()[0]
		return st.Name == "b" && st.Reachable && st.Queue == 0 && st.Lag == 0
	})
}

// TestLinkMarksAreDeduplicated: a viewer marked many times while it waits
// is queued once.
func TestLinkMarksAreDeduplicated(t *testing.T) {
	eng, peer := newFakeEngine(), newFakeRegion(t, "b-0")
	peer.setDown(true)
	ls := startLinks(t, testConfig(), eng, peer)
	for range 50 {
		eng.write(7)
		ls.Mark(7)
		eng.write(8)
		ls.Mark(8)
	}
	if q := ls.Status()[0].Queue; q != 2 {
		t.Fatalf("queue %d after marking two viewers 50 times each, want 2", q)
	}
	peer.setDown(false)
	eventually(t, "both viewers shipped", func() bool { return len(missing(eng, peer)) == 0 })
	peer.mu.Lock()
	defer peer.mu.Unlock()
	if peer.merges[7] > 3 || peer.merges[8] > 3 {
		t.Errorf("viewer 7 merged %d times, 8 %d times: a queued viewer is shipped once per change batch", peer.merges[7], peer.merges[8])
	}
}

// TestLinkRetriesWhileThePeerIsDown: while the peer region cannot be
// reached nothing is lost: the link says so, the lag grows, and once the
// region is back every change arrives.
func TestLinkRetriesWhileThePeerIsDown(t *testing.T) {
	eng, peer := newFakeEngine(), newFakeRegion(t, "b-0", "b-1")
	ls := startLinks(t, testConfig(), eng, peer)
	eventually(t, "the link reachable", func() bool { return ls.Status()[0].Reachable })
	peer.setDown(true)
	for key := uint64(1); key <= 40; key++ {
		eng.write(key)
		ls.Mark(key)
	}
	eventually(t, "the link unreachable, changes waiting", func() bool {
		st := ls.Status()[0]
		return !st.Reachable && st.Lag > 0
	})
	if got := missing(eng, peer); len(got) != 40 {
		t.Fatalf("%d of 40 viewers missing while the region is down", len(got))
	}
	peer.setDown(false)
	eventually(t, "every change after the heal", func() bool { return len(missing(eng, peer)) == 0 })
	eventually(t, "reachable, no lag", func() bool { st := ls.Status()[0]; return st.Reachable && st.Lag == 0 && st.Queue == 0 })
}

// TestLinkOverflowCatchesUp: past the queue's bound changes are counted,
// not queued, and a digest catch-up ships every viewer this node is
// primary of that the peer lacks: nothing is lost.
func TestLinkOverflowCatchesUp(t *testing.T) {
	eng, peer := newFakeEngine(), newFakeRegion(t, "b-0", "b-1", "b-2")
	peer.setDown(true)
	cfg := testConfig()
	reg := prometheus.NewRegistry()
	ls, err := New(cfg, Deps{Engine: eng, Dialer: peer, Primary: func(uint64) bool { return true }, PrimaryPartitions: allPrimary, Registerer: reg, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ls.Start()
	defer ls.Close()
	const n = 500 // many times QueueViewers (64)
	for key := uint64(1); key <= n; key++ {
		eng.write(key)
		ls.Mark(key)
	}
	if q := ls.Status()[0].Queue; q > cfg.QueueViewers {
		t.Fatalf("queue %d past its bound %d", q, cfg.QueueViewers)
	}
	if o := testutil.ToFloat64(ls.metrics.overflow.WithLabelValues("b")); o < n-float64(cfg.QueueViewers)-float64(cfg.BatchViewers) {
		t.Errorf("overflow counted %v of %d changes past a bound of %d", o, n, cfg.QueueViewers)
	}
	peer.setDown(false)
	eventually(t, "every viewer in region b after the catch-up", func() bool { return len(missing(eng, peer)) == 0 })
	eventually(t, "the shipped count", func() bool {
		return testutil.ToFloat64(ls.metrics.shipped.WithLabelValues("b")) >= n
	})
	for _, name := range []string{"fcap_region_link_up", "fcap_region_queue_viewers", "fcap_region_lag_seconds", "fcap_region_shipped_viewers_total", "fcap_region_overflow_total"} {
		if c, err := testutil.GatherAndCount(reg, name); err != nil || c != 1 {
			t.Errorf("%s: %d series (%v), want 1", name, c, err)
		}
	}
}

// TestLinkFollowsThePeerRing: a link that learnt a ring that is behind
// sends to the wrong owner, is refused, learns the current ring and
// delivers to the right owners.
func TestLinkFollowsThePeerRing(t *testing.T) {
	eng, peer := newFakeEngine(), newFakeRegion(t, "b-0", "b-1", "b-2")
	peer.stale = buildRing(t, 1, "b-0") // the first answer: one node owns all
	cfg := testConfig()
	cfg.QueueViewers = 1 << 10 // no overflow: no catch-up makes up for a refusal lost
	ls := startLinks(t, cfg, eng, peer)
	for key := uint64(1); key <= 100; key++ {
		eng.write(key)
		ls.Mark(key)
	}
	eventually(t, "every viewer at its current owner", func() bool { return len(missing(eng, peer)) == 0 })
	if peer.refusals.Load() == 0 {
		t.Error("no state was refused: the link never used the ring that was behind")
	}
}

// TestLinkCloseStopsACallInFlight: Close ends a call the peer does not
// answer, and a second Close does nothing.
func TestLinkCloseStopsACallInFlight(t *testing.T) {
	eng, peer := newFakeEngine(), newFakeRegion(t, "b-0")
	peer.blocking = make(chan struct{}) // never answers
	cfg := testConfig()
	cfg.Timeout = time.Hour
	ls, err := New(cfg, Deps{Engine: eng, Dialer: peer, Primary: func(uint64) bool { return true }, PrimaryPartitions: allPrimary, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ls.Start()
	eng.write(1)
	ls.Mark(1)
	eventually(t, "a merge under way", func() bool { return peer.blocked.Load() > 0 })
	done := make(chan struct{})
	go func() {
		ls.Close()
		ls.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Close waits for a call the peer never answers")
	}
}

// TestSingleRegionLinksDoNothing: with a region name and no peers, Mark
// is a no-op and nothing runs.
func TestSingleRegionLinksDoNothing(t *testing.T) {
	ls, err := New(Config{Name: "a"}, Deps{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ls.Start()
	ls.Mark(1)
	ls.CatchUp()
	if st := ls.Status(); len(st) != 0 {
		t.Errorf("status %v, want none", st)
	}
	ls.Close()
	ls.Close()
}

package region

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// startMeasured is startLinks with a metrics registry.
func startMeasured(t *testing.T, cfg Config, eng *fakeEngine, peer *fakeRegion) *Links {
	t.Helper()
	ls, err := New(cfg, Deps{Engine: eng, Dialer: peer, Primary: func(uint64) bool { return true },
		PrimaryPartitions: allPrimary, Registerer: prometheus.NewRegistry(), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ls.Start()
	t.Cleanup(ls.Close)
	return ls
}

func rounds(ls *Links, outcome string) float64 {
	return testutil.ToFloat64(ls.metrics.digests.WithLabelValues("b", outcome))
}

// TestDigestCatchUpShipsOnlyWhatDiffers: a restart's catch-up (nothing
// queued) compares with the peer region and ships the viewers it lacks
// and those it holds an older state of, never one it holds as this node
// does; the differing ones are counted.
func TestDigestCatchUpShipsOnlyWhatDiffers(t *testing.T) {
	eng, peer := newFakeEngine(), newFakeRegion(t, "b-0", "b-1", "b-2")
	for key := uint64(1); key <= 300; key++ {
		eng.set(key, 2)
		switch {
		case key <= 200:
			peer.hold(key, 2) // the same
		case key <= 250:
			peer.hold(key, 1) // behind
		}
	}
	peer.hold(1000, 7) // one this node does not hold: its (absent) state goes
	cfg := testConfig()
	cfg.QueueViewers = 1 << 10
	ls := startMeasured(t, cfg, eng, peer)
	ls.CatchUp()
	eventually(t, "every viewer's state in region b", func() bool { return len(missing(eng, peer)) == 0 })
	eventually(t, "the absent viewer shipped", func() bool { return peer.merged(1000) > 0 })
	for key := uint64(1); key <= 200; key++ {
		if n := peer.merged(key); n != 0 {
			t.Fatalf("viewer %d, which region b holds as this node does, merged %d times", key, n)
		}
	}
	eventually(t, "101 differing viewers counted", func() bool {
		return testutil.ToFloat64(ls.metrics.differing.WithLabelValues("b")) == 101
	})
	eventually(t, "all 7 partitions counted differing", func() bool { return rounds(ls, outcomeDiffered) == 7 })
	if got := rounds(ls, outcomeAgreed); got != 0 {
		t.Errorf("%v partitions agreed, want none", got)
	}
}

// TestDigestOverflowComparesInsteadOfReshipping: changes that overflow
// the queue while the peer region is down are found by the digest
// catch-up once it is back; the viewers it already held are not shipped
// again (but for those the queue kept).
func TestDigestOverflowComparesInsteadOfReshipping(t *testing.T) {
	eng, peer := newFakeEngine(), newFakeRegion(t, "b-0", "b-1", "b-2")
	for key := uint64(1); key <= 400; key++ {
		eng.set(key, 1)
		peer.hold(key, 1)
	}
	peer.setDown(true)
	cfg := testConfig()
	ls := startMeasured(t, cfg, eng, peer)
	for key := uint64(401); key <= 600; key++ { // 200 changes, 64 queued at most
		eng.write(key)
		ls.Mark(key)
	}
	for key := uint64(1); key <= 400; key += 4 { // and some to held viewers
		eng.write(key)
		ls.Mark(key)
	}
	if testutil.ToFloat64(ls.metrics.overflow.WithLabelValues("b")) == 0 {
		t.Fatal("nothing overflowed")
	}
	peer.setDown(false)
	eventually(t, "every viewer in region b after the catch-up", func() bool { return len(missing(eng, peer)) == 0 })
	for key := uint64(2); key <= 400; key++ {
		if key%4 != 1 && peer.merged(key) != 0 {
			t.Fatalf("viewer %d, unchanged and held by region b, shipped again", key)
		}
	}
}

// TestDigestPeriodicFindsWhatADeadPrimaryNeverShipped: viewers this node
// holds but never marked (it took their partition over from a primary
// that died with them queued) reach the peer region by the periodic
// comparison alone; once they have, the rounds agree.
func TestDigestPeriodicFindsWhatADeadPrimaryNeverShipped(t *testing.T) {
	eng, peer := newFakeEngine(), newFakeRegion(t, "b-0", "b-1")
	for key := uint64(1); key <= 100; key++ {
		eng.set(key, 3)
		if key <= 60 {
			peer.hold(key, 3)
		}
	}
	cfg := testConfig()
	cfg.DigestInterval = 20 * time.Millisecond
	ls := startMeasured(t, cfg, eng, peer)
	eventually(t, "the viewers never marked in region b", func() bool { return len(missing(eng, peer)) == 0 })
	before := rounds(ls, outcomeAgreed)
	eventually(t, "a round in which every partition agrees", func() bool { return rounds(ls, outcomeAgreed) >= before+7 })
	for key := uint64(1); key <= 60; key++ {
		if n := peer.merged(key); n != 0 {
			t.Fatalf("viewer %d, held alike, merged %d times", key, n)
		}
	}
}

// TestDigestAfterAnOutage: when the peer region answers again after an
// outage, a digest comparison runs (periodic rounds off) and ships what
// the queue lost.
func TestDigestAfterAnOutage(t *testing.T) {
	eng, peer := newFakeEngine(), newFakeRegion(t, "b-0", "b-1")
	cfg := testConfig()
	cfg.DigestInterval = 0
	cfg.TopologyInterval = 20 * time.Millisecond // the idle shipper finds the outage soon
	ls := startMeasured(t, cfg, eng, peer)
	eng.write(1)
	ls.Mark(1)
	eventually(t, "the first viewer shipped", func() bool { return len(missing(eng, peer)) == 0 })
	peer.setDown(true)
	eventually(t, "the link down", func() bool { return !ls.Status()[0].Reachable })
	eng.set(2, 5) // a change whose mark was lost
	peer.setDown(false)
	eventually(t, "the lost change shipped after the outage", func() bool { return len(missing(eng, peer)) == 0 })
	eventually(t, "a partition counted differing", func() bool { return rounds(ls, outcomeDiffered) > 0 })
}

// TestDigestFallsBackToShippingWhole: a peer region that cannot compare
// (a ring of another partition count, or nodes that predate the
// comparison) gets a catch-up's viewers whole, and a periodic round
// ships nothing to it.
func TestDigestFallsBackToShippingWhole(t *testing.T) {
	for name, spoil := range map[string]func(t *testing.T, r *fakeRegion){
		"partition count": func(t *testing.T, r *fakeRegion) {
			r.ring = buildRingOf(t, 11, r.ring.Members())
		},
		"refused": func(t *testing.T, r *fakeRegion) { r.noDigest = true },
	} {
		t.Run(name, func(t *testing.T) {
			eng, peer := newFakeEngine(), newFakeRegion(t, "b-0", "b-1")
			spoil(t, peer)
			for key := uint64(1); key <= 50; key++ {
				eng.set(key, 1)
				peer.hold(key, 1)
			}
			eng.set(51, 1)
			cfg := testConfig()
			cfg.DigestInterval = 10 * time.Millisecond
			ls := startMeasured(t, cfg, eng, peer)
			eventually(t, "periodic rounds skipped", func() bool { return rounds(ls, outcomeSkipped) >= 14 })
			if n := peer.merged(51); n != 0 {
				t.Fatalf("a periodic round shipped to a region that cannot compare")
			}
			ls.CatchUp()
			eventually(t, "every viewer shipped whole", func() bool {
				for key := uint64(1); key <= 51; key++ {
					if peer.merged(key) == 0 {
						return false
					}
				}
				return true
			})
			if rounds(ls, outcomeReshipped) == 0 {
				t.Error("no partition counted reshipped")
			}
		})
	}
}

// TestDigestSlicesALargeAnswer: a peer whose answer for a partition is
// truncated is asked again slice by slice, skipping the slices already
// compared, and what differs ships and is counted once.
func TestDigestSlicesALargeAnswer(t *testing.T) {
	eng, peer := newFakeEngine(), newFakeRegion(t, "b-0")
	peer.maxDigests = 10
	// Per partition, the viewers 7m+p for m in 0..19 and the odd m up to
	// 59: in 2 slices the even ones fit an answer and the odd ones do
	// not, so slice 0 of 2 is compared before the partition is cut in 4
	// and then 8, whose slices 0, 2, 4 and 6 it covers.
	var keys []uint64
	for p := uint64(0); p < 7; p++ {
		for m := uint64(0); m < 60; m++ {
			if (m < 20 || m%2 == 1) && 7*m+p != 0 {
				keys = append(keys, 7*m+p)
			}
		}
	}
	lacking := 0
	for _, key := range keys {
		eng.set(key, 1)
		if key%10 != 0 {
			peer.hold(key, 1)
		} else {
			lacking++
		}
	}
	cfg := testConfig()
	cfg.QueueViewers = 1 << 10
	peer.blocking = make(chan struct{}) // nothing ships until every slice is compared
	ls := startMeasured(t, cfg, eng, peer)
	ls.CatchUp()
	eventually(t, "every partition compared", func() bool { return rounds(ls, outcomeDiffered) == 7 })
	peer.mu.Lock()
	sliced := peer.slices[8]
	peer.mu.Unlock()
	if sliced == 0 {
		t.Error("no partition compared in 8 slices")
	}
	// Each differing viewer counted once: the slices compared before a
	// re-slice are not compared again within the finer ones.
	if got := testutil.ToFloat64(ls.metrics.differing.WithLabelValues("b")); got != float64(lacking) {
		t.Errorf("%v viewers counted differing, want the %d region b lacks", got, lacking)
	}
	peer.mu.Lock()
	close(peer.blocking)
	peer.mu.Unlock()
	eventually(t, "the differing viewers shipped", func() bool { return len(missing(eng, peer)) == 0 })
	for _, key := range keys {
		if key%10 != 0 && peer.merged(key) != 0 {
			t.Fatalf("viewer %d, held alike, shipped", key)
		}
	}
}

// TestDigestWaitsForABusyPeer: a peer node busy with another digest is
// asked again after a backoff, and the comparison goes on as usual: a
// busy peer is neither a refusal (nothing is shipped whole) nor lost.
func TestDigestWaitsForABusyPeer(t *testing.T) {
	eng, peer := newFakeEngine(), newFakeRegion(t, "b-0")
	peer.busy = 5
	for key := uint64(1); key <= 70; key++ {
		eng.set(key, 1)
		if key%7 != 0 {
			peer.hold(key, 1)
		}
	}
	ls := startMeasured(t, testConfig(), eng, peer)
	ls.CatchUp()
	eventually(t, "the differing viewers shipped", func() bool { return len(missing(eng, peer)) == 0 })
	eventually(t, "every partition compared", func() bool { return rounds(ls, outcomeAgreed)+rounds(ls, outcomeDiffered) == 7 })
	for key := uint64(1); key <= 70; key++ {
		if key%7 != 0 && peer.merged(key) != 0 {
			t.Fatalf("viewer %d, held alike, shipped", key)
		}
	}
	if got := rounds(ls, outcomeReshipped) + rounds(ls, outcomeFailed); got != 0 {
		t.Errorf("%v partitions reshipped or failed for a busy peer", got)
	}
}

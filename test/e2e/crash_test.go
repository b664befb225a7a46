package e2e

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/test/cluster"
)

// Crash safety of the default fsync policy (issue 17): a write is
// acknowledged only once its log record is written to the OS, so kill -9
// of every node at once, in the middle of traffic, loses nothing that
// was acknowledged.

// strictBigCap is bigCap's strict twin: acknowledged only once every
// backup applied it.
var strictBigCap = fcap.Cap{Scope: "campaign", ID: "durable-strict", Limit: bigCap.Limit, Window: bigCap.Window, Algorithm: fcap.Fixed, Mode: fcap.Strict}

// allowTraffic runs Allow with one cap on viewers until ctx is done,
// counting what the cluster acknowledged (Allowed, not a fail-open or
// stale verdict).
func allowTraffic(ctx context.Context, c *client.Client, tl *tally, viewers []string, workers int, cp fcap.Cap) *sync.WaitGroup {
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; ctx.Err() == nil; i += workers {
				v := viewers[i%len(viewers)]
				cctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				vd, err := c.Allow(cctx, v, []fcap.Cap{cp})
				cancel()
				tl.mu.Lock()
				tl.attempted[v]++
				if err == nil && vd.Allowed && !vd.FailOpen && !vd.Stale {
					tl.acked[v]++
				}
				tl.mu.Unlock()
			}
		})
	}
	return &wg
}

// countOf returns how many impressions the cluster counts for viewer on
// cp, read from the owner.
func countOf(t *testing.T, c *client.Client, viewer string, cp fcap.Cap) int {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		res, err := c.Check(ctx, viewer, []fcap.Candidate{{Caps: []fcap.Cap{cp}}})
		cancel()
		if err == nil && !res.Verdicts[0].FailOpen && !res.Verdicts[0].Stale {
			return int(cp.Limit - res.Verdicts[0].Remaining)
		}
		if time.Now().After(deadline) {
			t.Fatalf("check %s: %v %+v", viewer, err, res)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// total is how many calls the cluster has acknowledged so far.
func (tl *tally) total() int {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return total(tl.acked)
}

// TestWholeClusterKill9DefaultFsync: three durable nodes (R=2) under the
// default --fsync interval, killed with kill -9 all at once while soft
// and strict Allows stream in, then restarted: every acknowledged
// impression is counted, none more than was attempted.
func TestWholeClusterKill9DefaultFsync(t *testing.T) {
	nodes := cluster.StartCluster(t, 3, cluster.Options{Replicas: 2, DataDir: t.TempDir(), Args: []string{"--snapshot-interval", "0"}})
	c := cluster.NewClient(t, cluster.Seeds(nodes...))
	soft, hard := newTally(), newTally()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	wgSoft := allowTraffic(ctx, c, soft, viewerIDs("crash-soft", 60), 4, bigCap)
	wgHard := allowTraffic(ctx, c, hard, viewerIDs("crash-strict", 60), 4, strictBigCap)
	cluster.Eventually(t, 60*time.Second, func() bool { return soft.total() >= 1000 && hard.total() >= 300 },
		"no traffic acknowledged")
	cluster.KillAll(nodes) // in the middle of the traffic
	stop()
	wgSoft.Wait()
	wgHard.Wait()

	for _, n := range nodes {
		n.Restart()
	}
	cluster.WaitActive(t, nodes, 3)
	c2 := cluster.NewClient(t, cluster.Seeds(nodes...))
	for _, s := range []struct {
		tl *tally
		cp fcap.Cap
	}{{soft, bigCap}, {hard, strictBigCap}} {
		s.tl.mu.Lock()
		lost := 0
		for v, n := range s.tl.attempted {
			got := countOf(t, c2, v, s.cp)
			if got < s.tl.acked[v] {
				lost += s.tl.acked[v] - got
			}
			if got > n {
				t.Errorf("%s %s: %d counted after the crash, more than the %d attempted", s.cp.Mode, v, got, n)
			}
		}
		if lost > 0 {
			t.Errorf("%s: %d acknowledged impressions lost to a whole-cluster kill -9 under the default fsync", s.cp.Mode, lost)
		}
		t.Logf("%s: %d acknowledged, %d lost", s.cp.Mode, total(s.tl.acked), lost)
		s.tl.mu.Unlock()
	}
}

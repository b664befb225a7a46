package e2e

// Figures for issue 17's client-side findings, with real fcapd processes:
//
//	FCAP_TEST_NORACE=1 go test ./test/e2e -run '^$' -bench DeadFirstSeed -benchtime 3x
//	FCAP_TEST_NORACE=1 go test ./test/e2e -run '^$' -bench KillOvershoot -benchtime 1x -count 3
//
// See docs/bench/BENCHMARKS.md.

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/test/cluster"
)

// BenchmarkDeadFirstSeed times a client from New to WaitReady when its
// first seeds are a black hole (accepts, never answers) and a refused
// address, the three live nodes last.
func BenchmarkDeadFirstSeed(b *testing.B) {
	requireNoRace(b)
	nodes := cluster.StartCluster(b, 3, cluster.Options{Replicas: 2})
	dead := []string{blackHole(b), refused(b)}
	var worst, best time.Duration
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		c, err := client.New(client.DefaultConfig(append(dead, seeds(nodes...)...)...))
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err = c.WaitReady(ctx)
		took := time.Since(start)
		cancel()
		c.Close(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		if i == 0 || took > worst {
			worst = took
		}
		if i == 0 || took < best {
			best = took
		}
	}
	b.ReportMetric(float64(best.Microseconds())/1000, "ready-min-ms")
	b.ReportMetric(float64(worst.Microseconds())/1000, "ready-max-ms")
}

// BenchmarkKillOvershoot runs Allows (half soft, half strict, each on
// its own viewers, a cap of 5 an hour) from 8 callers at a 20 ms deadline
// against 3 nodes (R=2). Once every soft viewer is capped it counts for
// 6 s, kills -9 one node, and counts 6 s more: soft verdicts the failure
// policy decided, soft grants over the cap, and soft Allows a backup
// answered, in each window; strict grants over the cap in all.
func BenchmarkKillOvershoot(b *testing.B) {
	requireNoRace(b)
	for range b.N {
		b.StopTimer()
		nodes := cluster.StartCluster(b, 3, cluster.Options{Replicas: 2})
		cfg := client.DefaultConfig(seeds(nodes...)...)
		cfg.Timeout = 20 * time.Millisecond
		c := cluster.Client(b, cfg)
		const limit = 5
		soft := fcap.Cap{Scope: "campaign", ID: "soft", Limit: limit, Window: time.Hour}
		strict := fcap.Cap{Scope: "campaign", ID: "strict", Limit: limit, Window: time.Hour, Mode: fcap.Strict}
		softViewers, strictViewers := viewerIDs("ko-soft", 100), viewerIDs("ko-strict", 100)
		var (
			mu           sync.Mutex
			softGrants   = map[string]int{}
			strictGrants = map[string]int{}
			// per phase (0 filling the caps, 1 the 6 s before the kill,
			// 2 the 6 s after it): soft fail-opens, soft grants over the
			// cap, soft Allows a backup answered
			failOpen, overCap, byBackup [3]int
		)
		var phase atomic.Int32
		lctx, stop := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(w), 17))
				for lctx.Err() == nil {
					isSoft := rng.IntN(2) == 0
					v, caps := strictViewers[rng.IntN(len(strictViewers))], []fcap.Cap{strict}
					if isSoft {
						v, caps = softViewers[rng.IntN(len(softViewers))], []fcap.Cap{soft}
					}
					vd, err := c.Allow(context.Background(), v, caps)
					if err != nil {
						b.Error(err)
						return
					}
					ph := phase.Load()
					mu.Lock()
					switch {
					case isSoft && vd.Allowed:
						if softGrants[v] >= limit {
							overCap[ph]++
						}
						softGrants[v]++
					case vd.Allowed:
						strictGrants[v]++
					}
					if isSoft && vd.FailOpen {
						failOpen[ph]++
					}
					if isSoft && vd.Stale {
						byBackup[ph]++
					}
					mu.Unlock()
				}
			}()
		}
		// Every viewer capped before the kill: a grant after it is an
		// overshoot.
		cluster.Eventually(b, 60*time.Second, func() bool {
			mu.Lock()
			defer mu.Unlock()
			for _, v := range softViewers {
				if softGrants[v] < limit {
					return false
				}
			}
			return true
		}, "soft viewers not capped")
		phase.Store(1)
		time.Sleep(6 * time.Second) // the baseline: a window as long as the one after the kill
		b.StartTimer()
		phase.Store(2)
		nodes[1].Kill()
		time.Sleep(6 * time.Second) // the figure is about this window: a fixed length on purpose
		b.StopTimer()
		stop()
		wg.Wait()
		worst, strictOver := 0, 0
		for _, n := range softGrants {
			worst = max(worst, n)
		}
		for _, n := range strictGrants {
			strictOver += max(n-limit, 0)
		}
		b.ReportMetric(float64(failOpen[1]), "soft-failopen-6s-before")
		b.ReportMetric(float64(failOpen[2]), "soft-failopen-6s-after")
		b.ReportMetric(float64(overCap[1]), "soft-overcap-6s-before")
		b.ReportMetric(float64(overCap[2]), "soft-overcap-6s-after")
		b.ReportMetric(float64(byBackup[2]), "soft-by-backup-after")
		b.ReportMetric(float64(worst), "max-grants-per-viewer")
		b.ReportMetric(float64(strictOver), "strict-grants-over-cap")
		c.Close(context.Background())
		for _, n := range nodes {
			n.Kill()
		}
	}
}

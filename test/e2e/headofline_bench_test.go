package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/test/cluster"
)

// BenchmarkSoftFailOpenDeadBackup (issue 17, finding 2): three nodes
// (R=2), a client with a 20 ms deadline running about 2,000 Allows a
// second, half on a soft cap and half on a strict one; one node is
// killed with kill -9. Between the kill and the survivors' rings dropping
// it, strict writes whose backup is the dead node wait for it; the figure
// is the share of soft Allows failed open among those whose primary is
// alive and whose backup is the dead node (they need nothing from it).
// One run per iteration; run it with -count=3 for a range.
func BenchmarkSoftFailOpenDeadBackup(b *testing.B) {
	requireNoRace(b)
	for range b.N {
		nodes := cluster.StartCluster(b, 3, cluster.Options{Replicas: 2, Args: []string{"--log-level", benchLogLevel()}})
		cfg := client.DefaultConfig(seeds(nodes...)...)
		cfg.Timeout = 20 * time.Millisecond
		c := cluster.Client(b, cfg)
		dead := nodes[2]
		const viewers = 400
		// Viewers whose primary survives and whose backup is the one killed.
		exposed := make([]bool, viewers)
		r := c.Ring()
		for i := range viewers {
			_, owners := r.Lookup(fmt.Sprintf("fo-%d", i))
			exposed[i] = len(owners) == 2 && r.Member(owners[0]).Name != dead.Name && r.Member(owners[1]).Name == dead.Name
		}
		caps := []fcap.Cap{
			{Scope: "campaign", ID: "fo-soft", Limit: fcap.MaxLimit, Window: time.Hour},
			{Scope: "campaign", ID: "fo-strict", Limit: fcap.MaxLimit, Window: time.Hour, Mode: fcap.Strict},
		}
		type call struct {
			at       time.Time
			exposed  bool
			failOpen bool
		}
		var mu sync.Mutex
		var soft []call
		lctx, stop := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		const workers = 8 // each paced at one call per 4 ms
		for w := range workers {
			wg.Go(func() {
				tick := time.NewTicker(4 * time.Millisecond)
				defer tick.Stop()
				for i := 0; lctx.Err() == nil; i++ {
					vi := (i*workers + w) % viewers
					vd, err := c.Allow(context.Background(), fmt.Sprintf("fo-%d", vi), caps[i%2:i%2+1])
					if i%2 == 0 {
						mu.Lock()
						soft = append(soft, call{time.Now(), exposed[vi], err == nil && vd.FailOpen})
						mu.Unlock()
					}
					select {
					case <-lctx.Done():
					case <-tick.C:
					}
				}
			})
		}
		time.Sleep(2 * time.Second) // load before the kill
		start := time.Now()
		dead.Kill()
		live := nodes[:2]
		var end time.Time
		for end.IsZero() {
			if sts, ok := statuses(live); ok && members(sts, 2) {
				end = time.Now()
			}
			if time.Since(start) > time.Minute {
				b.Fatal("the dead node did not leave the survivors' rings within a minute")
			}
			time.Sleep(5 * time.Millisecond)
		}
		stop()
		wg.Wait()
		c.Close(context.Background())
		var n, open, other, otherOpen, before, beforeOpen int
		for _, s := range soft {
			if s.at.Before(start) && s.exposed {
				// The same viewers before the kill: what the loaded box
				// fails open anyway.
				before++
				if s.failOpen {
					beforeOpen++
				}
			}
			if s.at.Before(start) || s.at.After(end) {
				continue
			}
			if s.exposed {
				n++
				if s.failOpen {
					open++
				}
			} else {
				other++
				if s.failOpen {
					otherOpen++
				}
			}
		}
		if n == 0 {
			b.Fatal("no soft Allow on a live primary with the dead backup between the kill and the ring change")
		}
		b.ReportMetric(100*float64(open)/float64(n), "%failopen")
		b.ReportMetric(float64(n), "exposed-calls")
		b.ReportMetric(float64(end.Sub(start).Milliseconds()), "window-ms")
		b.ReportMetric(100*float64(beforeOpen)/float64(max(before, 1)), "%failopen-before-kill")
		b.Logf("kill to ring change %v: soft Allows on a live primary with the dead backup: %d of %d failed open (before the kill: %d of %d); other soft Allows: %d of %d",
			end.Sub(start).Round(time.Millisecond), open, n, beforeOpen, before, otherOpen, other)
		for _, nd := range nodes {
			nd.Kill()
		}
	}
}

package regions

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/test/wanproxy"
)

// BenchmarkShareBorrow measures how soon a region whose strict share is
// spent grants again from a unit a peer region lends it (issue 36: within
// 3 RTT when a peer has some). For each of FCAP_REGIONS_BORROW_VIEWERS
// fresh viewers (default 20), region a grants a strict cap of 5 until it
// refuses (its own share is spent: the refusal queues the ask), then asks
// again every 5 ms until it is granted: the time from that refusal's
// answer to the first grant is the borrow. The WAN is FCAP_REGIONS_LATENCY
// one way (default 40 ms, so an 80 ms RTT) with no jitter, so the figure
// reads in RTTs.
//
//	go test -run '^$' -bench ShareBorrow -benchtime 1x ./test/regions
func BenchmarkShareBorrow(b *testing.B) {
	RequireRegionFlags(b)
	oneWay := envDuration(b, "FCAP_REGIONS_LATENCY", 40*time.Millisecond)
	bed := Start(b, Config{Linked: true, Link: wanproxy.Link{Latency: oneWay}})
	a := bed.Client(b, "a")
	viewers := envInt(b, "FCAP_REGIONS_BORROW_VIEWERS", 20)
	allow := func(v string) (bool, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		vd, err := a.Allow(ctx, v, []fcap.Cap{strictCap})
		return err == nil && vd.Allowed && !vd.Failed(), err
	}
	b.ResetTimer()
	for range b.N {
		var took []time.Duration
		for i := range viewers {
			v := fmt.Sprintf("borrow-bench-%d-%d", time.Now().UnixNano(), i)
			own := 0
			for {
				ok, _ := allow(v)
				if !ok {
					break
				}
				own++
				if own > int(strictCap.Limit) {
					b.Fatalf("region a granted %s more than the limit %d alone", v, strictCap.Limit)
				}
			}
			spent := time.Now() // the refusal's answer: the ask is queued
			deadline := spent.Add(30 * time.Second)
			for {
				if ok, _ := allow(v); ok {
					took = append(took, time.Since(spent))
					break
				}
				if time.Now().After(deadline) {
					b.Fatalf("viewer %s: region a spent its share of %d and got no unit from b or c in 30 s", v, own)
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
		slices.Sort(took)
		rtt := 2 * oneWay
		p50, worst := took[len(took)/2], took[len(took)-1]
		b.ReportMetric(float64(p50.Microseconds())/1000, "borrow_p50_ms")
		b.ReportMetric(float64(worst.Microseconds())/1000, "borrow_max_ms")
		b.ReportMetric(float64(worst)/float64(rtt), "borrow_max_rtts")
		b.Logf("%d viewers, RTT %v: a spent region granted again from a borrowed unit after %v (p50, %.2f RTT), %v at worst (%.2f RTT); target 3 RTT",
			viewers, rtt, p50, float64(p50)/float64(rtt), worst, float64(worst)/float64(rtt))
	}
}

// envInt reads a positive integer from the environment, def when unset.
func envInt(t testing.TB, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return n
}

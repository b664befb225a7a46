package clienttest

import (
	"context"
	"flag"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
)

var (
	firstCheckClients = flag.Int("firstcheck.clients", 50, "BenchmarkFirstCheckAfterWaitReady: fresh clients per round")
	firstCheckCalls   = flag.Int("firstcheck.calls", 1000, "BenchmarkFirstCheckAfterWaitReady: checks each client makes")
	firstCheckRate    = flag.Float64("firstcheck.rate", 20, "BenchmarkFirstCheckAfterWaitReady: checks a second each client makes")
)

// BenchmarkFirstCheckAfterWaitReady: is a client's first check after
// WaitReady served like its thousandth (issue 34)? Each round starts
// -firstcheck.clients fresh clients of one node at once, with the
// defaults an ad server runs (a 5 ms deadline); each waits with
// WaitReady, then each makes -firstcheck.calls 100-candidate checks at
// -firstcheck.rate a second, the clients' schedules evenly out of phase
// (the node sees clients*rate checks a second, spread alike for the
// first call and the last). It reports the share of clients whose first
// check failed open (first-failopen-%), whose last did (last-failopen-%),
// and of all checks (all-failopen-%), and the mean latency of each
// (first-µs, last-µs, all-µs). The first should be no worse than the
// last. A round takes calls/rate seconds (50 s by default):
//
//	go test -run '^$' -bench FirstCheckAfterWaitReady -benchtime 1x ./clienttest/
//	go test -run '^$' -bench FirstCheckAfterWaitReady -benchtime 1x ./clienttest/ -args -firstcheck.calls 40
func BenchmarkFirstCheckAfterWaitReady(b *testing.B) {
	nd := soloNode(b, "firstcheck")
	// The node turns active a moment after it listens; the clients are
	// to find it serving, as they would a running cluster.
	warm := newClient(b, nil, nd.DataAddr())
	ctx, cancel := context.WithTimeout(context.Background(), generous)
	defer cancel()
	if err := warm.WaitReady(ctx); err != nil {
		b.Fatal(err)
	}
	cands := make([]fcap.Candidate, 100)
	for i := range cands {
		cands[i] = fcap.Candidate{Caps: []fcap.Cap{
			{Scope: "creative", ID: fmt.Sprint("cr", i), Limit: 3, Window: time.Hour},
			{Scope: "campaign", ID: fmt.Sprint("c", i/10), Limit: 10, Window: 24 * time.Hour},
		}}
	}
	clients, calls := *firstCheckClients, *firstCheckCalls
	every := time.Duration(float64(time.Second) / *firstCheckRate)
	var first, last, all, total atomic.Int64
	var firstNs, lastNs, allNs atomic.Int64 // latencies summed
	rounds := 0
	for range b.N {
		rounds++
		// Every client starts and waits with WaitReady; then, together,
		// they check at the rate. Starting them together and checking at
		// once would measure 50 clients' startup in one process (the
		// record queues they allocate, the GC that follows) on the first
		// checks, where 50 ad servers would each start on a machine of
		// their own.
		cs := make([]*client.Client, clients)
		var wg sync.WaitGroup
		errs := make(chan error, clients)
		for n := range clients {
			wg.Go(func() {
				c, err := client.New(client.Config{Seeds: []string{nd.DataAddr()}, Logger: quiet})
				if err != nil {
					errs <- err
					return
				}
				cs[n] = c
				ctx, cancel := context.WithTimeout(context.Background(), generous)
				defer cancel()
				if err := c.WaitReady(ctx); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		closeAll := func() {
			for _, c := range cs {
				if c != nil {
					c.Close(context.Background())
				}
			}
		}
		select {
		case err := <-errs:
			closeAll()
			b.Fatal(err)
		default:
		}
		// Client n checks at phase n/clients of the period, first call
		// and last alike: the node sees clients*rate checks a second,
		// evenly spread, and no burst favours one call over another.
		// Fifty clients in one process have just allocated fifty record
		// queues (Config.RecordQueue); the collection that follows would
		// land on the first checks, where each ad server is a process of
		// its own. Collect now.
		runtime.GC()
		begin := time.Now()
		for n, c := range cs {
			wg.Go(func() {
				var res client.CheckResult
				for i := range calls {
					time.Sleep(time.Until(begin.Add(time.Duration(i)*every + time.Duration(n)*every/time.Duration(clients))))
					viewer := fmt.Sprintf("viewer-%d-%d-%d", rounds, n, i)
					start := time.Now()
					err := c.CheckInto(context.Background(), viewer, cands, &res)
					took := int64(time.Since(start))
					if err != nil {
						errs <- err
						return
					}
					failed := int64(0)
					for _, v := range res.Verdicts {
						if v.Failed() {
							failed = 1
							break
						}
					}
					all.Add(failed)
					allNs.Add(took)
					total.Add(1)
					if i == 0 {
						first.Add(failed)
						firstNs.Add(took)
					}
					if i == calls-1 {
						last.Add(failed)
						lastNs.Add(took)
					}
				}
			})
		}
		wg.Wait()
		closeAll()
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
	}
	n := float64(rounds * clients)
	b.ReportMetric(0, "ns/op") // a round's wall time is its pacing, not a cost
	b.ReportMetric(100*float64(first.Load())/n, "first-failopen-%")
	b.ReportMetric(100*float64(last.Load())/n, "last-failopen-%")
	b.ReportMetric(100*float64(all.Load())/float64(max(total.Load(), 1)), "all-failopen-%")
	b.ReportMetric(float64(firstNs.Load())/n/1e3, "first-µs")
	b.ReportMetric(float64(lastNs.Load())/n/1e3, "last-µs")
	b.ReportMetric(float64(allNs.Load())/float64(max(total.Load(), 1))/1e3, "all-µs")
}

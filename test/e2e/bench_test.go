package e2e

// Benchmarks of the cluster's moves, with real fcapd processes. They are
// figures, not tests: run them with the race detector off in the built
// fcapd, for example
//
//	FCAP_TEST_NORACE=1 go test ./test/e2e -run '^$' -bench Failover -benchtime 5x
//	FCAP_TEST_NORACE=1 go test ./test/e2e -run '^$' -bench Join -benchtime 1x -timeout 30m
//
// and see docs/bench/BENCHMARKS.md.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/proto"
	"github.com/fcap-io/fcap/test/cluster"
)

func requireNoRace(b *testing.B) {
	if os.Getenv("FCAP_TEST_NORACE") == "" {
		b.Log("FCAP_TEST_NORACE is not set: fcapd is race-built and every figure is several times slower")
	}
}

// statuses asks every running node for its status; ok is false if one
// did not answer.
func statuses(nodes []*cluster.Node) (out []*proto.Status, ok bool) {
	for _, n := range nodes {
		if !n.Running() {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		st, err := client.NodeStatus(ctx, n.Data)
		cancel()
		if err != nil {
			return nil, false
		}
		out = append(out, st)
	}
	return out, true
}

// served: every running node's ring holds exactly the running nodes,
// all active, and none waits for a partition it owns.
func served(sts []*proto.Status, n int) bool {
	if !members(sts, n) {
		return false
	}
	for _, st := range sts {
		if st.State != 2 || st.Syncing != 0 {
			return false
		}
	}
	return true
}

// replicated: copied, and nothing waits in a replication queue.
func replicated(sts []*proto.Status, n int) bool {
	if !copied(sts, n) {
		return false
	}
	for _, st := range sts {
		if st.ReplicationQueue != 0 {
			return false
		}
	}
	return true
}

// waitFor polls the nodes' status every 5 ms until cond holds and
// returns how long that took from start.
func waitFor(b *testing.B, nodes []*cluster.Node, start time.Time, limit time.Duration, what string, cond func([]*proto.Status) bool) time.Duration {
	b.Helper()
	for {
		if sts, ok := statuses(nodes); ok && cond(sts) {
			return time.Since(start)
		}
		if time.Since(start) > limit {
			sts, _ := statuses(nodes)
			for _, st := range sts {
				b.Logf("%+v", *st)
			}
			b.Fatalf("%s: not reached after %v", what, limit)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// load records keys counters through the client: viewers with caps
// campaigns each, one impression per counter.
func load(b *testing.B, c *client.Client, viewers, caps int) {
	b.Helper()
	cs := make([]fcap.Cap, caps)
	for i := range cs {
		cs[i] = fcap.Cap{Scope: "campaign", ID: fmt.Sprint("c", i), Limit: 5, Window: 7 * 24 * time.Hour}
	}
	now := time.Now().UnixMilli()
	var next atomic.Int64
	var dropped atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(viewers) {
					return
				}
				v := fmt.Sprint("bv-", i)
				for c.Record(v, fcap.Impression{ID: v, Time: now, Caps: cs}) != nil {
					dropped.Add(1) // queue full: wait for the senders
					time.Sleep(time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := c.Flush(ctx); err != nil {
		b.Fatalf("flush: %v", err)
	}
}

func benchClient(b *testing.B, nodes []*cluster.Node) *client.Client {
	cfg := client.DefaultConfig(seeds(nodes...)...)
	cfg.Timeout = time.Second
	cfg.RecordQueue = 1 << 16
	return cluster.Client(b, cfg)
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkFailover kills one of three nodes (R=2) holding 100,000
// counters and measures the time from kill -9 to the dead node being out
// of every survivor's ring, to every partition being served again (no
// partition waiting for state), to every partition having its R copies
// again, and to the last verdict decided by the client's failure policy:
// a client with a 20 ms deadline runs about 2,000 Allows a second, half
// on a soft cap and half on a strict one, through the kill. Once with
// gossip tuned for loopback, once with the production (LAN) profile.
func BenchmarkFailover(b *testing.B) {
	requireNoRace(b)
	for _, profile := range []string{"local", "lan"} {
		b.Run(profile, func(b *testing.B) {
			var toRing, toServed, toReplicated, toVerdict []time.Duration
			for range b.N {
				nodes := cluster.StartCluster(b, 3, cluster.Options{Replicas: 2, Args: []string{"--gossip-profile", profile, "--log-level", benchLogLevel()}})
				c := benchClient(b, nodes)
				load(b, c, 20_000, 5)
				c.Close(context.Background())
				waitFor(b, nodes, time.Now(), time.Minute, "replicated before the kill", func(s []*proto.Status) bool { return replicated(s, 3) })
				callers := newVerdictLoad(b, nodes)
				time.Sleep(2 * time.Second) // a baseline of the failures a loaded box causes anyway

				start := time.Now()
				callers.mark(start)
				nodes[1].Kill()
				g := waitFor(b, nodes, start, 2*time.Minute, "ring", func(s []*proto.Status) bool { return members(s, 2) })
				s := waitFor(b, nodes, start, 2*time.Minute, "served", func(s []*proto.Status) bool { return served(s, 2) })
				// The load runs 8 s past the kill, a margin no failover
				// should need: a burst of failures later would still be
				// seen. R copies are awaited meanwhile, then without load
				// (a run that needed that says so).
				r, underLoad := time.Duration(0), true
				for r == 0 && time.Since(start) < 8*time.Second {
					if sts, ok := statuses(nodes); ok && copied(sts, 2) {
						r = time.Since(start)
					}
					time.Sleep(5 * time.Millisecond)
				}
				v, last, failed, calls, base := callers.stop()
				if r == 0 {
					underLoad = false
					r = waitFor(b, nodes, start, 2*time.Minute, "replicated", func(s []*proto.Status) bool { return copied(s, 2) })
				}
				if !underLoad {
					b.Logf("%s: R copies only once the load stopped", profile)
				}
				toRing, toServed, toReplicated, toVerdict = append(toRing, g), append(toServed, s), append(toReplicated, r), append(toVerdict, v)
				b.Logf("%s: out of every ring after %v, served again after %v, R copies after %v, failed verdicts over 5%% of a 100 ms window until %v (the last one at all after %v; %d of %d calls failed by policy after the kill, %.2f%% before it)",
					profile, g.Round(time.Millisecond), s.Round(time.Millisecond), r.Round(time.Millisecond), v.Round(time.Millisecond), last.Round(time.Millisecond), failed, calls, 100*base)
				saveLogs(nodes, "failover")
				for _, n := range nodes {
					n.Kill()
				}
			}
			b.ReportMetric(float64(median(toRing).Milliseconds()), "ms-to-ring")
			b.ReportMetric(float64(median(toServed).Milliseconds()), "ms-to-served")
			b.ReportMetric(float64(median(toReplicated).Milliseconds()), "ms-to-R-copies")
			b.ReportMetric(float64(median(toVerdict).Milliseconds()), "ms-to-last-failed-verdict")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// members: every running node's ring holds exactly the running nodes.
func members(sts []*proto.Status, n int) bool {
	for _, st := range sts {
		if st.Members != uint64(n) {
			return false
		}
	}
	return len(sts) == n
}

// copied: every partition has its R copies (none under-replicated, no
// transfer being sent), whatever the replication queue of ongoing
// writes holds.
func copied(sts []*proto.Status, n int) bool {
	if !served(sts, n) {
		return false
	}
	for _, st := range sts {
		if st.UnderReplicated != 0 || st.Handing != 0 {
			return false
		}
	}
	return true
}

// verdictLoad is an ad server's traffic through a failover: Allows at
// about 2,000 a second on 400 viewers, half on a soft cap and half on a
// strict one, with a 20 ms deadline, counting calls and verdicts decided
// by the failure policy per 100 ms window from the kill. A box this
// loaded fails some calls at any time; the failover ends with the last
// window in which more than 5% failed.
type verdictLoad struct {
	c      *client.Client
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu sync.Mutex
	// The fields below are guarded by mu.
	origin             time.Time
	calls, failed      map[int]int // per 100 ms window since origin (negative: before)
	lastFailure        time.Time
	baseCalls, baseBad int
}

const verdictWindow = 100 * time.Millisecond

// mark sets the moment windows count from.
func (l *verdictLoad) mark(t time.Time) {
	l.mu.Lock()
	l.origin = t
	l.mu.Unlock()
}

func newVerdictLoad(b *testing.B, nodes []*cluster.Node) *verdictLoad {
	cfg := client.DefaultConfig(seeds(nodes...)...)
	cfg.Timeout = 20 * time.Millisecond
	c := cluster.Client(b, cfg)
	caps := []fcap.Cap{
		{Scope: "campaign", ID: "fo-soft", Limit: fcap.MaxLimit, Window: time.Hour},
		{Scope: "campaign", ID: "fo-strict", Limit: fcap.MaxLimit, Window: time.Hour, Mode: fcap.Strict},
	}
	l := &verdictLoad{c: c, calls: map[int]int{}, failed: map[int]int{}}
	var ctx context.Context
	ctx, l.cancel = context.WithCancel(context.Background())
	const workers = 8 // each paced at one call per 4 ms
	for w := range workers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			tick := time.NewTicker(4 * time.Millisecond)
			defer tick.Stop()
			for i := 0; ctx.Err() == nil; i++ {
				v := fmt.Sprintf("fo-%d", (i*workers+w)%400)
				vd, err := c.Allow(context.Background(), v, caps[i%2:i%2+1])
				bad := err == nil && vd.Failed()
				l.mu.Lock()
				if l.origin.IsZero() {
					l.baseCalls++
					if bad {
						l.baseBad++
					}
				} else {
					w := int(time.Since(l.origin) / verdictWindow)
					l.calls[w]++
					if bad {
						l.failed[w]++
						l.lastFailure = time.Now()
					}
				}
				l.mu.Unlock()
				select {
				case <-ctx.Done():
				case <-tick.C:
				}
			}
		}()
	}
	return l
}

// stop ends the traffic and returns, from the mark: the end of the last
// window with more than 5% of its calls failed by policy, the last
// failed call, the calls failed and made; and the fraction failed before
// the mark.
func (l *verdictLoad) stop() (end, last time.Duration, failed, calls int, base float64) {
	l.cancel()
	l.wg.Wait()
	l.c.Close(context.Background())
	l.mu.Lock()
	defer l.mu.Unlock()
	for w, n := range l.calls {
		calls += n
		failed += l.failed[w]
		if float64(l.failed[w]) > 0.05*float64(n) {
			end = max(end, time.Duration(w+1)*verdictWindow)
		}
	}
	if !l.lastFailure.IsZero() {
		last = l.lastFailure.Sub(l.origin)
	}
	if l.baseCalls > 0 {
		base = float64(l.baseBad) / float64(l.baseCalls)
	}
	return end, last, failed, calls, base
}

// BenchmarkJoin adds a fourth node to three holding 4,000,000 counters
// (800,000 viewers x 5 campaigns, one impression each), so the new node
// becomes primary of about a quarter of them (and, with R=2, backup of
// another quarter). It measures the time until the new node is active
// and every partition has its copies, and the bytes of state sent.
func BenchmarkJoin(b *testing.B) {
	requireNoRace(b)
	for _, r := range []int{1, 2} {
		for _, rate := range []string{"64MiB", "0"} {
			b.Run(fmt.Sprintf("R=%d/rate=%s", r, rate), func(b *testing.B) {
				for range b.N {
					joinOnce(b, r, rate)
				}
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}

func joinOnce(b *testing.B, replicas int, rate string) {
	args := []string{"--log-level", benchLogLevel(), "--memory-limit", "4GiB", "--transfer-rate", rate}
	nodes := cluster.StartCluster(b, 3, cluster.Options{Replicas: replicas, Args: args})
	c := benchClient(b, nodes)
	t0 := time.Now()
	load(b, c, 800_000, 5)
	c.Close(context.Background())
	waitFor(b, nodes, time.Now(), 5*time.Minute, "replicated before the join", func(s []*proto.Status) bool { return replicated(s, 3) })
	var keys uint64
	sts, _ := statuses(nodes)
	for _, st := range sts {
		keys += st.Keys
	}
	b.Logf("loaded %d counter copies on 3 nodes in %v", keys, time.Since(t0).Round(time.Millisecond))
	sent := func() float64 {
		var sum float64
		for _, n := range nodes {
			if n.Running() {
				sum += n.Metric("fcap_replication_bytes_total")
			}
		}
		return sum
	}
	before := sent()

	start := time.Now()
	n4 := cluster.Start(b, "n4", cluster.Options{Replicas: replicas, Seeds: []string{nodes[0].Gossip}, Args: args})
	nodes = append(nodes, n4)
	took := waitFor(b, nodes, start, 10*time.Minute, "joined", func(s []*proto.Status) bool { return replicated(s, 4) })
	moved := sent() - before
	st, err := client.NodeStatus(context.Background(), n4.Data)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("R=%d transfer-rate=%s: n4 active with every partition replicated after %v (including its start); %.1f MB sent; n4 holds %d counters (%.1f%% of %d) in %d primaries and %d backups",
		replicas, rate, took.Round(time.Millisecond), moved/1e6, st.Keys, 100*float64(st.Keys)/float64(keys/uint64(replicas)), keys/uint64(replicas), st.Primaries, st.Backups)
	for _, n := range nodes {
		b.Logf("%s: %v ring changes; %v partition transfers sent", n.Name, n.Metric("fcap_ring_changes_total"), n.Metric("fcap_partition_transfers_total"))
	}
	saveLogs(nodes, "join")
	b.ReportMetric(took.Seconds(), "s-to-join")
	b.ReportMetric(moved/1e6, "MB-moved")
	for _, n := range nodes {
		n.Kill()
	}
}

// benchLogLevel is the nodes' log level: debug when FCAP_BENCH_LOGS is set
// (saveLogs then keeps the logs), info otherwise.
func benchLogLevel() string {
	if os.Getenv("FCAP_BENCH_LOGS") != "" {
		return "debug"
	}
	return "info"
}

// saveLogs writes every node's log to $TMPDIR/fcap-bench-NAME-NODE.log
// when FCAP_BENCH_LOGS is set, to see where a slow figure's time went.
func saveLogs(nodes []*cluster.Node, name string) {
	if os.Getenv("FCAP_BENCH_LOGS") == "" {
		return
	}
	for _, n := range nodes {
		os.WriteFile(filepath.Join(os.TempDir(), fmt.Sprintf("fcap-bench-%s-%s.log", name, n.Name)), []byte(n.Logs()), 0o644)
	}
}

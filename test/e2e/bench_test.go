package e2e

// Benchmarks of the cluster's moves, with real fcapd processes. They are
// figures, not tests: run them with the race detector off in the built
// fcapd, for example
//
//	FCAP_TEST_NORACE=1 go test ./test/e2e -run '^$' -bench Failover -benchtime 5x
//	FCAP_TEST_NORACE=1 go test ./test/e2e -run '^$' -bench Join -benchtime 1x -timeout 30m
//
// and see BENCHMARKS.md.

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

	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/node/engine"
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
func served(sts []*proto.Status, members int) bool {
	for _, st := range sts {
		if st.Members != uint64(members) || st.State != 2 || st.Syncing != 0 {
			return false
		}
	}
	return len(sts) == members
}

// replicated: served, and every partition has all its copies.
func replicated(sts []*proto.Status, members int) bool {
	if !served(sts, members) {
		return false
	}
	for _, st := range sts {
		if st.UnderReplicated != 0 || st.Handing != 0 || st.ReplicationQueue != 0 {
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
	cs := make([]engine.Cap, caps)
	for i := range cs {
		cs[i] = engine.Cap{Scope: "campaign", ID: fmt.Sprint("c", i), Limit: 5, Window: 7 * 24 * 3_600_000}
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
				for !c.Record(v, engine.Impression{ID: v, Time: now, Caps: cs}) {
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
	c, err := client.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		b.Fatal(err)
	}
	return c
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkFailover kills one of three nodes (R=2) holding 100,000
// counters and measures the time from kill -9 to every partition being
// served again (the dead node out of every ring, no partition waiting
// for state), and to every partition having its R copies again. Once
// with gossip tuned for loopback, once with memberlist's LAN defaults.
func BenchmarkFailover(b *testing.B) {
	requireNoRace(b)
	for _, profile := range []string{"local", "lan"} {
		b.Run(profile, func(b *testing.B) {
			var toServed, toReplicated []time.Duration
			for range b.N {
				nodes := cluster.StartCluster(b, 3, cluster.Options{Replicas: 2, Args: []string{"--gossip-profile", profile, "--log-level", benchLogLevel()}})
				c := benchClient(b, nodes)
				load(b, c, 20_000, 5)
				c.Close(context.Background())
				waitFor(b, nodes, time.Now(), time.Minute, "replicated before the kill", func(s []*proto.Status) bool { return replicated(s, 3) })

				start := time.Now()
				nodes[1].Kill()
				s := waitFor(b, nodes, start, 2*time.Minute, "served", func(s []*proto.Status) bool { return served(s, 2) })
				r := waitFor(b, nodes, start, 2*time.Minute, "replicated", func(s []*proto.Status) bool { return replicated(s, 2) })
				toServed, toReplicated = append(toServed, s), append(toReplicated, r)
				b.Logf("%s: served again after %v, R copies after %v", profile, s.Round(time.Millisecond), r.Round(time.Millisecond))
				saveLogs(nodes, "failover")
				for _, n := range nodes {
					n.Kill()
				}
			}
			b.ReportMetric(float64(median(toServed).Milliseconds()), "ms-to-served")
			b.ReportMetric(float64(median(toReplicated).Milliseconds()), "ms-to-R-copies")
			b.ReportMetric(0, "ns/op")
		})
	}
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

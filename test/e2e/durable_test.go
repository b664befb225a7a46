package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/test/cluster"
)

// Durability with real processes (issue 9): kill -9, restart with the
// same --data-dir, and the counts are back.

// A fixed window of ten years: one integer per viewer, so logged states
// stay small, and no calendar boundary inside a test.
var bigCap = fcap.Cap{Scope: "campaign", ID: "durable", Limit: 60_000, Window: fcap.MaxWindow, Algorithm: fcap.Fixed}

func durableArgs(dir string) []string {
	return []string{"--data-dir", dir, "--fsync", "always", "--snapshot-interval", "0"}
}

// tally is what a writer learned: calls made and calls acknowledged.
type tally struct {
	mu        sync.Mutex
	attempted map[string]int
	acked     map[string]int
}

func newTally() *tally { return &tally{attempted: map[string]int{}, acked: map[string]int{}} }

func checkTally(t *testing.T, c *client.Client, tl *tally) (acked int) {
	t.Helper()
	tl.mu.Lock()
	defer tl.mu.Unlock()
	for v, n := range tl.attempted {
		got := countOf(t, c, v, bigCap)
		if got < tl.acked[v] || got > n {
			t.Errorf("%s: %d counted after restart; %d acknowledged of %d attempted", v, got, tl.acked[v], n)
		}
		acked += tl.acked[v]
	}
	return acked
}

// TestKill9SingleNodeKeepsAcknowledgedWrites: kill -9 one node (R=1,
// --fsync always) in the middle of an Allow stream; restarted on the same
// data dir it counts every acknowledged impression, and none twice.
func TestKill9SingleNodeKeepsAcknowledgedWrites(t *testing.T) {
	dir := t.TempDir()
	n := cluster.Start(t, "d1", cluster.Options{Replicas: 1, Args: durableArgs(dir)})
	c := cluster.NewClient(t, cluster.Seeds(n))
	tl := newTally()
	ctx, stop := context.WithCancel(context.Background())
	wg := allowTraffic(ctx, c, tl, viewerIDs("kill9", 40), 4, bigCap)
	cluster.Eventually(t, 30*time.Second, func() bool { return tl.total() >= 500 }, "no traffic acknowledged")
	n.Kill()
	stop()
	wg.Wait()

	n.Restart()
	c2 := cluster.NewClient(t, cluster.Seeds(n))
	acked := checkTally(t, c2, tl)
	if !strings.Contains(n.Logs(), "storage: loaded the data dir") {
		t.Error("no storage line at start")
	}
	if n.Metric("fcap_log_healthy") != 1 || n.Metric("fcap_log_replayed_records_total") == 0 {
		t.Errorf("log metrics: healthy %v, replayed %v", n.Metric("fcap_log_healthy"), n.Metric("fcap_log_replayed_records_total"))
	}
	t.Logf("%d acknowledged impressions all counted after kill -9; replayed %.0f records", acked, n.Metric("fcap_log_replayed_records_total"))
}

// newestSegment returns the newest log segment that holds anything.
func newestSegment(t *testing.T, dir string) string {
	t.Helper()
	segs, _ := filepath.Glob(filepath.Join(dir, "wal", "*.wal"))
	for i := len(segs) - 1; i >= 0; i-- {
		if st, err := os.Stat(segs[i]); err == nil && st.Size() > 0 {
			return segs[i]
		}
	}
	t.Fatal("no segment holds anything")
	return ""
}

// TestDamagedLogTail: a truncated or bit-flipped last segment costs only
// its damaged record: the node starts, reports what it dropped, and keeps
// everything before it.
func TestDamagedLogTail(t *testing.T) {
	dir := t.TempDir()
	n := cluster.Start(t, "d1", cluster.Options{Replicas: 1, Args: durableArgs(dir)})
	damages := []struct {
		name   string
		damage func(b []byte) []byte
	}{
		{"truncated", func(b []byte) []byte { return b[:len(b)-3] }},
		{"bit flip", func(b []byte) []byte { b[len(b)-5] ^= 0x04; return b }},
	}
	for round, d := range damages {
		cluster.WaitActive(t, []*cluster.Node{n}, 1) // serving, not just listening
		c := cluster.NewClient(t, cluster.Seeds(n))
		viewers := viewerIDs(fmt.Sprint("tail", round), 30)
		ctx := context.Background()
		for _, v := range viewers {
			if vd, err := c.Allow(ctx, v, []fcap.Cap{bigCap}); err != nil || !vd.Allowed || vd.FailOpen {
				t.Fatalf("allow %s: %+v %v", v, vd, err)
			}
		}
		n.Kill()
		seg := newestSegment(t, dir)
		b, _ := os.ReadFile(seg)
		if err := os.WriteFile(seg, d.damage(b), 0o644); err != nil {
			t.Fatal(err)
		}
		n.Restart()
		cluster.WaitActive(t, []*cluster.Node{n}, 1)
		c = cluster.NewClient(t, cluster.Seeds(n))
		for i, v := range viewers {
			want := 1
			if i == len(viewers)-1 {
				want = 0 // its record was the damaged one
			}
			if got := countOf(t, c, v, bigCap); got != want {
				t.Errorf("%s: %s counted %d, want %d", d.name, v, got, want)
			}
		}
		if !strings.Contains(n.Logs(), "dropping a torn or corrupt tail") || n.Metric("fcap_log_dropped_bytes_total") == 0 {
			t.Errorf("%s: the dropped tail was not reported", d.name)
		}
	}
}

// TestWholeClusterRestart: three nodes (R=2, --fsync always) all killed
// with kill -9 at once and restarted: every acknowledged count is back.
func TestWholeClusterRestart(t *testing.T) {
	nodes := cluster.StartCluster(t, 3, cluster.Options{Replicas: 2, DataDir: t.TempDir(), Args: durableArgs("")[2:]})
	c := cluster.NewClient(t, cluster.Seeds(nodes...))
	tl := newTally()
	ctx, stop := context.WithCancel(context.Background())
	wg := allowTraffic(ctx, c, tl, viewerIDs("whole", 60), 4, bigCap)
	cluster.Eventually(t, 30*time.Second, func() bool { return tl.total() >= 600 }, "no traffic acknowledged")
	stop()
	wg.Wait()
	// Links are durable like counters.
	for i := range 20 {
		if _, err := c.Link(context.Background(), fmt.Sprintf("whole-device-%d", i), fmt.Sprintf("whole-person-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	// Soft writes reach the backups asynchronously: let them, so that
	// every partition's copies agree before the crash. A fixed second
	// was a guess a busy machine can outlast; the nodes say when nothing
	// is left to send.
	settledGauges(t, nodes, "the traffic")
	for _, n := range nodes {
		n.Kill()
	}
	for _, n := range nodes {
		n.Restart()
	}
	cluster.WaitActive(t, nodes, 3)
	c2 := cluster.NewClient(t, cluster.Seeds(nodes...))
	acked := checkTally(t, c2, tl)
	for i := range 20 {
		d, want := fmt.Sprintf("whole-device-%d", i), fmt.Sprintf("whole-person-%d", i)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		v, err := c2.Resolve(ctx, d)
		cancel()
		if err != nil || v != want {
			t.Errorf("after the restart, Resolve(%s) = %q %v, want %q", d, v, err, want)
		}
	}
	t.Logf("%d acknowledged impressions and 20 links all back after a whole-cluster kill -9", acked)
}

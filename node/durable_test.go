package node_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/node"
	"github.com/fcap-io/fcap/node/wal"
)

func startDurable(t *testing.T, dir string, mutate ...func(*node.Config)) *node.Node {
	t.Helper()
	nodes := settledCluster(t, "node", 1, append([]func(*node.Config){func(c *node.Config) {
		c.Storage.DataDir = dir
		c.Storage.Fsync = wal.Always
	}}, mutate...)...)
	return nodes[0]
}

func stop(t *testing.T, n *node.Node) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}

// states describes what a node holds for the given viewers.
func states(n *node.Node, viewers int) string {
	var s string
	for i := range viewers {
		st, ok := n.Engine().Viewer(fmt.Sprint("viewer-", i))
		s += fmt.Sprintf("%d:%v:%v\n", i, ok, st)
	}
	return s
}

// reopen starts a node on dir again and fails the test, saying after
// what, unless it holds want for the viewers.
func reopen(t *testing.T, dir string, viewers int, want, after string) *node.Node {
	t.Helper()
	n := startDurable(t, dir)
	if got := states(n, viewers); got != want {
		t.Fatalf("%s:\n%s\nwant:\n%s", after, got, want)
	}
	return n
}

// A node with a data dir comes back with every write it acknowledged,
// Allow, Record and Reserve alike, and replaying the log twice counts
// nothing twice.
func TestDataDirRestoresWrites(t *testing.T) {
	dir := t.TempDir()
	n := startDurable(t, dir)
	c := newClient(t, []*node.Node{n})
	capA := fcap.Cap{Scope: "campaign", ID: "a", Limit: 100, Window: fcap.MaxWindow}
	ctx := context.Background()
	const viewers = 50
	for i := range viewers {
		viewer := fmt.Sprint("viewer-", i)
		for k := range i % 5 {
			if v, err := c.Allow(ctx, viewer, []fcap.Cap{capA}, client.At(int64(k))); err != nil || !v.Allowed {
				t.Fatalf("allow: %+v %v", v, err)
			}
		}
		c.Record(viewer, fcap.Impression{ID: fmt.Sprint("imp-", i), Time: 10, Caps: []fcap.Cap{capA}})
	}
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Reserve(ctx, "viewer-0", fcap.Candidate{Caps: []fcap.Cap{capA}}, time.Hour, client.At(20)); err != nil {
		t.Fatal(err)
	}
	want := states(n, viewers)
	stop(t, n)

	n = reopen(t, dir, viewers, want, "after restart")
	stop(t, n)

	// Every segment again, as later segments: replayed twice.
	segs, _ := filepath.Glob(filepath.Join(dir, "wal", "*.wal"))
	for i, s := range segs {
		b, _ := os.ReadFile(s)
		os.WriteFile(filepath.Join(dir, "wal", fmt.Sprintf("%020d.wal", 1000+i)), b, 0o644)
	}
	reopen(t, dir, viewers, want, "after replaying twice")
}

// A snapshot taken while writes go on, plus the log after it, restores
// the same state as the whole log; a damaged newest snapshot falls back
// to the one before it.
func TestSnapshotPlusLogTail(t *testing.T) {
	dir := t.TempDir()
	n := startDurable(t, dir)
	c := newClient(t, []*node.Node{n})
	capA := fcap.Cap{Scope: "campaign", ID: "a", Limit: 100, Window: fcap.MaxWindow}
	ctx := context.Background()
	const viewers = 40
	write := func(round int) {
		for i := range viewers {
			if v, err := c.Allow(ctx, fmt.Sprint("viewer-", i), []fcap.Cap{capA}, client.At(int64(round))); err != nil || !v.Allowed {
				t.Fatalf("allow: %+v %v", v, err)
			}
		}
	}
	write(1)
	if err := n.Snapshot(); err != nil {
		t.Fatal(err)
	}
	write(2)
	if err := n.Snapshot(); err != nil {
		t.Fatal(err)
	}
	write(3)
	want := states(n, viewers)
	stop(t, n)

	n = reopen(t, dir, viewers, want, "from the snapshot and the log")
	stop(t, n)

	snaps, _ := filepath.Glob(filepath.Join(dir, "snapshots", "*.snap"))
	if len(snaps) != 2 {
		t.Fatalf("%d snapshots kept, want 2", len(snaps))
	}
	b, _ := os.ReadFile(snaps[1])
	b[len(b)/2] ^= 0xff
	os.WriteFile(snaps[1], b, 0o644)
	reopen(t, dir, viewers, want, "from the older snapshot")
}

// Snapshots taken while writes go on lose nothing: the log after the
// cut replays every write the snapshot may have missed.
func TestSnapshotDuringWrites(t *testing.T) {
	dir := t.TempDir()
	n := startDurable(t, dir, func(c *node.Config) { c.Storage.Fsync = wal.Interval })
	c := newClient(t, []*node.Node{n})
	capA := fcap.Cap{Scope: "campaign", ID: "a", Limit: 1000, Window: fcap.MaxWindow}
	const viewers, writers = 30, 4
	done := make(chan struct{})
	errs := make(chan error, writers)
	for w := range writers {
		go func() {
			for i := 0; ; i++ {
				select {
				case <-done:
					errs <- nil
					return
				default:
				}
				v, err := c.Allow(context.Background(), fmt.Sprint("viewer-", (i*writers+w)%viewers), []fcap.Cap{capA}, client.At(int64(i)))
				if err != nil || !v.Allowed {
					errs <- fmt.Errorf("allow: %+v %v", v, err)
					return
				}
			}
		}()
	}
	for range 5 {
		if err := n.Snapshot(); err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	for range writers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	want := states(n, viewers)
	stop(t, n)
	reopen(t, dir, viewers, want, "after snapshots under writes")
}

// A disk that refuses writes (the log's segment is /dev/full) does not
// stop writes: they are served, the failure is counted and the log is
// marked unhealthy, and logging resumes in a fresh segment.
func TestDiskFullKeepsServing(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full")
	}
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "wal"), 0o755)
	// The first segment the node writes is 1.
	if err := os.Symlink("/dev/full", filepath.Join(dir, "wal", fmt.Sprintf("%020d.wal", 1))); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	n := startDurable(t, dir, func(c *node.Config) { c.Registerer, c.Gatherer = reg, reg })
	c := newClient(t, []*node.Node{n})
	capA := fcap.Cap{Scope: "campaign", ID: "a", Limit: 100, Window: fcap.MaxWindow}
	metric := func(name string) float64 {
		mfs, _ := reg.Gather()
		for _, mf := range mfs {
			if mf.GetName() == name && len(mf.Metric) > 0 {
				m := mf.Metric[0]
				if m.Gauge != nil {
					return m.Gauge.GetValue()
				}
				return m.Counter.GetValue()
			}
		}
		return -1
	}
	if v, err := c.Allow(context.Background(), "viewer-0", []fcap.Cap{capA}, client.At(1)); err != nil || !v.Allowed || v.FailOpen {
		t.Fatalf("allow on a full disk: %+v %v", v, err)
	}
	if metric("fcap_log_write_errors_total") < 1 {
		t.Fatalf("write errors %v, want at least 1", metric("fcap_log_write_errors_total"))
	}
	for i := 1; i < 20; i++ {
		if v, err := c.Allow(context.Background(), fmt.Sprint("viewer-", i), []fcap.Cap{capA}, client.At(1)); err != nil || !v.Allowed || v.FailOpen {
			t.Fatalf("allow: %+v %v", v, err)
		}
	}
	if metric("fcap_log_healthy") != 1 {
		t.Fatalf("log not healthy again after writes succeeded: %v", metric("fcap_log_healthy"))
	}
	want := states(n, 20)
	stop(t, n)
	n = startDurable(t, dir)
	got := states(n, 20)
	// viewer-0's write was refused by the disk: only it may be missing.
	wantLines, gotLines := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 1; i < 20; i++ {
		if wantLines[i] != gotLines[i] {
			t.Errorf("viewer-%d: %s after restart, want %s", i, gotLines[i], wantLines[i])
		}
	}
}

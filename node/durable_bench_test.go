package node

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/node/engine"
	"github.com/fcap-io/fcap/node/wal"
	"github.com/fcap-io/fcap/proto"
)

// BenchmarkHandleAllowDurable: Allow through the handler (no network),
// 8 concurrent connections on distinct viewers, memory only and with a
// data dir under each fsync policy. Under "always" the connections share
// fsyncs (group commit); each waits for its own.
func BenchmarkHandleAllowDurable(b *testing.B) {
	caps := []fcap.Cap{
		{Scope: "creative", ID: "cr-1", Limit: 5, Window: 1000},
		{Scope: "campaign", ID: "cmp-1", Limit: 5, Window: 1000},
		{Scope: "advertiser", ID: "adv-1", Limit: 5, Window: 1000},
	}
	for _, mode := range []string{"memory", "never", "interval", "always", "always-64conns"} {
		b.Run(mode, func(b *testing.B) {
			par := 4 // x GOMAXPROCS connections
			if mode == "always-64conns" {
				mode, par = "always", 64/runtime.GOMAXPROCS(0)
			}
			cfg := DefaultLocalConfig("bench")
			cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
			cfg.Engine.MemoryLimit = 0
			if mode != "memory" {
				cfg.DataDir = b.TempDir()
				cfg.Fsync, _ = wal.ParsePolicy(mode)
			}
			n, err := Start(cfg)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { n.Shutdown(context.Background()) })
			var conn atomic.Int64
			b.SetParallelism(par)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				c := conn.Add(1)
				h := newHandler(n)
				out := make([]byte, 0, 64<<10)
				bodies := make([][]byte, 256)
				var hdr proto.Header
				for i := range bodies {
					m := &proto.Allow{Viewer: fmt.Sprintf("viewer-%d-%d", c, i%16), Now: int64(i * 300), HasNow: true, Caps: caps}
					frame, _ := proto.AppendFrame(nil, 1, m)
					hdr, bodies[i] = proto.Header{Version: proto.Version, Type: m.Type(), ID: 1}, frame[proto.HeaderSize:]
				}
				for i := 0; pb.Next(); i++ {
					out = h.handle(out[:0], hdr, bodies[i&255])
				}
			})
		})
	}
}

// TestRestartTime measures how long a node takes to load N stored
// impressions (FCAP_RESTART_IMPRESSIONS, e.g. 10000000; skipped without
// it): from the log alone (subtest log), and from a snapshot plus a 10%
// log tail (subtest snapshot). It reports the wall time of the load and
// the CPU time the process spent in it (steadier than the wall time on a
// shared machine), and the disk bytes per impression. A measurement, not
// a test: it asserts only that the restart loads the state it wrote.
func TestRestartTime(t *testing.T) {
	total, _ := strconv.Atoi(os.Getenv("FCAP_RESTART_IMPRESSIONS"))
	if total == 0 {
		t.Skip("set FCAP_RESTART_IMPRESSIONS to measure")
	}
	const perViewer = 10
	viewers := total / perViewer
	caps := []fcap.Cap{
		{Scope: "campaign", ID: "cmp-1", Limit: 20, Window: 1 << 40},
		{Scope: "advertiser", ID: "adv-1", Limit: 50, Window: 1 << 40},
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, variant := range []struct {
		name     string
		withSnap bool
	}{{"log", false}, {"snapshot", true}} {
		t.Run(variant.name, func(t *testing.T) {
			withSnap := variant.withSnap
			dir := t.TempDir()
			cfg := DefaultLocalConfig("restart")
			cfg.Logger = quiet
			cfg.DataDir = dir
			cfg.Fsync = wal.Never
			cfg.Engine.MemoryLimit = 0
			newEngine := func() *engine.Engine {
				e, err := engine.New(cfg.Engine)
				if err != nil {
					t.Fatal(err)
				}
				return e
			}
			eng := newEngine()
			d, err := openDurable(cfg, eng, quiet, prometheus.NewRegistry(), nil)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			var snapTook time.Duration
			for k := range perViewer {
				if withSnap && k == perViewer-1 {
					s := time.Now()
					if err := d.snapshot(); err != nil {
						t.Fatal(err)
					}
					snapTook = time.Since(s)
				}
				for v := range viewers {
					viewer := "viewer-" + strconv.Itoa(v)
					imp := fcap.Impression{ID: strconv.Itoa(k), Time: int64(k), Caps: caps}
					w := engine.Write{Journal: d}
					if _, err := eng.RecordWrite(&w, viewer, imp); err != nil {
						t.Fatal(err)
					}
				}
			}
			wrote := time.Since(start)
			d.close()
			var logBytes, snapBytes int64
			filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
				if err == nil && !info.IsDir() {
					if filepath.Ext(p) == ".snap" {
						snapBytes += info.Size()
					} else {
						logBytes += info.Size()
					}
				}
				return nil
			})
			// The restarted process does not hold the old engine.
			wrote1 := eng.Stats()
			eng = nil
			runtime.GC()
			eng2 := newEngine()
			cpu0 := cpuTime()
			start = time.Now()
			d2, err := openDurable(cfg, eng2, quiet, prometheus.NewRegistry(), nil)
			if err != nil {
				t.Fatal(err)
			}
			took, cpu := time.Since(start), cpuTime()-cpu0
			d2.close()
			if got := eng2.Stats(); got.Viewers != wrote1.Viewers || got.Keys != wrote1.Keys {
				t.Fatalf("restart loaded %+v, wrote %+v", got, wrote1)
			}
			t.Logf("%d impressions (%d viewers x %d), snapshot=%v (written in %v): wrote in %v; log %d bytes, snapshot %d bytes (%.1f log bytes/impression); restart took %v, %v of CPU (GOMAXPROCS %d)",
				total, viewers, perViewer, withSnap, snapTook.Round(time.Millisecond), wrote.Round(time.Millisecond), logBytes, snapBytes,
				float64(logBytes)/float64(total), took.Round(time.Millisecond), cpu.Round(time.Millisecond), runtime.GOMAXPROCS(0))
		})
	}
}

// cpuTime is the user and system CPU time the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

package storage

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/node/engine"
	"github.com/fcap-io/fcap/node/wal"
)

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
		{Scope: "campaign", ID: "cmp-1", Limit: 20, Window: fcap.MaxWindow},
		{Scope: "advertiser", ID: "adv-1", Limit: 50, Window: fcap.MaxWindow},
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, variant := range []struct {
		name     string
		withSnap bool
	}{{"log", false}, {"snapshot", true}} {
		t.Run(variant.name, func(t *testing.T) {
			withSnap := variant.withSnap
			dir := t.TempDir()
			cfg := DefaultConfig()
			cfg.DataDir = dir
			cfg.Fsync = wal.Never
			engCfg := engine.DefaultLocalConfig()
			engCfg.MemoryLimit = 0
			newEngine := func() *engine.Engine {
				e, err := engine.New(engCfg)
				if err != nil {
					t.Fatal(err)
				}
				return e
			}
			eng := newEngine()
			d, err := Open(cfg, eng, quiet, prometheus.NewRegistry(), nil)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			var snapTook time.Duration
			for k := range perViewer {
				if withSnap && k == perViewer-1 {
					s := time.Now()
					if err := d.Snapshot(); err != nil {
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
			d.Close()
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
			d2, err := Open(cfg, eng2, quiet, prometheus.NewRegistry(), nil)
			if err != nil {
				t.Fatal(err)
			}
			took, cpu := time.Since(start), cpuTime()-cpu0
			d2.Close()
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

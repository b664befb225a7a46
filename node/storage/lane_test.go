package storage

import (
	"io"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/node/engine"
	"github.com/fcap-io/fcap/node/wal"
)

// TestReplayKeepsLanes: a viewer's lane of another region (merged from
// that region's state, logged as the node logs a region merge) comes
// back on a restart, from the log and from a snapshot, and counts apart
// from the impression this region recorded at the same millisecond.
func TestReplayKeepsLanes(t *testing.T) {
	caps := []fcap.Cap{{Scope: "campaign", ID: "c", Limit: 10, Window: fcap.MaxWindow}}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	peer, err := engine.New(engine.DefaultLocalConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := peer.Record("v", fcap.Impression{ID: "there", Time: 10, Caps: caps}); err != nil {
		t.Fatal(err)
	}
	shipped := peer.ExportLocal(fcap.ViewerKey("v"), nil)
	for _, snapshot := range []bool{false, true} {
		cfg := DefaultConfig()
		cfg.DataDir = t.TempDir()
		cfg.Fsync = wal.Never
		open := func() (*Store, *engine.Engine) {
			e, err := engine.New(engine.DefaultLocalConfig())
			if err != nil {
				t.Fatal(err)
			}
			if err := e.AddRegion("b"); err != nil {
				t.Fatal(err)
			}
			d, err := Open(cfg, e, quiet, prometheus.NewRegistry(), nil)
			if err != nil {
				t.Fatal(err)
			}
			return d, e
		}
		d, e := open()
		if _, err := e.RecordWrite(&engine.Write{Journal: d}, "v", fcap.Impression{ID: "here", Time: 10, Caps: caps}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := e.MergeRegionAll(shipped, "b", nil); err != nil {
			t.Fatal(err)
		}
		e.LogState(d, fcap.ViewerKey("v"))
		if snapshot {
			if err := d.Snapshot(); err != nil {
				t.Fatal(err)
			}
		}
		d.Close()

		d, e = open()
		if vd, _ := e.Check("v", []fcap.Candidate{{Caps: caps}}, 30, nil); vd[0].Remaining != 8 {
			t.Errorf("snapshot %v: %d left after the restart, want 8 (here's impression and b's lane)", snapshot, vd[0].Remaining)
		}
		d.Close()
	}
}

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

// TestReplayKeepsAVoid: a void logged after a snapshot (the log's last
// word) and a void a snapshot holds both come back on a restart: the
// impression counts no more, and a late Record of its id counts nothing.
func TestReplayKeepsAVoid(t *testing.T) {
	caps := []fcap.Cap{{Scope: "campaign", ID: "c", Limit: 10, Window: fcap.MaxWindow}}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, snapFirst := range []bool{true, false} {
		cfg := DefaultConfig()
		cfg.DataDir = t.TempDir()
		cfg.Fsync = wal.Never
		open := func() (*Store, *engine.Engine) {
			e, err := engine.New(engine.DefaultLocalConfig())
			if err != nil {
				t.Fatal(err)
			}
			d, err := Open(cfg, e, quiet, prometheus.NewRegistry(), nil)
			if err != nil {
				t.Fatal(err)
			}
			return d, e
		}
		d, e := open()
		bot := fcap.Impression{ID: "bot", Time: 20, Caps: caps}
		for _, imp := range []fcap.Impression{{ID: "ok", Time: 10, Caps: caps}, bot} {
			if _, err := e.RecordWrite(&engine.Write{Journal: d}, "v", imp); err != nil {
				t.Fatal(err)
			}
		}
		snapshot := func() {
			if err := d.Snapshot(); err != nil {
				t.Fatal(err)
			}
		}
		if snapFirst {
			snapshot()
		}
		if voided, err := e.VoidWrite(&engine.Write{Journal: d}, "v", bot); err != nil || !voided {
			t.Fatalf("void: %v, %v", voided, err)
		}
		if !snapFirst {
			snapshot()
		}
		d.Close()

		d, e = open()
		if !e.Voided("v", "bot") {
			t.Errorf("snapshot first %v: the void mark did not come back", snapFirst)
		}
		if st, err := e.Record("v", bot); err != nil || st != fcap.Duplicate {
			t.Errorf("snapshot first %v: a late Record after the restart: %v, %v; want duplicate", snapFirst, st, err)
		}
		if vd, _ := e.Check("v", []fcap.Candidate{{Caps: caps}}, 30, nil); vd[0].Remaining != 9 {
			t.Errorf("snapshot first %v: %d left after the restart, want 9", snapFirst, vd[0].Remaining)
		}
		d.Close()
	}
}

package main

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/fcap-io/fcap/node"
	"github.com/fcap-io/fcap/node/nodetest"
)

// TestFcapTargetPrepared: --prepared checks the same candidates through
// CheckPreparedInto and gets the verdicts CheckInto gets, from a real
// node: a campaign whose cap is used up is refused by both, the others
// allowed, and the run's results say which way it asked.
func TestFcapTargetPrepared(t *testing.T) {
	cfg := node.DefaultLocalConfig("bench")
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	nd := nodetest.Start(t, cfg)
	w := workload{Kind: "check", Viewers: 10, Campaigns: 20, Candidates: 10, Zipf: 1.1, ZipfV: 1, Limit: 1, Window: 3_600_000}
	x := newIDs(&w)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var targets []*fcapTarget
	for _, prepared := range []bool{false, true} {
		tgt, err := newTarget("fcap", nd.DataAddr(), &w, x, targetOpts{timeout: 10 * time.Second, conns: 1, prepared: prepared})
		if err != nil {
			t.Fatal(err)
		}
		defer tgt.Close()
		targets = append(targets, tgt.(*fcapTarget))
	}
	if v := targets[0].CheckVariant(); v != "" {
		t.Errorf("CheckInto's variant %q, want none", v)
	}
	if v := targets[1].CheckVariant(); v != "prepared" {
		t.Errorf("--prepared's variant %q, want prepared", v)
	}
	const now = 1_700_000_000_000
	viewer := x.viewer(3)
	if err := targets[0].Record(ctx, viewer, 4, "imp-1", now); err != nil {
		t.Fatal(err)
	}
	if err := targets[0].c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	campaigns := []int{0, 2, 4, 6, 8, 10}
	for i, tgt := range targets {
		allowed, err := tgt.Check(ctx, viewer, campaigns, now+1)
		if err != nil || allowed != len(campaigns)-1 {
			t.Errorf("target %d (variant %q): %d of %d allowed, %v; want all but campaign 4, its cap used up", i, tgt.CheckVariant(), allowed, len(campaigns), err)
		}
	}
}

package main

import (
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/node"
	"github.com/fcap-io/fcap/node/nodetest"
)

// The tail's split is that of the calls at or past the call p99: a
// hundred fast calls spread evenly over the steps do not hide the one
// slow call's wait on the wire.
func TestPhasesSplitTheTail(t *testing.T) {
	p := newPhaseHists()
	t0 := time.Unix(1_700_000_000, 0)
	call := func(steps [nPhases]time.Duration) {
		tr := client.CallTrace{}
		at := t0
		var marks [nPhases + 1]time.Time
		marks[0] = at
		for i, d := range steps {
			at = at.Add(d)
			marks[i+1] = at
		}
		tr.Queued, tr.Writing, tr.Written, tr.Read, tr.Resumed = marks[1], marks[2], marks[3], marks[4], marks[5]
		p.add(marks[0], marks[6], &tr)
	}
	us := time.Microsecond
	for range 100 {
		call([nPhases]time.Duration{10 * us, 10 * us, 10 * us, 10 * us, 10 * us, 10 * us})
	}
	call([nPhases]time.Duration{10 * us, 20 * us, 10 * us, 9000 * us, 30 * us, 10 * us})
	// A call the failure policy answered has no trace: not counted.
	p.add(t0, t0.Add(time.Second), &client.CallTrace{})
	figs := p.figures(9000)
	if len(figs) != nPhases {
		t.Fatalf("%d phases", len(figs))
	}
	want := []float64{10, 20, 10, 9000, 30, 10}
	for i, f := range figs {
		if f.Name != phaseNames[i] || f.TailMean != want[i] {
			t.Errorf("phase %d: %s, tail mean %vus; want %s, %vus", i, f.Name, f.TailMean, phaseNames[i], want[i])
		}
		if f.P50 != 10 {
			t.Errorf("%s: p50 %vus, want 10us", f.Name, f.P50)
		}
	}
	if n := p.h[0].TotalCount(); n != 101 {
		t.Errorf("%d calls recorded, want 101 (not the untraced one)", n)
	}
	// The write's end unknown (the reader was first): the wire counts
	// from the write's start.
	q := newPhaseHists()
	q.add(t0, t0.Add(100*us), &client.CallTrace{Queued: t0.Add(10 * us), Writing: t0.Add(20 * us), Read: t0.Add(80 * us), Resumed: t0.Add(90 * us)})
	if f := q.figures(1); f[2].P50 != 1 || f[3].P50 != 60 {
		t.Errorf("without Written: write %vus (want under 1us), wire %vus (want 60us)", f[2].P50, f[3].P50)
	}
	// The write's end noted after the answer was read (the writer was
	// starved once its write returned): likewise, and the wire is not 0.
	q = newPhaseHists()
	q.add(t0, t0.Add(900*us), &client.CallTrace{Queued: t0.Add(10 * us), Writing: t0.Add(20 * us), Written: t0.Add(800 * us), Read: t0.Add(80 * us), Resumed: t0.Add(850 * us)})
	if f := q.figures(900); f[2].TailMean != 0 || f[3].TailMean != 60 {
		t.Errorf("Written after Read: write %vus (want 0), wire %vus (want 60us)", f[2].TailMean, f[3].TailMean)
	}
	// No stamp of the write at all (the caller resumed before the writer
	// noted it): the wire counts from the queue, not from year 1.
	q = newPhaseHists()
	q.add(t0, t0.Add(100*us), &client.CallTrace{Queued: t0.Add(10 * us), Read: t0.Add(80 * us), Resumed: t0.Add(90 * us)})
	if f := q.figures(100); f[1].TailMean != 0 || f[2].TailMean != 0 || f[3].TailMean != 70 {
		t.Errorf("no write stamps: to the write %vus, write %vus (want 0 each), wire %vus (want 70us)", f[1].TailMean, f[2].TailMean, f[3].TailMean)
	}
}

// fcapbench --phases traces fcap's calls and the echo floor's alike and
// prints both splits; without it, neither.
func TestPhasesOfFcapAndItsFloor(t *testing.T) {
	cfg := node.DefaultLocalConfig("bench")
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	nd := nodetest.Start(t, cfg)
	s := startEcho(t)
	for _, phases := range []bool{true, false} {
		args := []string{"--target", "fcap", "--addr", nd.DataAddr(), "--floor", "--echo-addr", s.Addr(),
			"--workload", "check", "--viewers", "100", "--campaigns", "50", "--candidates", "10",
			"--rate", "200", "--duration", "500ms", "--warmup", "10ms", "--timeout", "10s"}
		if phases {
			args = append(args, "--phases")
		}
		results, stdout := runTwo(t, args...)
		for _, r := range results {
			if !phases {
				if len(r.Phases) != 0 {
					t.Errorf("%s: phases without --phases: %+v", r.Target, r.Phases)
				}
				continue
			}
			if len(r.Phases) != nPhases {
				t.Fatalf("%s: %d phases, want %d: %+v", r.Target, len(r.Phases), nPhases, r.Phases)
			}
			// Every call goes over the wire: its step there is never nil,
			// in the tail either, whose few calls on a busy machine are
			// those a starved writer noted late (phaseHists.add).
			if w := r.Phases[3]; w.Name != "wire and node" || w.P50 < 1 || w.TailMean <= 0 {
				t.Errorf("%s: %+v", r.Target, w)
			}
			if !strings.Contains(stdout, "phases of "+r.Label()+" at 200/s") {
				t.Errorf("the phases of %s are not printed:\n%s", r.Label(), stdout)
			}
		}
	}
}

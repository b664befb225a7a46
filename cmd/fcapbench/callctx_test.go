package main

import (
	"context"
	"testing"
	"time"
)

// deadlineTarget is a target that leaves its calls' bounds to the
// driver, as the Redis targets do: it keeps the deadline of the last
// context it was given.
type deadlineTarget struct {
	nullTarget
	deadline time.Time
	bounded  bool
}

func (t *deadlineTarget) Check(ctx context.Context, _ string, c []int, _ int64) (int, error) {
	t.deadline, t.bounded = ctx.Deadline()
	return len(c), nil
}

func stepRun(tg target, timeout time.Duration) (*run, *worker) {
	w := workload{Kind: "check", Viewers: 100, Campaigns: 50, Candidates: 10, Zipf: 1.1, ZipfV: 10, Limit: 5, Window: 1000}
	r := &run{target: tg, w: &w, ids: newIDs(&w), concurrency: 1, timeout: timeout, seed: 1}
	return r, &worker{g: newGen(r.w, r.ids, r.seed, 0)}
}

// A target that does not bound its calls gets a context that ends at
// --timeout; one that does (fcap, echo, raw, null) gets the run's
// context as it is, and a step against it costs the generator no
// allocation (a context per call cost one and a timer, ~2us a call).
func TestCallContext(t *testing.T) {
	tg := &deadlineTarget{}
	r, wk := stepRun(tg, time.Minute)
	before := time.Now()
	r.step(context.Background(), wk, &counters{}, true)
	if !tg.bounded || tg.deadline.Before(before.Add(time.Minute)) || tg.deadline.After(time.Now().Add(time.Minute)) {
		t.Fatalf("a target that leaves its bounds to the driver got deadline %v (set: %v), want --timeout (1m) after the call began", tg.deadline, tg.bounded)
	}

	for _, tg := range []target{nullTarget{}, &fcapTarget{}, &echoTarget{}} {
		if !selfTimed(tg) {
			t.Errorf("%T bounds its calls by --timeout itself but is not selfTimed", tg)
		}
	}
	r, wk = stepRun(nullTarget{}, time.Minute)
	ctx := context.Background()
	c := &counters{}
	if n := testing.AllocsPerRun(200, func() { r.step(ctx, wk, c, true) }); n != 0 {
		t.Errorf("a step against the null target allocates %.1f times, want 0 (the driver's own cost per call)", n)
	}
}

package metrics

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fcap-io/fcap/node/engine"
)

func newTestSet(t *testing.T) *Set {
	t.Helper()
	eng, err := engine.New(engine.DefaultLocalConfig())
	if err != nil {
		t.Fatal(err)
	}
	m, err := New(prometheus.NewRegistry(), eng, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestRecentServingFigures: the recent figures count the requests of ad
// servers since the oldest snapshot kept, their errors, and bound their
// 99th percentile by a bucket's upper bound.
func TestRecentServingFigures(t *testing.T) {
	m := newTestSet(t)
	t0 := time.Now()
	if got := m.Recent(t0); got != (Recent{}) {
		t.Fatalf("before any snapshot: %+v, want none", got)
	}
	m.Observe(OpCheck, OutcomeError, time.Second) // before the first snapshot: not recent
	m.SampleRecent(t0)

	for range 98 {
		m.Observe(OpCheck, OutcomeOK, 20*time.Microsecond) // the 25µs bucket
	}
	m.Observe(OpCheck, OutcomeNotOwner, 20*time.Microsecond) // answered, routing: not an error
	m.Observe(OpAllow, OutcomeError, 400*time.Microsecond)   // the 500µs bucket
	m.Observe(OpRecord, OutcomeDeadline, 3*time.Millisecond) // the 5ms bucket
	m.Observe(OpReplicate, OutcomeError, time.Second)        // peer traffic: left out
	m.Observe(OpPing, OutcomeOK, time.Second)                // so are pings

	// 101 requests: the 100th fastest is in the 500µs bucket.
	want := Recent{Span: 30 * time.Second, Requests: 101, Errors: 2, P99: 500 * time.Microsecond}
	if got := m.Recent(t0.Add(30 * time.Second)); got != want {
		t.Errorf("recent = %+v, want %+v", got, want)
	}

	// Mostly past the largest bound: the p99 is "over 5ms".
	for range 1000 {
		m.Observe(OpReserve, OutcomeCapacity, 20*time.Millisecond)
	}
	want = Recent{Span: 40 * time.Second, Requests: 1101, Errors: 1002, P99: 5 * time.Millisecond, P99Over: true}
	if got := m.Recent(t0.Add(40 * time.Second)); got != want {
		t.Errorf("recent = %+v, want %+v", got, want)
	}
}

// TestRecentWindowSlides: what is older than the oldest snapshot kept,
// RecentWindow before the newest, is no longer counted.
func TestRecentWindowSlides(t *testing.T) {
	m := newTestSet(t)
	t0 := time.Now()
	m.SampleRecent(t0)
	m.Observe(OpCheck, OutcomeError, 3*time.Millisecond) // counted until t0 leaves the window
	for i := 1; i <= 6; i++ {
		m.SampleRecent(t0.Add(time.Duration(i) * RecentStep))
	}
	if got := m.Recent(t0.Add(65 * time.Second)); got.Span != 65*time.Second || got.Errors != 1 || got.P99 != 5*time.Millisecond {
		t.Errorf("a minute on: %+v, want the error over 65s", got)
	}
	m.Observe(OpCheck, OutcomeOK, time.Microsecond)
	m.SampleRecent(t0.Add(7 * RecentStep)) // t0 is now 70s before the newest: dropped
	want := Recent{Span: 65 * time.Second, Requests: 1, P99: time.Microsecond}
	if got := m.Recent(t0.Add(75 * time.Second)); got != want {
		t.Errorf("after the window slid: %+v, want %+v", got, want)
	}
	m.recent.mu.Lock()
	kept := len(m.recent.snaps)
	m.recent.mu.Unlock()
	if kept != int(RecentWindow/RecentStep)+1 {
		t.Errorf("%d snapshots kept, want %d", kept, RecentWindow/RecentStep+1)
	}
}

// TestRunRecentStops: the sampler snapshots at once and returns when its
// context ends.
func TestRunRecentStops(t *testing.T) {
	m := newTestSet(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.RunRecent(ctx)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for m.Recent(time.Now()).Span == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	m.recent.mu.Lock()
	defer m.recent.mu.Unlock()
	if len(m.recent.snaps) == 0 {
		t.Fatal("RunRecent took no snapshot at its start")
	}
}

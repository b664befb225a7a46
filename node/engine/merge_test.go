package engine_test

import (
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/node/engine"
)

// TestMergeKeepsWhatEitherCopyCounted: two copies of a viewer share a
// history, then each counts impressions the other never saw (an owner
// paused while an interim owner served). Merging either into the other
// ends with every impression counted once for sliding counters (their
// timestamps are the impressions), and with the larger count of each
// window or bucket for fixed and bucketed ones (counts carry no identity:
// two impressions in one bucket, one on each side, count once); merging
// again changes nothing.
func TestMergeKeepsWhatEitherCopyCounted(t *testing.T) {
	sliding := campaign("s", 20, 1000)
	fixed := fcap.Cap{Scope: "campaign", ID: "f", Limit: 20, Window: time.Second, Algorithm: fcap.Fixed}
	buckets := fcap.Cap{Scope: "campaign", ID: "b", Limit: 20, Window: time.Second, Algorithm: fcap.Buckets}
	all := []fcap.Cap{sliding, fixed, buckets}
	key := fcap.ViewerKey("v")

	a, b := newEngine(t), newEngine(t)
	for _, now := range []int64{100, 200, 200} { // shared history, a duplicate time included
		mustAllow(t, a, "v", now, true, all...)
		mustAllow(t, b, "v", now, true, all...)
	}
	mustAllow(t, a, "v", 300, true, all...) // only a
	mustAllow(t, a, "v", 400, true, all...) // only a
	mustAllow(t, b, "v", 350, true, all...) // only b
	mustAllow(t, b, "v", 200, true, all...) // only b: a third impression at 200
	// a reservation and a remembered impression id only b holds
	if _, _, err := b.Reserve("v", fcap.Candidate{Caps: []fcap.Cap{sliding}}, 450, 500); err != nil {
		t.Fatal(err)
	}
	if st, err := b.Record("v", fcap.Impression{ID: "imp-b", Time: 460, Caps: []fcap.Cap{campaign("r", 5, 1000)}}); err != nil || st != fcap.Recorded {
		t.Fatalf("record: %v %v", st, err)
	}

	const want = 3 + 2 + 2 // shared, a's, b's
	merge := func(dst, src *engine.Engine) {
		t.Helper()
		if _, _, err := dst.MergeAll(src.Export(key, nil), nil); err != nil {
			t.Fatal(err)
		}
	}
	ba := newEngine(t)
	merge(ba, a) // a fresh node adopts a's copy
	merge(ba, b)
	merge(a, b)
	for name, e := range map[string]*engine.Engine{"a+b": a, "fresh+a+b": ba} {
		for _, x := range []struct {
			c    fcap.Cap
			want int64
		}{
			{sliding, want + 1}, // b's reservation holds one more
			{fixed, 5},          // max(a's 5, b's 5) in window 0
			{buckets, 6},        // per 100-tick bucket: 1, 3 (b), 1 (300 or 350), 1 (400)
		} {
			if got := x.c.Limit - checkOne(t, e, "v", 499, x.c).Remaining; got != x.want {
				t.Errorf("%s: %s counts %d, want %d", name, x.c.Algorithm, got, x.want)
			}
		}
		// b's impression id is remembered: recording it again is a duplicate.
		if st, err := e.Record("v", fcap.Impression{ID: "imp-b", Time: 470, Caps: []fcap.Cap{campaign("r", 5, 1000)}}); err != nil || st != fcap.Duplicate {
			t.Errorf("%s: re-recording imp-b: %v %v, want duplicate", name, st, err)
		}
	}
	// Idempotent: merging the same copy again counts nothing twice.
	merge(a, b)
	merge(a, a)
	if got := sliding.Limit - checkOne(t, a, "v", 499, sliding).Remaining; got != want+1 {
		t.Errorf("after merging again: %d, want %d", got, want+1)
	}
	// An absent state changes nothing when merged; ImportAll still replaces.
	empty := newEngine(t)
	merge(a, empty)
	if _, ok := a.Viewer("v"); !ok {
		t.Fatal("merging an absent state deleted the viewer")
	}
	if _, _, err := a.ImportAll(b.Export(key, nil), nil); err != nil {
		t.Fatal(err)
	}
	if got := sliding.Limit - checkOne(t, a, "v", 499, sliding).Remaining; got != 3+2+1 {
		t.Errorf("ImportAll replaced into %d, want b's %d (with its reservation)", got, 3+2+1)
	}
}

package engine_test

import (
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/node/engine"
)

// TestDigestSeesCountsNotLayout: copies of a viewer that count the same
// at a time have the same digest whatever order their impressions came
// in, whether one swept what expired, or came through Export and Import;
// a copy missing one impression, or holding one more, does not.
func TestDigestSeesCountsNotLayout(t *testing.T) {
	sliding := campaign("s", 10, 1000)
	fixed := fcap.Cap{Scope: "campaign", ID: "f", Limit: 10, Window: time.Second, Algorithm: fcap.Fixed}
	buckets := fcap.Cap{Scope: "campaign", ID: "b", Limit: 10, Window: time.Second, Algorithm: fcap.Buckets}
	short := campaign("short", 10, 50)
	all := []fcap.Cap{sliding, fixed, buckets, short}
	key := fcap.ViewerKey("v")
	record := func(e *engine.Engine, id string, at int64) {
		t.Helper()
		if _, err := e.Record("v", fcap.Impression{ID: id, Time: at, Caps: all}); err != nil {
			t.Fatal(err)
		}
	}
	times := []int64{1010, 1100, 1200, 1350, 1500}

	inOrder, reversed := newEngine(t), newEngine(t)
	for i, at := range times {
		record(inOrder, string(rune('a'+i)), at)
	}
	for i := len(times) - 1; i >= 0; i-- {
		record(reversed, string(rune('a'+i)), times[i])
	}
	const now = 1600 // "short" counts nothing any more; the rest count
	d1, n1 := inOrder.Digest(key, now)
	d2, n2 := reversed.Digest(key, now)
	if d1 == 0 || n1 != 3 {
		t.Fatalf("digest %x over %d counters, want non-zero over 3 (short expired)", d1, n1)
	}
	if d1 != d2 || n1 != n2 {
		t.Errorf("same impressions in another order: %x/%d vs %x/%d", d1, n1, d2, n2)
	}

	// Swept: the expired short counter is gone from one copy only.
	reversed.Sweep(1 << 20)
	if d, _ := reversed.Digest(key, now); d != d1 {
		t.Errorf("after a sweep: %x, want %x", d, d1)
	}

	// Exported and imported.
	copyOf := newEngine(t)
	if _, _, err := copyOf.Import(inOrder.Export(key, nil)); err != nil {
		t.Fatal(err)
	}
	if d, _ := copyOf.Digest(key, now); d != d1 {
		t.Errorf("imported copy: %x, want %x", d, d1)
	}

	// One impression more, or one fewer, shows.
	more := newEngine(t)
	for i, at := range append(times, 1550) {
		record(more, string(rune('a'+i)), at)
	}
	if d, _ := more.Digest(key, now); d == d1 {
		t.Error("a copy with one impression more has the same digest")
	}
	fewer := newEngine(t)
	for i, at := range times[1:] {
		record(fewer, string(rune('b'+i)), at)
	}
	if d, _ := fewer.Digest(key, now); d == d1 {
		t.Error("a copy with one impression fewer has the same digest")
	}

	// Nothing counting: digest 0, like a viewer never seen.
	if d, n := inOrder.Digest(key, 100_000); d != 0 || n != 0 {
		t.Errorf("long after every window: %x over %d counters, want 0", d, n)
	}
	if d, _ := inOrder.Digest(fcap.ViewerKey("nobody"), now); d != 0 {
		t.Errorf("unknown viewer: %x, want 0", d)
	}

	// Folding viewers into a partition digest does not depend on order.
	x, y := uint64(0x1234), uint64(0x9876)
	if engine.CombineDigests(engine.CombineDigests(0, x), y) != engine.CombineDigests(engine.CombineDigests(0, y), x) {
		t.Error("CombineDigests depends on order")
	}
	if engine.CombineDigests(7, 0) != 7 {
		t.Error("a viewer counting nothing changed the partition digest")
	}
}

// TestStatsCountImpressionsAndReservations: after a full sweeper pass,
// Stats reports the impressions and reservations held.
func TestStatsCountImpressionsAndReservations(t *testing.T) {
	e := newEngine(t)
	sliding := campaign("s", 10, 100_000)
	fixed := fcap.Cap{Scope: "campaign", ID: "f", Limit: 10, Window: 100 * time.Second, Algorithm: fcap.Fixed}
	buckets := fcap.Cap{Scope: "campaign", ID: "b", Limit: 10, Window: 100 * time.Second, Algorithm: fcap.Buckets}
	for i := range 5 {
		mustAllow(t, e, "a", int64(1000+i), true, sliding)
	}
	for i := range 3 {
		mustAllow(t, e, "b", int64(1000+i), true, fixed, buckets)
	}
	for i := range 2 {
		if _, _, err := e.Reserve("c", fcap.Candidate{Caps: []fcap.Cap{sliding}}, int64(1100+i), 60_000); err != nil {
			t.Fatal(err)
		}
	}
	if st := e.Stats(); st.Impressions != 0 || st.Reservations != 0 {
		t.Fatalf("before any sweep: %+v, want 0 (not counted yet)", st)
	}
	e.Sweep(1 << 20)
	if st := e.Stats(); st.Impressions != 5+3+3 || st.Reservations != 2 {
		t.Fatalf("after a full pass: %d impressions, %d reservations; want 11 and 2", st.Impressions, st.Reservations)
	}
}

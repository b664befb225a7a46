package engine_test

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/node/engine"
)

// regionEngines are one engine per region, each knowing the others as
// peer regions (as startRegions registers them).
func regionEngines(t *testing.T, names ...string) map[string]*engine.Engine {
	t.Helper()
	out := map[string]*engine.Engine{}
	for _, n := range names {
		e := newEngine(t)
		for _, p := range names {
			if p != n {
				mustAddRegion(t, e, p)
			}
		}
		out[n] = e
	}
	return out
}

// ship merges what region from ships of viewer (its own counters) into
// region to's lane of from, as a RegionMerge does.
func ship(t *testing.T, es map[string]*engine.Engine, from, to, viewer string) {
	t.Helper()
	state := es[from].ExportLocal(fcap.ViewerKey(viewer), nil)
	if _, _, err := es[to].MergeRegionAll(state, from, nil); err != nil {
		t.Fatalf("merging %s's state into %s: %v", from, to, err)
	}
}

// meshAll ships viewer from every region to every other, in the order
// of their names.
func meshAll(t *testing.T, es map[string]*engine.Engine, viewer string) {
	t.Helper()
	names := slices.Sorted(maps.Keys(es))
	for _, from := range names {
		for _, to := range names {
			if from != to {
				ship(t, es, from, to, viewer)
			}
		}
	}
}

// used is how many impressions c counts for viewer at now.
func used(t *testing.T, e *engine.Engine, viewer string, now int64, c fcap.Cap) int64 {
	t.Helper()
	return c.Limit - checkOne(t, e, viewer, now, c).Remaining
}

// TestLanesCountDisjointHistories: one impression of a viewer in each of
// three regions at the same millisecond, distinct ids, on a sliding, a
// fixed and a bucketed cap. Once every region has every other's state,
// each counts 3 on every cap (the copy merge counted 1: it takes two
// equal timestamps, or counts in one window, for one impression), and
// re-shipping, in any order, changes nothing. At a limit of 3 an Allow
// is then refused in every region.
func TestLanesCountDisjointHistories(t *testing.T) {
	sliding := campaign("s", 3, 1000)
	fixed := fcap.Cap{Scope: "campaign", ID: "f", Limit: 3, Window: time.Second, Algorithm: fcap.Fixed}
	buckets := fcap.Cap{Scope: "campaign", ID: "b", Limit: 3, Window: time.Second, Algorithm: fcap.Buckets}
	caps := []fcap.Cap{sliding, fixed, buckets}
	es := regionEngines(t, "a", "b", "c")
	for r, e := range es {
		mustRecord(t, e, "v", fcap.Impression{ID: "imp-" + r, Time: 100, Caps: caps}, fcap.Recorded)
	}
	meshAll(t, es, "v")
	meshAll(t, es, "v") // again: idempotent
	ship(t, es, "c", "a", "v")
	for r, e := range es {
		for _, c := range caps {
			if got := used(t, e, "v", 200, c); got != 3 {
				t.Errorf("region %s counts %d on its %s cap, want 3 (one impression per region)", r, got, c.Algorithm)
			}
		}
		mustAllow(t, e, "v", 200, false, sliding)
	}
}

// TestLanesAreNotShippedOn: what a region ships is its own counters,
// never the lanes it holds. Region a hears only from c, which holds b's
// lane: a counts its own impression and c's, not b's.
func TestLanesAreNotShippedOn(t *testing.T) {
	c := campaign("s", 10, 1000)
	es := regionEngines(t, "a", "b", "c")
	for r, e := range es {
		mustRecord(t, e, "v", fcap.Impression{ID: "imp-" + r, Time: 100, Caps: []fcap.Cap{c}}, fcap.Recorded)
	}
	ship(t, es, "b", "c", "v")
	if got := used(t, es["c"], "v", 200, c); got != 2 {
		t.Fatalf("c counts %d after b's state, want 2", got)
	}
	ship(t, es, "c", "a", "v")
	if got := used(t, es["a"], "v", 200, c); got != 2 {
		t.Fatalf("a counts %d after c's state, want 2 (its own and c's: c passed b's lane on)", got)
	}
	// What c ships holds no lane: imported as is, it is c's counter alone.
	shipped := newEngine(t)
	if _, _, err := shipped.ImportAll(es["c"].ExportLocal(fcap.ViewerKey("v"), nil), nil); err != nil {
		t.Fatal(err)
	}
	if n, lanes := counters(t, shipped, "v"); n != 1 || lanes != 0 {
		t.Fatalf("c's shipped state holds %d counters, %d of them lanes; want its own 1", n, lanes)
	}
	// A lane in a shipped state (a sender that passes one on) is ignored.
	full := es["c"].Export(fcap.ViewerKey("v"), nil)
	if _, _, err := es["a"].MergeRegionAll(full, "c", nil); err != nil {
		t.Fatal(err)
	}
	if got := used(t, es["a"], "v", 200, c); got != 2 {
		t.Fatalf("a counts %d after c's whole state, lanes included, want 2", got)
	}
	if n, lanes := counters(t, es["a"], "v"); n != 2 || lanes != 1 {
		t.Fatalf("a holds %d counters, %d of them lanes, after c's whole state; want 2 and 1 (c's lane of b was taken in)", n, lanes)
	}
}

// counters counts the counters a viewer holds, and the lanes among them.
func counters(t *testing.T, e *engine.Engine, viewer string) (n, lanes int) {
	t.Helper()
	st, _ := e.Viewer(viewer)
	for _, k := range st.Keys {
		if k.Lane {
			lanes++
		}
	}
	return len(st.Keys), lanes
}

// TestLanesTravelLikeCounters: a viewer's lanes go wherever its state
// goes inside the region: a replica's Import (replication, a snapshot,
// a partition move) and MergeAll (a merge with an older copy) count them
// as the owner does, with the same digest; an older copy merged in does
// not make a lane count twice.
func TestLanesTravelLikeCounters(t *testing.T) {
	c := campaign("s", 10, 1000)
	es := regionEngines(t, "a", "b", "c")
	for r, e := range es {
		mustRecord(t, e, "v", fcap.Impression{ID: "imp-" + r, Time: 100, Caps: []fcap.Cap{c}}, fcap.Recorded)
	}
	key := fcap.ViewerKey("v")
	ship(t, es, "b", "a", "v")
	older := es["a"].Export(key, nil) // a with b's lane only
	ship(t, es, "c", "a", "v")
	owner := es["a"]
	state := owner.Export(key, nil)

	replica := newEngine(t)
	mustAddRegion(t, replica, "b")
	mustAddRegion(t, replica, "c")
	if _, _, err := replica.ImportAll(older, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := replica.MergeAll(state, nil); err != nil {
		t.Fatal(err)
	}
	if got := used(t, replica, "v", 200, c); got != 3 {
		t.Errorf("a's replica counts %d, want the owner's 3", got)
	}
	od, on := owner.Digest(key, 200)
	rd, rn := replica.Digest(key, 200)
	if od != rd || on != rn || on != 3 {
		t.Errorf("digests: owner %x over %d counters, replica %x over %d, want equal over 3 (the counter and two lanes)", od, on, rd, rn)
	}
	if n, lanes := counters(t, replica, "v"); n != 3 || lanes != 2 {
		t.Errorf("replica holds %d counters, %d of them lanes; want 3 and 2", n, lanes)
	}
}

// TestLanesErase: an erasure, made here or shipped by another region,
// drops every lane with the viewer's own counters; what a region ships
// afterwards that predates the erasure does not bring a lane back.
func TestLanesErase(t *testing.T) {
	c := campaign("s", 10, 1000)
	for _, where := range []string{"here", "shipped"} {
		es := regionEngines(t, "a", "b")
		for r, e := range es {
			mustRecord(t, e, "v", fcap.Impression{ID: "imp-" + r, Time: 100, Caps: []fcap.Cap{c}}, fcap.Recorded)
		}
		meshAll(t, es, "v")
		before := es["b"].ExportLocal(fcap.ViewerKey("v"), nil) // b's state before any erasure
		if where == "here" {
			if _, _, err := es["a"].Erase("v", 150); err != nil {
				t.Fatal(err)
			}
		} else {
			if _, _, err := es["b"].Erase("v", 150); err != nil {
				t.Fatal(err)
			}
			ship(t, es, "b", "a", "v")
		}
		if got := used(t, es["a"], "v", 200, c); got != 0 {
			t.Errorf("%s: a counts %d after the erasure, want 0", where, got)
		}
		if _, _, err := es["a"].MergeRegionAll(before, "b", nil); err != nil {
			t.Fatal(err)
		}
		if got := used(t, es["a"], "v", 200, c); got != 0 {
			t.Errorf("%s: a counts %d after b's older state, want 0", where, got)
		}
		if st, ok := es["a"].Viewer("v"); ok && len(st.Keys) > 0 {
			t.Errorf("%s: a still holds %d counters after the erasure", where, len(st.Keys))
		}
	}
}

// TestLanesVoid: a voided impression leaves the lane of its origin, in
// every region, whichever region the Void was sent to, and nothing else
// leaves: b's own impression and a's other one at the same millisecond
// still count. Re-shipping changes nothing.
func TestLanesVoid(t *testing.T) {
	c := campaign("s", 10, 1000)
	imp := func(id string) fcap.Impression {
		return fcap.Impression{ID: id, Time: 100, Caps: []fcap.Cap{c}}
	}
	for _, voidIn := range []string{"a", "b"} {
		es := regionEngines(t, "a", "b")
		mustRecord(t, es["a"], "v", imp("x"), fcap.Recorded)
		mustRecord(t, es["a"], "v", imp("y"), fcap.Recorded)
		mustRecord(t, es["b"], "v", imp("z"), fcap.Recorded)
		meshAll(t, es, "v")
		if got := used(t, es["b"], "v", 200, c); got != 3 {
			t.Fatalf("b counts %d before the void, want 3", got)
		}
		if _, err := es[voidIn].Void("v", imp("x")); err != nil {
			t.Fatal(err)
		}
		// a ships first: a state that still holds x (the void was made in
		// b and has not reached a) does not bring x back into b's lane.
		meshAll(t, es, "v")
		if got := used(t, es["b"], "v", 200, c); got != 2 {
			t.Errorf("void in %s: b counts %d after a's state, want 2 (y and z)", voidIn, got)
		}
		meshAll(t, es, "v") // the void in b has reached a; its state without x reaches b
		for r, e := range es {
			if got := used(t, e, "v", 200, c); got != 2 {
				t.Errorf("void in %s: %s counts %d, want 2 (y and z)", voidIn, r, got)
			}
		}
		meshAll(t, es, "v")
		if got := used(t, es["b"], "v", 200, c); got != 2 {
			t.Errorf("void in %s: b counts %d after re-shipping, want 2", voidIn, got)
		}
	}
}

// TestLanesOutsideTheKeyLimit: MaxKeysPerViewer bounds a viewer's own
// counters, not its lanes (each mirrors a region that bounds its own): a
// viewer with a peer's lanes still records on as many counters of its
// own, no more, and a replica takes its state with every lane.
func TestLanesOutsideTheKeyLimit(t *testing.T) {
	small := func(cfg *engine.Config) { cfg.MaxCapsPerCandidate, cfg.MaxKeysPerViewer = 1, 2 }
	a, b := newEngine(t, small), newEngine(t, small)
	mustAddRegion(t, a, "b")
	rec := func(e *engine.Engine, id string) error {
		_, err := e.Record("v", fcap.Impression{ID: id, Time: 100, Caps: []fcap.Cap{campaign(id, 5, 1000)}})
		return err
	}
	for _, id := range []string{"s1", "s2"} {
		if err := rec(b, id); err != nil {
			t.Fatal(err)
		}
	}
	es := map[string]*engine.Engine{"a": a, "b": b}
	ship(t, es, "b", "a", "v")
	for _, id := range []string{"s1", "s2"} {
		if err := rec(a, id); err != nil {
			t.Fatalf("a records on its counter %s beside b's lanes: %v", id, err)
		}
	}
	if err := rec(a, "s3"); !errors.Is(err, fcap.ErrTooManyKeys) {
		t.Fatalf("a's third counter of its own: %v, want ErrTooManyKeys", err)
	}
	replica := newEngine(t, small)
	mustAddRegion(t, replica, "b")
	if _, _, err := replica.ImportAll(a.Export(fcap.ViewerKey("v"), nil), nil); err != nil {
		t.Fatalf("a replica refuses a's state of 2 counters and 2 lanes: %v", err)
	}
	if got := used(t, replica, "v", 200, campaign("s1", 5, 1000)); got != 2 {
		t.Fatalf("the replica counts %d on s1, want 2 (a's and b's)", got)
	}
}

// TestLanesFollowALinkedDevice: a device's lane of another region goes
// with the device's impressions to the viewer it is linked to, and
// counts there as that region's: once, beside the viewer's own
// impression at the same millisecond.
func TestLanesFollowALinkedDevice(t *testing.T) {
	c := campaign("s", 10, 1000)
	es := regionEngines(t, "a", "b")
	mustRecord(t, es["b"], "d", fcap.Impression{ID: "on-d", Time: 100, Caps: []fcap.Cap{c}}, fcap.Recorded)
	mustRecord(t, es["a"], "v", fcap.Impression{ID: "on-v", Time: 100, Caps: []fcap.Cap{c}}, fcap.Recorded)
	ship(t, es, "b", "a", "d")
	a := es["a"]
	state, err := a.LinkDevice("d", "v", 150, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.AddDevice("v", "d", 150, state, 10); err != nil {
		t.Fatal(err)
	}
	if got := used(t, a, "v", 200, c); got != 2 {
		t.Fatalf("a counts %d for v after linking d, want 2 (v's own and d's in b)", got)
	}
	if _, lanes := counters(t, a, "v"); lanes != 1 {
		t.Fatalf("v holds %d lanes after linking d, want b's 1", lanes)
	}
}

func mustAddRegion(t *testing.T, e *engine.Engine, region string) {
	t.Helper()
	if err := e.AddRegion(region); err != nil {
		t.Fatal(err)
	}
}

// TestLanesRegionsBounded: a node counts the lanes of at most 64
// regions; a merge from one more is refused, changing nothing, and the
// regions it knows still count.
func TestLanesRegionsBounded(t *testing.T) {
	c := campaign("s", 100, 1000)
	e, peer := newEngine(t), newEngine(t)
	mustRecord(t, peer, "v", fcap.Impression{ID: "p", Time: 100, Caps: []fcap.Cap{c}}, fcap.Recorded)
	state := peer.ExportLocal(fcap.ViewerKey("v"), nil)
	for i := range 64 {
		if _, _, err := e.MergeRegionAll(state, fmt.Sprintf("r%d", i), nil); err != nil {
			t.Fatalf("region %d: %v", i, err)
		}
	}
	if _, _, err := e.MergeRegionAll(state, "r64", nil); !errors.Is(err, engine.ErrTooManyRegions) {
		t.Fatalf("a 65th region: %v, want ErrTooManyRegions", err)
	}
	if err := e.AddRegion("r0"); err != nil {
		t.Fatalf("adding a known region again: %v", err)
	}
	if got := used(t, e, "v", 200, c); got != 64 {
		t.Fatalf("counts %d, want the 64 regions' one each", got)
	}
}

// TestLanesConcurrentMerges: merges from several regions, new to the
// engine, race with checks and records of the same viewer (run with
// -race): every impression counts once in the end.
func TestLanesConcurrentMerges(t *testing.T) {
	c := campaign("s", 1000, 100_000)
	e := newEngine(t)
	regions := []string{"a", "b", "c", "d"}
	states := map[string][]byte{}
	for _, r := range regions {
		p := newEngine(t)
		for i := range 5 {
			mustRecord(t, p, "v", fcap.Impression{ID: fmt.Sprintf("%s-%d", r, i), Time: 100, Caps: []fcap.Cap{c}}, fcap.Recorded)
		}
		states[r] = p.ExportLocal(fcap.ViewerKey("v"), nil)
	}
	var wg sync.WaitGroup
	for _, r := range regions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				if _, _, err := e.MergeRegionAll(states[r], r, nil); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range 20 {
			if _, err := e.Record("v", fcap.Impression{ID: fmt.Sprintf("here-%d", i), Time: 100, Caps: []fcap.Cap{c}}); err != nil {
				t.Error(err)
				return
			}
			if _, err := e.Check("v", []fcap.Candidate{{Caps: []fcap.Cap{c}}}, 200, nil); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	wg.Wait()
	if got := used(t, e, "v", 200, c); got != 20+5*int64(len(regions)) {
		t.Fatalf("counts %d, want %d", got, 20+5*len(regions))
	}
}

// TestLanesStrictCapsReadTheirOwn: a strict counter that rode along with
// a soft change into another region's lane is not read by strict caps
// there (each region grants a strict cap from its own share), while a
// soft cap on the same counter key counts it.
func TestLanesStrictCapsReadTheirOwn(t *testing.T) {
	soft := campaign("s", 3, 1000)
	strict := soft
	strict.Mode = fcap.Strict
	es := regionEngines(t, "a", "b")
	mustAllow(t, es["a"], "v", 100, true, strict)
	mustAllow(t, es["a"], "v", 100, true, strict)
	mustAllow(t, es["b"], "v", 100, true, strict)
	ship(t, es, "a", "b", "v")
	if got := used(t, es["b"], "v", 200, strict); got != 1 {
		t.Errorf("b's strict cap counts %d, want its own 1", got)
	}
	if got := used(t, es["b"], "v", 200, soft); got != 3 {
		t.Errorf("b's soft cap on the same counter counts %d, want 3 (its own and a's lane)", got)
	}
	mustAllow(t, es["b"], "v", 200, true, strict)
}

// TestLanesBucketsOfAnotherSize: a region configured with other
// sub-buckets than this one ships a bucketed counter: its lane keeps the
// origin's buckets, so shipping it again counts nothing twice.
func TestLanesBucketsOfAnotherSize(t *testing.T) {
	c := fcap.Cap{Scope: "campaign", ID: "b", Limit: 20, Window: time.Second, Algorithm: fcap.Buckets}
	a := newEngine(t, func(cfg *engine.Config) { cfg.Buckets = 10 })
	b := newEngine(t, func(cfg *engine.Config) { cfg.Buckets = 4 })
	mustAddRegion(t, b, "a")
	for _, at := range []int64{100, 400, 700} {
		mustAllow(t, a, "v", at, true, c)
	}
	mustAllow(t, b, "v", 700, true, c)
	es := map[string]*engine.Engine{"a": a, "b": b}
	for range 3 {
		ship(t, es, "a", "b", "v")
	}
	if got := used(t, b, "v", 800, c); got != 4 {
		t.Fatalf("b counts %d after a's state shipped three times, want 4 (a's 3 and its own)", got)
	}
}

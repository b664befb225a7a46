package engine_test

import (
	"slices"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/node/engine"
)

// localDigest is region e's LocalDigest of viewer and the cap keys it
// covers, sorted.
func localDigest(e *engine.Engine, viewer string, now int64) (uint64, []uint64) {
	var keys []uint64
	d := e.LocalDigest(fcap.ViewerKey(viewer), now, func(kh uint64) { keys = append(keys, kh) })
	slices.Sort(keys)
	return d, keys
}

// laneDigest is e's LaneDigest of origin's lane of viewer, over keys.
func laneDigest(e *engine.Engine, viewer, origin string, now int64, keys []uint64) uint64 {
	return e.LaneDigest(fcap.ViewerKey(viewer), origin, now, func(kh uint64) bool {
		_, ok := slices.BinarySearch(keys, kh)
		return ok
	})
}

// TestLaneDigestMatchesTheOrigin: a region's lane of another region's
// counters digests as that region's own counters do once it merged
// them, on sliding, fixed and bucketed caps, whatever lanes of third
// regions and counters of its own the viewer holds; before the merge,
// or after the origin counted more, they differ.
func TestLaneDigestMatchesTheOrigin(t *testing.T) {
	sliding := campaign("s", 5, 1000)
	fixed := fcap.Cap{Scope: "campaign", ID: "f", Limit: 5, Window: time.Second, Algorithm: fcap.Fixed}
	buckets := fcap.Cap{Scope: "campaign", ID: "b", Limit: 5, Window: time.Second, Algorithm: fcap.Buckets}
	caps := []fcap.Cap{sliding, fixed, buckets}
	es := regionEngines(t, "a", "b", "c")
	for i, r := range []string{"a", "b", "c"} {
		mustRecord(t, es[r], "v", fcap.Impression{ID: "imp-" + r, Time: int64(100 + i), Caps: caps}, fcap.Recorded)
	}
	mustRecord(t, es["a"], "v", fcap.Impression{ID: "imp-a2", Time: 120, Caps: []fcap.Cap{campaign("only-a", 5, 1000)}}, fcap.Recorded)
	da, ka := localDigest(es["a"], "v", 200)
	if da == 0 || len(ka) != 4 {
		t.Fatalf("a's local digest %x over %d counters, want one over 4", da, len(ka))
	}
	if d := laneDigest(es["b"], "v", "a", 200, ka); d != 0 {
		t.Fatalf("b digests a lane of a it never merged: %x", d)
	}
	meshAll(t, es, "v")
	for _, r := range []string{"b", "c"} {
		if d := laneDigest(es[r], "v", "a", 200, ka); d != da {
			t.Errorf("%s's lane of a digests %x, a's own counters %x", r, d, da)
		}
	}
	dc, kc := localDigest(es["c"], "v", 200)
	if d := laneDigest(es["b"], "v", "c", 200, kc); d != dc || dc == da {
		t.Errorf("b's lane of c digests %x, c's own %x (a's %x)", d, dc, da)
	}
	// a counts more: b's lane differs until a ships again.
	mustRecord(t, es["a"], "v", fcap.Impression{ID: "imp-a3", Time: 150, Caps: caps}, fcap.Recorded)
	da2, ka2 := localDigest(es["a"], "v", 200)
	if d := laneDigest(es["b"], "v", "a", 200, ka2); d == da2 {
		t.Error("b's lane of a agrees with a's counters it has not merged")
	}
	ship(t, es, "a", "b", "v")
	if d := laneDigest(es["b"], "v", "a", 200, ka2); d != da2 {
		t.Errorf("after the ship b's lane of a digests %x, a's own %x", d, da2)
	}
	// Once everything aged out, both count nothing.
	if d, _ := localDigest(es["a"], "v", 5000); d != 0 {
		t.Errorf("a's digest %x after every window passed", d)
	}
	if d := laneDigest(es["b"], "v", "a", 5000, ka2); d != 0 {
		t.Errorf("b's lane of a digests %x after every window passed", d)
	}
}

// TestDigestShipsAnIdentityLink: a device with no impressions of its own
// that region a linked digests apart from region b's copy until b merged
// a's state, and alike after; an unlink b makes differs again until a
// merged it. Without identity in the digests both sides digested 0, so a
// link whose queued shipment was lost to an overflow was never shipped
// again.
func TestDigestShipsAnIdentityLink(t *testing.T) {
	es := regionEngines(t, "a", "b")
	if _, err := es["a"].LinkDevice("phone", "v", 100, nil); err != nil {
		t.Fatal(err)
	}
	da, ka := localDigest(es["a"], "phone", 200)
	if da == 0 || len(ka) != 0 {
		t.Fatalf("a's digest of a linked device: %x over %d counters, want one over none", da, len(ka))
	}
	if d := laneDigest(es["b"], "phone", "a", 200, ka); d == da {
		t.Fatal("b, which never merged the link, digests the device as a does")
	}
	ship(t, es, "a", "b", "phone")
	if d := laneDigest(es["b"], "phone", "a", 200, ka); d != da {
		t.Fatalf("after the ship b digests the device %x, a %x", d, da)
	}
	if _, err := es["b"].UnlinkDevice("phone", 300); err != nil {
		t.Fatal(err)
	}
	db, kb := localDigest(es["b"], "phone", 400)
	if d := laneDigest(es["a"], "phone", "b", 400, kb); d == db {
		t.Fatal("a digests the device as b does before merging b's unlink")
	}
	ship(t, es, "b", "a", "phone")
	if d := laneDigest(es["a"], "phone", "b", 400, kb); d != db {
		t.Fatalf("after the ship a digests the device %x, b %x", d, db)
	}
}

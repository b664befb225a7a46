package engine_test

import (
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/node/engine"
)

// eraseCaps are one cap of each algorithm.
func eraseCaps() []fcap.Cap {
	return []fcap.Cap{
		campaign("s", 20, 1000),
		{Scope: "campaign", ID: "f", Limit: 20, Window: time.Second, Algorithm: fcap.Fixed},
		{Scope: "campaign", ID: "b", Limit: 20, Window: time.Second, Algorithm: fcap.Buckets},
	}
}

// fullRoom fails unless every cap of caps has its whole limit left for
// viewer at now.
func fullRoom(t *testing.T, e *engine.Engine, viewer string, now int64, caps []fcap.Cap) {
	t.Helper()
	for _, c := range caps {
		if vd := checkOne(t, e, viewer, now, c); vd.Remaining != c.Limit {
			t.Errorf("%s: %d left at %d, want the full %d", c.ID, vd.Remaining, now, c.Limit)
		}
	}
}

// TestEraseThenMergeAnOlderCopy: a replica that missed the erasure pushes
// its copy (counters, ids, a reservation) to the erased owner, and the
// owner's tombstone pushes to it: neither brings anything of the viewer
// back, and what either counted after the erasure stays.
func TestEraseThenMergeAnOlderCopy(t *testing.T) {
	caps := eraseCaps()
	key := fcap.ViewerKey("v")
	owner, replica := newEngine(t), newEngine(t)
	for _, e := range []*engine.Engine{owner, replica} {
		for i, now := range []int64{100, 200, 300} {
			mustRecord(t, e, "v", fcap.Impression{ID: string(rune('a' + i)), Time: now, Caps: caps}, fcap.Recorded)
		}
		if _, _, err := e.Reserve("v", fcap.Candidate{Caps: caps[:1]}, 300, 5000); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := owner.Erase("v", 1500); err != nil {
		t.Fatal(err)
	}
	fullRoom(t, owner, "v", 1600, caps)

	old := replica.Export(key, nil)
	if _, _, err := owner.MergeAll(old, nil); err != nil {
		t.Fatal(err)
	}
	fullRoom(t, owner, "v", 1600, caps)
	// The id "a" was forgotten with the rest: recording it again after
	// the erasure counts.
	mustRecord(t, owner, "v", fcap.Impression{ID: "a", Time: 2100, Caps: caps}, fcap.Recorded)

	// The tombstone (and what came after it) reaches the replica.
	if _, _, err := replica.MergeAll(owner.Export(key, nil), nil); err != nil {
		t.Fatal(err)
	}
	for name, e := range map[string]*engine.Engine{"owner": owner, "replica": replica} {
		for _, c := range caps {
			if vd := checkOne(t, e, "v", 2100, c); vd.Remaining != c.Limit-1 {
				t.Errorf("%s %s: %d left, want %d (only the impression after the erasure)", name, c.ID, vd.Remaining, c.Limit-1)
			}
		}
		if at := e.ErasedAt("v"); at != 1500 {
			t.Errorf("%s: erased at %d, want 1500", name, at)
		}
	}
	// Merging the old copy again, either way, changes nothing.
	if _, _, err := replica.MergeAll(old, nil); err != nil {
		t.Fatal(err)
	}
	if vd := checkOne(t, replica, "v", 2100, caps[0]); vd.Remaining != caps[0].Limit-1 {
		t.Errorf("replica after the old copy again: %d left", vd.Remaining)
	}
}

// TestEraseRefusesOldImpressions: a Record of an impression dated at or
// before the erasure (a late retry, a stand-in's copy) does not count.
func TestEraseRefusesOldImpressions(t *testing.T) {
	caps := eraseCaps()
	e := newEngine(t)
	mustRecord(t, e, "v", fcap.Impression{ID: "x", Time: 100, Caps: caps}, fcap.Recorded)
	if _, _, err := e.Erase("v", 500); err != nil {
		t.Fatal(err)
	}
	mustRecord(t, e, "v", fcap.Impression{ID: "x", Time: 100, Caps: caps}, fcap.Stale)
	mustRecord(t, e, "v", fcap.Impression{ID: "y", Time: 500, Caps: caps}, fcap.Stale)
	fullRoom(t, e, "v", 600, caps)
	mustRecord(t, e, "v", fcap.Impression{ID: "z", Time: 501, Caps: caps}, fcap.Recorded)
	if vd := checkOne(t, e, "v", 600, caps[0]); vd.Remaining != caps[0].Limit-1 {
		t.Errorf("after a later impression: %d left, want %d", vd.Remaining, caps[0].Limit-1)
	}
}

// TestEraseTombstoneSurvivesExportAndExpires: the tombstone is exported
// (not as "absent"), imported as is, and swept once EraseRetention old;
// until then an import or merge of an older copy cannot revive the
// viewer.
func TestEraseTombstoneSurvivesExportAndExpires(t *testing.T) {
	caps := eraseCaps()
	key := fcap.ViewerKey("v")
	e := newEngine(t)
	mustRecord(t, e, "v", fcap.Impression{ID: "x", Time: 100, Caps: caps}, fcap.Recorded)
	old := e.Export(key, nil)
	if _, _, err := e.Erase("v", 200); err != nil {
		t.Fatal(err)
	}
	state := e.Export(key, nil)

	restored := newEngine(t) // a replay: a snapshot's state imported
	if _, _, err := restored.Import(state); err != nil {
		t.Fatal(err)
	}
	if at := restored.ErasedAt("v"); at != 200 {
		t.Fatalf("imported erasure at %d, want 200", at)
	}
	if _, _, err := restored.MergeAll(old, nil); err != nil {
		t.Fatal(err)
	}
	fullRoom(t, restored, "v", 300, caps)

	// Swept before its retention ends, the tombstone stays.
	sweepAll(restored, 200+engine.EraseRetention-1)
	if at := restored.ErasedAt("v"); at != 200 {
		t.Fatalf("tombstone gone before its retention: erased at %d", at)
	}
	sweepAll(restored, 201+engine.EraseRetention)
	if at := restored.ErasedAt("v"); at != 0 {
		t.Fatalf("tombstone kept past its retention")
	}
	if st := restored.Stats(); st.Viewers != 0 {
		t.Errorf("%d viewers held after the tombstone expired, want 0", st.Viewers)
	}
}

// TestEraseDropsIdentity: an erased viewer's device list is dropped and
// its live devices reported for the caller to unlink; an erased device
// reports the viewer it was linked to.
func TestEraseDropsIdentity(t *testing.T) {
	e := newEngine(t)
	st, err := e.LinkDevice("phone", "v", 100, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.AddDevice("v", "phone", 100, st, 10); err != nil {
		t.Fatal(err)
	}
	devices, _, err := e.Erase("v", 200)
	if err != nil {
		t.Fatal(err)
	}
	if len(devices) != 1 || devices[0] != "phone" {
		t.Errorf("devices = %q, want [phone]", devices)
	}
	if d, _ := e.Devices("v"); len(d) != 0 {
		t.Errorf("erased viewer still lists %q", d)
	}
	_, linked, err := e.Erase("phone", 300)
	if err != nil || linked != "v" {
		t.Errorf("erase a linked device: linked to %q, %v; want v", linked, err)
	}
	if _, _, err := e.Erase("", 300); err == nil {
		t.Error("erase of an empty viewer id accepted")
	}
	for _, at := range []int64{-1, 0} {
		if _, _, err := e.Erase("w", at); err == nil {
			t.Errorf("erase at %d accepted", at)
		}
	}
}

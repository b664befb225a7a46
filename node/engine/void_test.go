package engine_test

import (
	"errors"
	"testing"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/node/engine"
)

// left fails unless every cap of caps has want left for viewer at now.
func left(t *testing.T, name string, e *engine.Engine, viewer string, now int64, caps []fcap.Cap, want int64) {
	t.Helper()
	for _, c := range caps {
		if vd := checkOne(t, e, viewer, now, c); vd.Remaining != c.Limit-want {
			t.Errorf("%s %s: %d left at %d, want %d (%d counted)", name, c.ID, vd.Remaining, now, c.Limit-want, want)
		}
	}
}

func mustVoid(t *testing.T, e *engine.Engine, viewer string, imp fcap.Impression, want bool) {
	t.Helper()
	got, err := e.Void(viewer, imp)
	if err != nil {
		t.Fatalf("Void(%q, %s): %v", viewer, imp.ID, err)
	}
	if got != want {
		t.Fatalf("Void(%q, %s) = %v, want %v", viewer, imp.ID, got, want)
	}
}

// TestVoidRefundsEveryCap: a voided impression stops counting in every
// cap of every algorithm it was recorded on, other impressions stay, a
// second Void changes nothing and answers the same, and a late Record of
// the id (a retry) counts nothing.
func TestVoidRefundsEveryCap(t *testing.T) {
	caps := eraseCaps()
	e := newEngine(t)
	bad := fcap.Impression{ID: "bot", Time: 200, Caps: caps}
	mustRecord(t, e, "v", fcap.Impression{ID: "ok", Time: 100, Caps: caps}, fcap.Recorded)
	mustRecord(t, e, "v", bad, fcap.Recorded)
	left(t, "before", e, "v", 300, caps, 2)

	mustVoid(t, e, "v", bad, true)
	left(t, "voided", e, "v", 300, caps, 1)
	mustVoid(t, e, "v", bad, true) // idempotent: nothing more taken
	left(t, "voided twice", e, "v", 300, caps, 1)
	mustRecord(t, e, "v", bad, fcap.Duplicate)
	left(t, "re-recorded", e, "v", 300, caps, 1)
	if !e.Voided("v", "bot") || e.Voided("v", "ok") {
		t.Error("Voided does not name the voided impression alone")
	}
}

// TestVoidUnknownID: voiding an id the viewer never recorded takes
// nothing (false) and bars the id, so a Record still on its way does not
// count.
func TestVoidUnknownID(t *testing.T) {
	caps := eraseCaps()
	e := newEngine(t)
	mustRecord(t, e, "v", fcap.Impression{ID: "ok", Time: 100, Caps: caps}, fcap.Recorded)
	late := fcap.Impression{ID: "late", Time: 150, Caps: caps}
	mustVoid(t, e, "v", late, false)
	mustVoid(t, e, "v", late, false)
	mustVoid(t, e, "nobody", late, false)
	left(t, "unknown voided", e, "v", 300, caps, 1)
	mustRecord(t, e, "v", late, fcap.Duplicate)
	mustRecord(t, e, "nobody", late, fcap.Duplicate)
	left(t, "late record", e, "v", 300, caps, 1)
}

// TestVoidRefusesBadInput: a bad viewer, id, time or cap, or an
// impression named with other time or caps than it was recorded with,
// is refused and changes nothing.
func TestVoidRefusesBadInput(t *testing.T) {
	caps := eraseCaps()
	e := newEngine(t)
	mustRecord(t, e, "v", fcap.Impression{ID: "x", Time: 100, Caps: caps}, fcap.Recorded)
	for name, tc := range map[string]struct {
		viewer string
		imp    fcap.Impression
		want   error
	}{
		"empty viewer":  {"", fcap.Impression{ID: "x", Time: 100, Caps: caps}, fcap.ErrEmptyViewer},
		"empty id":      {"v", fcap.Impression{Time: 100, Caps: caps}, fcap.ErrEmptyImpressionID},
		"negative time": {"v", fcap.Impression{ID: "x", Time: -1, Caps: caps}, fcap.ErrBadTime},
		"no caps":       {"v", fcap.Impression{ID: "x", Time: 100}, fcap.ErrNoCaps},
		"bad cap":       {"v", fcap.Impression{ID: "x", Time: 100, Caps: []fcap.Cap{campaign("s", 0, 1000)}}, fcap.ErrBadLimit},
		"other time":    {"v", fcap.Impression{ID: "x", Time: 5000, Caps: caps}, fcap.ErrVoidMismatch},
		"other window":  {"v", fcap.Impression{ID: "x", Time: 100, Caps: []fcap.Cap{campaign("s", 20, 99999)}}, fcap.ErrVoidMismatch},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := e.Void(tc.viewer, tc.imp); !errors.Is(err, tc.want) || !errors.Is(err, fcap.ErrInvalid) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			left(t, "refused", e, "v", 300, caps, 1)
			if e.Voided("v", "x") {
				t.Fatal("a refused void left a mark")
			}
		})
	}
}

// TestVoidSurvivesMerge: a replica that still counts the voided
// impression merges with the owner that voided it, either way round, and
// neither counts it afterwards; what else either counted stays. A
// stand-in that recorded the impression after the owner voided it (the
// Record reached it late) gives it up on merge too.
func TestVoidSurvivesMerge(t *testing.T) {
	caps := eraseCaps()
	key := fcap.ViewerKey("v")
	bad := fcap.Impression{ID: "bot", Time: 200, Caps: caps}
	owner, replica, standIn := newEngine(t), newEngine(t), newEngine(t)
	for _, e := range []*engine.Engine{owner, replica} {
		mustRecord(t, e, "v", fcap.Impression{ID: "ok", Time: 100, Caps: caps}, fcap.Recorded)
		mustRecord(t, e, "v", bad, fcap.Recorded)
	}
	mustRecord(t, replica, "v", fcap.Impression{ID: "only-replica", Time: 250, Caps: caps[:1]}, fcap.Recorded)
	mustRecord(t, standIn, "v", bad, fcap.Recorded)
	mustVoid(t, owner, "v", bad, true)

	stale := replica.Export(key, nil)
	if _, _, err := owner.MergeAll(stale, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := owner.MergeAll(standIn.Export(key, nil), nil); err != nil {
		t.Fatal(err)
	}
	left(t, "owner", owner, "v", 300, caps[:1], 2) // ok + only-replica
	left(t, "owner", owner, "v", 300, caps[1:], 1)
	for name, e := range map[string]*engine.Engine{"replica": replica, "stand-in": standIn} {
		if _, _, err := e.MergeAll(owner.Export(key, nil), nil); err != nil {
			t.Fatal(err)
		}
		left(t, name, e, "v", 300, caps[1:], 1)
		if !e.Voided("v", "bot") {
			t.Errorf("%s: the void mark did not travel", name)
		}
	}
	left(t, "replica", replica, "v", 300, caps[:1], 2)
	// The stale copy again, and a late Record, change nothing.
	if _, _, err := replica.MergeAll(stale, nil); err != nil {
		t.Fatal(err)
	}
	mustRecord(t, replica, "v", bad, fcap.Duplicate)
	left(t, "replica after the stale copy again", replica, "v", 300, caps[1:], 1)
	d1, _ := owner.Digest(key, 300)
	d2, _ := replica.Digest(key, 300)
	if d1 != d2 {
		t.Errorf("owner and replica digests differ after converging: %x, %x", d1, d2)
	}
}

// TestVoidSurvivesReplayAndExpires: the mark is exported (a log record,
// a snapshot) and imported as is, so a replay that also holds an older
// state of the viewer does not count the impression again; the mark is
// swept once the impression could no longer count, and then the viewer
// is freed.
func TestVoidSurvivesReplayAndExpires(t *testing.T) {
	caps := eraseCaps()
	key := fcap.ViewerKey("v")
	bad := fcap.Impression{ID: "bot", Time: 200, Caps: caps}
	e := newEngine(t)
	mustRecord(t, e, "v", bad, fcap.Recorded)
	old := e.Export(key, nil)
	mustVoid(t, e, "v", bad, true)

	restored := newEngine(t)
	if _, _, err := restored.Import(e.Export(key, nil)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := restored.MergeAll(old, nil); err != nil {
		t.Fatal(err)
	}
	left(t, "replayed", restored, "v", 300, caps, 0)
	mustRecord(t, restored, "v", bad, fcap.Duplicate)

	sweepAll(restored, 200+1000-1)
	if !restored.Voided("v", "bot") {
		t.Fatal("mark swept while the impression could still count")
	}
	sweepAll(restored, 200+1000)
	if restored.Voided("v", "bot") {
		t.Fatal("mark kept past the impression's longest window")
	}
	sweepAll(restored, 200+1000+1000) // the remembered id is kept to the second
	if st := restored.Stats(); st.Viewers != 0 {
		t.Errorf("%d viewers held after the mark expired, want 0", st.Viewers)
	}
}

// TestVoidMarksBounded: a viewer keeps at most MaxDedupePerViewer marks,
// however many ids are voided.
func TestVoidMarksBounded(t *testing.T) {
	e := newEngine(t, func(c *engine.Config) { c.MaxDedupePerViewer = 8 })
	caps := []fcap.Cap{campaign("c", 5, 1_000_000)}
	for i := range 100 {
		mustVoid(t, e, "v", fcap.Impression{ID: string(rune('A' + i)), Time: int64(i), Caps: caps}, false)
	}
	st, _ := e.Viewer("v")
	if st.VoidedIDs != 8 {
		t.Errorf("%d marks held, want 8", st.VoidedIDs)
	}
	if !e.Voided("v", string(rune('A'+99))) {
		t.Error("the newest mark was forgotten, not the oldest")
	}
}

// TestVoidStateRefusedWhenBroken: a state carrying marks decodes
// whole and its marks are checked: a truncated or doubled one is refused.
func TestVoidStateRefusedWhenBroken(t *testing.T) {
	caps := eraseCaps()
	key := fcap.ViewerKey("v")
	e := newEngine(t)
	mustVoid(t, e, "v", fcap.Impression{ID: "a", Time: 10, Caps: caps}, false)
	state := e.Export(key, nil)
	for cut := 1; cut < len(state); cut++ {
		if _, _, err := newEngine(t).Import(state[:cut]); err == nil {
			t.Fatalf("a state cut at %d of %d bytes imported", cut, len(state))
		}
	}
	if _, ok := engine.StateKey(state); !ok {
		t.Fatal("StateKey does not read a state with marks")
	}
}

package engine_test

import (
	"errors"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/node/engine"
)

// TestRevoke: a revoked Allow gives its slot back on every counter it
// used, exactly once, whatever the algorithm.
func TestRevoke(t *testing.T) {
	for _, algo := range []fcap.Algorithm{fcap.Sliding, fcap.Fixed, fcap.Buckets} {
		t.Run(algo.String(), func(t *testing.T) {
			e := newEngine(t)
			c := fcap.Cap{Scope: "campaign", ID: "c", Limit: 3, Window: time.Second, Algorithm: algo, Mode: fcap.Strict}
			adv := fcap.Cap{Scope: "advertiser", ID: "a", Limit: 10, Window: 5 * time.Second, Algorithm: algo, Mode: fcap.Strict}
			for i := range 3 {
				mustAllow(t, e, "v", 100+int64(i), true, c, adv)
			}
			mustAllow(t, e, "v", 103, false, c, adv)

			removed, err := e.Revoke("v", 101, c, adv)
			if err != nil || !removed {
				t.Fatalf("Revoke = %v, %v; want true, nil", removed, err)
			}
			if got := checkOne(t, e, "v", 103, c, adv).Remaining; got != 1 {
				t.Fatalf("after one revoke %d left, want 1", got)
			}
			if got := checkOne(t, e, "v", 103, adv).Remaining; got != 8 {
				t.Fatalf("the other cap: %d left, want 8", got)
			}
			mustAllow(t, e, "v", 103, true, c, adv)
			mustAllow(t, e, "v", 104, false, c, adv)
		})
	}
}

// TestRevokeNothingToTake: Revoke never removes more than was granted at
// that time, nor anything from a viewer or counter that has none.
func TestRevokeNothingToTake(t *testing.T) {
	e := newEngine(t)
	c := campaign("c", 2, 1000)
	if removed, err := e.Revoke("nobody", 5, c); removed || err != nil {
		t.Fatalf("Revoke on an unknown viewer = %v, %v", removed, err)
	}
	mustAllow(t, e, "v", 10, true, c)
	mustAllow(t, e, "v", 20, true, c)
	if removed, _ := e.Revoke("v", 15, c); removed {
		t.Fatal("Revoke removed an impression at a time nothing was granted")
	}
	if removed, _ := e.Revoke("v", 10, campaign("other", 2, 1000)); removed {
		t.Fatal("Revoke removed from a counter the cap does not name")
	}
	if removed, _ := e.Revoke("v", 10, c); !removed {
		t.Fatal("Revoke did not remove the impression at 10")
	}
	if removed, _ := e.Revoke("v", 10, c); removed {
		t.Fatal("Revoke removed the impression at 10 twice")
	}
	if got := checkOne(t, e, "v", 20, c).Remaining; got != 1 {
		t.Fatalf("%d left, want 1 (the impression at 20 stays)", got)
	}
}

// TestRevokeRefusesBadInput: bad input changes nothing.
func TestRevokeRefusesBadInput(t *testing.T) {
	e := newEngine(t)
	c := campaign("c", 2, 1000)
	mustAllow(t, e, "v", 10, true, c)
	for _, tc := range []struct {
		viewer string
		now    int64
		caps   []fcap.Cap
	}{
		{"", 10, []fcap.Cap{c}},
		{"v", -1, []fcap.Cap{c}},
		{"v", 10, []fcap.Cap{{Scope: "campaign", ID: "c", Limit: 0, Window: time.Second}}},
	} {
		if _, err := e.Revoke(tc.viewer, tc.now, tc.caps...); !errors.Is(err, fcap.ErrInvalid) {
			t.Errorf("Revoke(%q, %d, %v): %v, want fcap.ErrInvalid", tc.viewer, tc.now, tc.caps, err)
		}
	}
	if got := checkOne(t, e, "v", 10, c).Remaining; got != 1 {
		t.Fatalf("%d left after refused revokes, want 1", got)
	}
}

// TestRevokeGrantReachesEveryCopy: a strict grant a backup applied before
// its owner took it back (the owner's wait for the backup ran out) is
// taken back on the backup too when the owner's copy reaches it, and
// merging the backup's older copy into the owner does not bring it back.
// A plain Revoke is undone by the merge (copies merge by union): the
// backup's count stays one over what any caller was told, whatever the
// algorithm.
func TestRevokeGrantReachesEveryCopy(t *testing.T) {
	for _, algo := range []fcap.Algorithm{fcap.Sliding, fcap.Fixed, fcap.Buckets} {
		t.Run(algo.String(), func(t *testing.T) {
			c := fcap.Cap{Scope: "campaign", ID: "c", Limit: 5, Window: time.Second, Algorithm: algo, Mode: fcap.Strict}
			adv := fcap.Cap{Scope: "advertiser", ID: "a", Limit: 10, Window: 5 * time.Second, Algorithm: algo, Mode: fcap.Strict}
			caps := []fcap.Cap{c, adv}
			key := fcap.ViewerKey("v")
			owner, backup := newEngine(t), newEngine(t)
			merge := func(dst, src *engine.Engine) {
				t.Helper()
				if _, _, err := dst.MergeAll(src.Export(key, nil), nil); err != nil {
					t.Fatal(err)
				}
			}
			mustAllow(t, owner, "v", 100, true, caps...) // acknowledged
			w := engine.Write{Grant: 0x9e3779b97f4a7c15}
			if vd, err := owner.AllowWrite(&w, "v", 200, caps); err != nil || !vd.Allowed {
				t.Fatalf("tagged Allow = %+v, %v", vd, err)
			}
			merge(backup, owner) // the backup applied both
			stale := backup.Export(key, nil)

			removed, err := owner.RevokeGrantWrite(nil, "v", w.Grant, 200, caps)
			if err != nil || !removed {
				t.Fatalf("RevokeGrantWrite = %v, %v; want true, nil", removed, err)
			}
			if again, err := owner.RevokeGrantWrite(nil, "v", w.Grant, 200, caps); err != nil || again {
				t.Fatalf("a second take-back = %v, %v; want false, nil", again, err)
			}
			left(t, "owner", owner, "v", 300, caps, 1)
			merge(backup, owner)
			left(t, "backup after the owner's copy", backup, "v", 300, caps, 1)
			if _, _, err := owner.MergeAll(stale, nil); err != nil {
				t.Fatal(err)
			}
			left(t, "owner after the backup's older copy", owner, "v", 300, caps, 1)

			// The take-back of an untagged grant stays on its copy.
			plain, other := newEngine(t), newEngine(t)
			mustAllow(t, plain, "v", 100, true, caps...)
			mustAllow(t, plain, "v", 200, true, caps...)
			merge(other, plain)
			if _, err := plain.Revoke("v", 200, caps...); err != nil {
				t.Fatal(err)
			}
			merge(other, plain)
			left(t, "a plain revoke, merged", other, "v", 300, caps, 2)
		})
	}
}

package engine_test

import (
	"errors"
	"testing"

	"github.com/fcap-io/fcap"
)

// TestRevoke: a revoked Allow gives its slot back on every counter it
// used, exactly once, whatever the algorithm.
func TestRevoke(t *testing.T) {
	for _, algo := range []fcap.Algorithm{fcap.Sliding, fcap.Fixed, fcap.Buckets} {
		t.Run(algo.String(), func(t *testing.T) {
			e := newEngine(t)
			c := fcap.Cap{Scope: "campaign", ID: "c", Limit: 3, Window: 1000, Algorithm: algo, Mode: fcap.Strict}
			adv := fcap.Cap{Scope: "advertiser", ID: "a", Limit: 10, Window: 5000, Algorithm: algo, Mode: fcap.Strict}
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
		{"v", 10, []fcap.Cap{{Scope: "campaign", ID: "c", Limit: 0, Window: 1000}}},
	} {
		if _, err := e.Revoke(tc.viewer, tc.now, tc.caps...); !errors.Is(err, fcap.ErrInvalid) {
			t.Errorf("Revoke(%q, %d, %v): %v, want fcap.ErrInvalid", tc.viewer, tc.now, tc.caps, err)
		}
	}
	if got := checkOne(t, e, "v", 10, c).Remaining; got != 1 {
		t.Fatalf("%d left after refused revokes, want 1", got)
	}
}

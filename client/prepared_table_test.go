package client

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
)

// TestPreparedTableMatchesReset: for random ad requests drawn from a
// small catalogue (so that neighbours often share caps at the same
// place, after caps that differ, as creatives of one campaign do),
// CheckPreparedInto's table is CheckInto's: the same distinct caps in
// the same wire forms, the same references and ends, the same strict
// candidates.
func TestPreparedTableMatchesReset(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 21))
	pool := []fcap.Cap{
		{Scope: "campaign", ID: "c1", Limit: 5, Window: 24 * time.Hour},
		{Scope: "campaign", ID: "c2", Limit: 5, Window: 24 * time.Hour},
		{Scope: "advertiser", ID: "a1", Limit: 50, Window: 7 * 24 * time.Hour},
		{Scope: "advertiser", ID: "a1", Limit: 50, Window: 7 * 24 * time.Hour, Mode: fcap.Strict},
		{Scope: "creative", ID: "a-long-creative-id-of-forty-bytes-012345", Limit: 3, Window: time.Hour},
		{Scope: "campaign", ID: "c1", Limit: 6, Window: 24 * time.Hour},
	}
	for i := range 20 {
		pool = append(pool, fcap.Cap{Scope: "creative", ID: fmt.Sprint("cr-", i), Limit: 2, Window: time.Hour})
	}
	// The catalogue: candidates of 1 to 4 caps from the pool.
	catalogue := make([]fcap.Candidate, 60)
	prepared := make([]PreparedCandidate, len(catalogue))
	for i := range catalogue {
		caps := make([]fcap.Cap, 1+rng.IntN(4))
		for j := range caps {
			caps[j] = pool[rng.IntN(len(pool))]
		}
		if i%3 == 1 { // a creative of the previous line item's campaign
			caps = append([]fcap.Cap{pool[6+rng.IntN(20)]}, catalogue[i-1].Caps[min(1, len(catalogue[i-1].Caps)-1):]...)
		}
		catalogue[i] = fcap.Candidate{Caps: caps}
		p, err := PrepareCandidate(catalogue[i])
		if err != nil {
			t.Fatal(err)
		}
		prepared[i] = p
	}
	var want, got CheckResult
	deduped := 0
	for round := range 2000 {
		n := 1 + rng.IntN(30)
		cands := make([]fcap.Candidate, n)
		picked := make([]PreparedCandidate, n)
		k := rng.IntN(len(catalogue))
		for i := range n {
			if rng.IntN(3) > 0 { // runs of neighbouring line items
				k = rng.IntN(len(catalogue))
			} else {
				k = (k + 1) % len(catalogue)
			}
			cands[i], picked[i] = catalogue[k], prepared[k]
		}
		if err := want.reset(cands); err != nil {
			t.Fatal(err)
		}
		if err := got.resetPrepared(picked); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got.table.Refs, want.table.Refs) || !slices.Equal(got.table.Ends, want.table.Ends) ||
			!slices.Equal(got.strict, want.strict) || got.caps.Len() != want.caps.Len() {
			t.Fatalf("round %d: prepared table refs %v ends %v strict %v (%d caps), CheckInto's %v %v %v (%d caps)", round,
				got.table.Refs, got.table.Ends, got.strict, got.caps.Len(), want.table.Refs, want.table.Ends, want.strict, want.caps.Len())
		}
		for i := range want.caps.Len() {
			if !bytes.Equal(got.caps.Form(i), want.caps.Form(i)) {
				t.Fatalf("round %d: cap %d's form % x, CheckInto's % x", round, i, got.caps.Form(i), want.caps.Form(i))
			}
		}
		deduped += len(want.table.Refs) - want.caps.Len()
	}
	if deduped == 0 {
		t.Fatal("no request shared a cap between neighbours: the test checked no deduplication")
	}
}

package fcap

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// TestRunsOfCapsMatchOneAtATime: KeyHasher and CapChecker, which skip work
// for a cap naming the scope of the cap before it, give for every cap of
// a run what Cap.Key and Limits.CheckCap give for it alone, whatever the
// order of scopes, valid or not.
func TestRunsOfCapsMatchOneAtATime(t *testing.T) {
	scopes := []string{"campaign", "creative", "advertiser", "campaignx", "", "Campaign"}
	lims := []Limits{{}, {Scopes: []string{"campaign"}}, {AnyScope: true}}
	rng := rand.New(rand.NewPCG(3, 4))
	skippedLookups := 0
	for _, lim := range lims {
		for run := range 2000 {
			var kh KeyHasher
			ck := lim.Checker()
			for i := range 1 + rng.IntN(12) {
				c := Cap{Scope: scopes[rng.IntN(len(scopes))], ID: fmt.Sprint("id-", rng.IntN(5)),
					Limit: int64(rng.IntN(5)), Window: time.Second, Algorithm: Algorithm(rng.IntN(4))}
				if got, want := kh.Key(&c), c.Key(); got != want {
					t.Fatalf("run %d cap %d %+v: KeyHasher %x, Key %x", run, i, c, got, want)
				}
				before := ck.known
				got, want := ck.Check(&c), lim.CheckCap(&c)
				if (got == nil) != (want == nil) || (got != nil && got.Error() != want.Error()) {
					t.Fatalf("limits %+v run %d cap %d %+v after %q: CapChecker %v, CheckCap %v", lim, run, i, c, before, got, want)
				}
				if got == nil && before != "" && c.Scope == before {
					skippedLookups++
				}
				if errors.Is(want, ErrUnknownScope) && ck.known == c.Scope {
					t.Fatalf("an unknown scope %q became the known one", c.Scope)
				}
			}
		}
	}
	if skippedLookups == 0 {
		t.Fatal("no run had two valid caps of one scope in a row: the test shows nothing")
	}
}

package client_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/proto"
)

// TestPreparedCandidatesFollowTheFailurePolicy: with no cluster, a
// prepared soft candidate fails open and one with a strict cap fails
// closed, as the same candidates do through CheckInto.
func TestPreparedCandidatesFollowTheFailurePolicy(t *testing.T) {
	c := newClient(t, shortDial, deadCluster(t))
	prepared := prepareAll(t, []fcap.Candidate{{Caps: []fcap.Cap{soft}}, {Caps: []fcap.Cap{soft, strict}}})
	var res client.CheckResult
	if err := c.CheckPreparedInto(context.Background(), "v", prepared, &res); !errors.Is(err, client.ErrUnavailable) {
		t.Fatalf("CheckPreparedInto, no cluster ever reached: %v, want ErrUnavailable beside the verdicts", err)
	}
	if v := res.Verdicts[0]; !v.Allowed || !v.FailOpen {
		t.Errorf("soft candidate: %+v, want allowed and marked fail-open", v)
	}
	if v := res.Verdicts[1]; v.Allowed || !v.FailClosed {
		t.Errorf("strict candidate: %+v, want denied and marked fail-closed", v)
	}
}

// TestPreparedCandidatesRefuseBadRequests: what a check of prepared
// candidates cannot send is an ErrBadRequest before anything is sent,
// and the result holds no verdicts from an earlier check.
func TestPreparedCandidatesRefuseBadRequests(t *testing.T) {
	long := fcap.Cap{Scope: "campaign", ID: strings.Repeat("x", proto.MaxStringLen+1), Limit: 1, Window: time.Second}
	if _, err := client.PrepareCandidate(fcap.Candidate{Caps: []fcap.Cap{soft, long}}); !errors.Is(err, client.ErrBadRequest) {
		t.Errorf("PrepareCandidate(a string over the wire's limit) = %v, want ErrBadRequest", err)
	}
	many := make([]fcap.Cap, proto.MaxCheckCaps)
	for i := range many {
		many[i] = fcap.Cap{Scope: "campaign", ID: fmt.Sprint("c", i), Limit: 1, Window: time.Second}
	}
	if _, err := client.PrepareCandidate(fcap.Candidate{Caps: many}); !errors.Is(err, client.ErrBadRequest) {
		t.Errorf("PrepareCandidate(%d caps) = %v, want ErrBadRequest", len(many), err)
	}
	// Distinct caps over the check's limit, spread over candidates each
	// of which is fine alone.
	spread := make([]client.PreparedCandidate, 0, proto.MaxCandidates)
	for i := 0; i < len(many); i += 4 {
		spread = append(spread, prepareAll(t, []fcap.Candidate{{Caps: many[i:min(i+4, len(many))]}})[0])
	}

	c, checks := checkCounter(t)
	ctx, cancel := context.WithTimeout(context.Background(), generous)
	defer cancel()
	one := prepareAll(t, []fcap.Candidate{{Caps: []fcap.Cap{soft}}})
	tooMany := make([]client.PreparedCandidate, proto.MaxCandidates+1)
	for i := range tooMany {
		tooMany[i] = one[0]
	}
	for _, tc := range []struct {
		name  string
		cands []client.PreparedCandidate
		says  string
	}{
		{"a zero candidate", []client.PreparedCandidate{one[0], {}}, "candidate 1 is not prepared"},
		{"too many candidates", tooMany, "candidates, at most"},
		{"too many distinct caps", spread, "distinct caps"},
	} {
		var res client.CheckResult
		if err := c.CheckPreparedInto(ctx, "viewer-1", one, &res); err != nil || len(res.Verdicts) != 1 {
			t.Fatalf("%s: the valid check before it: %v, %d verdicts", tc.name, err, len(res.Verdicts))
		}
		err := c.CheckPreparedInto(ctx, "viewer-1", tc.cands, &res)
		if !errors.Is(err, client.ErrBadRequest) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v, want ErrBadRequest saying %q", tc.name, err, tc.says)
		}
		if len(res.Verdicts) != 0 {
			t.Errorf("%s: %d verdicts left in a refused check's result", tc.name, len(res.Verdicts))
		}
	}
	if n := checks.Load(); n != 3 {
		t.Fatalf("the node saw %d Checks, want only the 3 valid ones", n)
	}
}

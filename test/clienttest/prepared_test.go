package clienttest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
)

// TestPreparedCandidatesAgainstANode: prepared candidates get the
// verdicts, remaining counts and pod budgets the same candidates get
// through CheckInto, from a real node, with a result reused between the
// two kinds of check.
func TestPreparedCandidatesAgainstANode(t *testing.T) {
	_, c, ctx := readySolo(t)
	// The client test's pod, and a creative with the soft cap only.
	cands := append(podViewer(t, c, ctx), fcap.Candidate{Caps: []fcap.Cap{{Scope: "creative", ID: "w", Limit: 1, Window: time.Second}, soft}})
	prepared := prepareAll(t, cands)

	var res client.CheckResult
	if err := c.CheckInto(ctx, "pod-viewer", cands, &res, client.At(20)); err != nil {
		t.Fatal(err)
	}
	want := res.Verdicts
	wantLeft := make([][]int64, len(cands))
	for i := range cands {
		wantLeft[i] = res.CapsRemaining(i)
	}
	if err := c.CheckPreparedInto(ctx, "pod-viewer", prepared, &res, client.At(20)); err != nil {
		t.Fatal(err)
	}
	if len(res.Verdicts) != len(want) {
		t.Fatalf("%d verdicts, want %d", len(res.Verdicts), len(want))
	}
	for i, v := range res.Verdicts {
		if v != want[i] || v.Failed() {
			t.Errorf("candidate %d: %+v, CheckInto said %+v", i, v, want[i])
		}
		if got := fmt.Sprint(res.CapsRemaining(i)); got != fmt.Sprint(wantLeft[i]) || wantLeft[i] == nil {
			t.Errorf("candidate %d: caps remaining %s, CheckInto said %v", i, got, wantLeft[i])
		}
	}
	// The campaign cap has 1 left after the 2 records: the pod places
	// one of the creatives sharing it, as it does for CheckInto's result.
	pod := client.NewPod(&res)
	if !pod.Take(0) || pod.Take(1) || pod.Take(3) {
		t.Error("the pod placed a second ad under the shared campaign cap with 1 left")
	}

	// What the node validates (an empty id, a negative window) prepares,
	// and the check is refused as CheckInto's is: an error, no verdicts.
	for _, bad := range []fcap.Cap{
		{Scope: "campaign", ID: "", Limit: 1, Window: time.Second},
		{Scope: "campaign", ID: "c", Limit: 1, Window: -time.Second},
	} {
		p, err := client.PrepareCandidate(fcap.Candidate{Caps: []fcap.Cap{bad}})
		if err != nil {
			t.Fatalf("PrepareCandidate(%+v): %v", bad, err)
		}
		err = c.CheckPreparedInto(ctx, "pod-viewer", []client.PreparedCandidate{prepared[0], p}, &res, client.At(20))
		if !errors.Is(err, client.ErrBadRequest) || len(res.Verdicts) != 0 {
			t.Errorf("a check of %+v: %v, %d verdicts; want ErrBadRequest and none", bad, err, len(res.Verdicts))
		}
		if cerr := c.CheckInto(ctx, "pod-viewer", []fcap.Candidate{cands[0], {Caps: []fcap.Cap{bad}}}, &res, client.At(20)); !errors.Is(cerr, client.ErrBadRequest) {
			t.Errorf("CheckInto of %+v: %v, want ErrBadRequest as well", bad, cerr)
		}
	}
}

// prepareAll prepares each candidate on its own (client/wire_test.go's).
func prepareAll(t testing.TB, cands []fcap.Candidate) []client.PreparedCandidate {
	t.Helper()
	out := make([]client.PreparedCandidate, len(cands))
	for i, cand := range cands {
		p, err := client.PrepareCandidate(cand)
		if err != nil {
			t.Fatalf("PrepareCandidate(%d): %v", i, err)
		}
		out[i] = p
	}
	return out
}

package client_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/proto"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files in testdata")

// TestCheckWireGolden: the bytes a 100-candidate CheckInto puts on the
// wire are those of the golden file, written by the client as it was
// before its check path was made cheaper (issue 21): the table built
// from the candidates (caps equal to the previous candidate's at the
// same place sent once) and every msgpack form of a cap's fields. The
// budget, the last field, depends on the clock and is left out; it is
// checked to decode within the call's deadline.
//
// CheckPreparedInto puts the same bytes on the wire, whether a candidate
// equal to the previous one is another prepared copy or the same one.
//
//	go test -run TestCheckWireGolden -update ./client/   # only when the wire is meant to change
func TestCheckWireGolden(t *testing.T) {
	t.Run("CheckInto", func(t *testing.T) {
		checkWireGolden(t, *updateGolden, func(ctx context.Context, c *client.Client, res *client.CheckResult) error {
			return c.CheckInto(ctx, "viewer-123456", goldenCandidates(), res, client.At(1_700_000_000_123))
		})
	})
	t.Run("CheckPreparedInto", func(t *testing.T) {
		prepared := prepareAll(t, goldenCandidates())
		checkWireGolden(t, false, func(ctx context.Context, c *client.Client, res *client.CheckResult) error {
			return c.CheckPreparedInto(ctx, "viewer-123456", prepared, res, client.At(1_700_000_000_123))
		})
	})
	t.Run("CheckPreparedInto, repeats in the same memory", func(t *testing.T) {
		prepared := prepareAll(t, goldenCandidates())
		for i := range prepared {
			if i%10 == 3 { // a copy of candidate i-1 (goldenCandidates)
				prepared[i] = prepared[i-1]
			}
		}
		checkWireGolden(t, false, func(ctx context.Context, c *client.Client, res *client.CheckResult) error {
			return c.CheckPreparedInto(ctx, "viewer-123456", prepared, res, client.At(1_700_000_000_123))
		})
	})
}

// prepareAll prepares each candidate on its own.
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

// checkWireGolden runs check (goldenCandidates for viewer-123456 at
// 1_700_000_000_123) against a fake node and compares the Check's body
// with the golden file, rewriting it first when update is set.
func checkWireGolden(t *testing.T, update bool, check func(context.Context, *client.Client, *client.CheckResult) error) {
	bodies := make(chan []byte, 1)
	srv := startFake(t, func(hdr proto.Header, body []byte) proto.Message {
		if hdr.Type != proto.TypeCheck {
			return nil
		}
		select {
		case bodies <- bytes.Clone(body):
		default:
		}
		return &proto.CheckResult{Epoch: 42, Now: 1, Verdicts: make([]fcap.Verdict, 100)}
	})
	c := newClient(t, nil, srv.addr())
	ctx, cancel := context.WithTimeout(context.Background(), generous)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	var res client.CheckResult
	if err := check(ctx, c, &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Verdicts) != 100 || res.Verdicts[0].Failed() {
		t.Fatalf("%d verdicts, first %+v: the fake node's answer did not arrive", len(res.Verdicts), res.Verdicts[0])
	}
	body := <-bodies
	var m proto.Check
	if err := proto.Decode(body, &m); err != nil {
		t.Fatal(err)
	}
	if m.Budget <= 0 || m.Budget > generous {
		t.Fatalf("budget %v, want within the call's %v", m.Budget, generous)
	}
	// The budget travels in whole microseconds, rounded up; its form
	// comes from msgpack's own encoder, not the one under test.
	var enc bytes.Buffer
	if err := msgpack.NewEncoder(&enc).EncodeUint(uint64(m.Budget / time.Microsecond)); err != nil {
		t.Fatal(err)
	}
	budget := enc.Bytes()
	if !bytes.HasSuffix(body, budget) {
		t.Fatalf("body does not end with the budget % x", budget)
	}
	got := body[:len(body)-len(budget)]
	path := filepath.Join("testdata", "check100.golden")
	if update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		i := 0
		for i < min(len(got), len(want)) && got[i] == want[i] {
			i++
		}
		t.Fatalf("the Check's body (%d bytes, budget left out) differs from %s (%d bytes) from byte %d:\n got % x\nwant % x",
			len(got), path, len(want), i, got[i:min(len(got), i+32)], want[i:min(len(want), i+32)])
	}
}

// goldenCandidates are 100 candidates of fcapbench's shape (one soft
// campaign cap each) mixed with every case the table and the cap
// encoding distinguish: equal caps in neighbouring candidates (in other
// memory), candidates of several caps sharing some, strict caps, every
// algorithm, strings of each msgpack str form, and limits and windows of
// each integer form.
func goldenCandidates() []fcap.Candidate {
	cands := make([]fcap.Candidate, 100)
	for i := range cands {
		cp := fcap.Cap{Scope: "campaign", ID: fmt.Sprint("campaign-", i*37%5000), Limit: 5, Window: 24 * time.Hour}
		switch i % 10 {
		case 3: // equal to the previous candidate's cap, another copy
			cp = cands[i-1].Caps[0]
		case 4:
			cp.ID = strings.Repeat("x", 40) // str8
		case 7:
			cp.ID = strings.Repeat("y", 300) // str16
			cp.Algorithm = fcap.Fixed
		case 8:
			cp.ID, cp.Scope = "", "" // empty strings
			cp.Limit, cp.Window = 128, 65_535*time.Millisecond
		case 9:
			cp.Limit, cp.Window, cp.Mode = fcap.MaxLimit, time.Millisecond, fcap.Strict
		}
		cands[i] = fcap.Candidate{Caps: []fcap.Cap{cp}}
		if i%10 == 5 || i%10 == 6 {
			// Three caps; the next candidate shares the first two at the
			// same places.
			cands[i].Caps = []fcap.Cap{
				{Scope: "creative", ID: fmt.Sprint("creative-", i/10), Limit: 3, Window: time.Hour},
				{Scope: "campaign", ID: fmt.Sprint("campaign-", i/10), Limit: 200, Window: 7 * 24 * time.Hour, Algorithm: fcap.Buckets},
				{Scope: "advertiser", ID: fmt.Sprint("adv-", i), Limit: 1000, Window: 365 * 24 * time.Hour, Mode: fcap.Strict},
			}
		}
	}
	return cands
}

// TestCheckRefusesUnencodableCap: a cap the wire cannot carry (a string
// over proto.MaxStringLen) fails the Check as a bad request before
// anything is sent, now that caps are encoded while the table is built.
func TestCheckRefusesUnencodableCap(t *testing.T) {
	c, checks := checkCounter(t)
	ctx, cancel := context.WithTimeout(context.Background(), generous)
	defer cancel()
	long := fcap.Cap{Scope: "campaign", ID: strings.Repeat("x", proto.MaxStringLen+1), Limit: 1, Window: time.Second}
	cands := []fcap.Candidate{{Caps: []fcap.Cap{soft}}, {Caps: []fcap.Cap{soft, long}}}
	var res client.CheckResult
	err := c.CheckInto(ctx, "viewer-1", cands, &res)
	if !errors.Is(err, client.ErrBadRequest) || !strings.Contains(err.Error(), "candidate 1") {
		t.Fatalf("CheckInto = %v, want ErrBadRequest naming candidate 1", err)
	}
	if len(res.Verdicts) != 0 {
		t.Fatalf("%d verdicts for a refused check", len(res.Verdicts))
	}
	// The same result checks again once the caller drops the cap.
	if err := c.CheckInto(ctx, "viewer-1", cands[:1], &res); err != nil || len(res.Verdicts) != 1 || res.Verdicts[0].Failed() {
		t.Fatalf("CheckInto = %v, %d verdicts", err, len(res.Verdicts))
	}
	if n := checks.Load(); n != 1 {
		t.Fatalf("the node saw %d Checks, want only the valid one", n)
	}
}

// checkCounter is a ready client of a fake node that answers every Check
// that decodes with a verdict per candidate, and counts them.
func checkCounter(t *testing.T) (*client.Client, *atomic.Int64) {
	t.Helper()
	checks := new(atomic.Int64)
	srv := startFake(t, func(hdr proto.Header, body []byte) proto.Message {
		var m proto.Check
		if hdr.Type != proto.TypeCheck || proto.Decode(body, &m) != nil {
			return nil
		}
		checks.Add(1)
		return &proto.CheckResult{Epoch: 42, Now: 1, Verdicts: make([]fcap.Verdict, len(m.Table.Ends))}
	})
	c := newClient(t, nil, srv.addr())
	ctx, cancel := context.WithTimeout(context.Background(), generous)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	return c, checks
}

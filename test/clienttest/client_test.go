package clienttest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/node"
	"github.com/fcap-io/fcap/node/nodetest"
)

// podViewer records two impressions of the soft campaign cap for
// "pod-viewer" (through the queue, flushed) and returns a pod: two
// creatives share that cap (1 left after the records) and an
// advertiser cap with 5 left; a third has the advertiser cap only.
func podViewer(t *testing.T, c *client.Client, ctx context.Context) []fcap.Candidate {
	t.Helper()
	for i := range 2 {
		c.Record("pod-viewer", fcap.Impression{ID: fmt.Sprint("r", i), Time: 10, Caps: []fcap.Cap{soft}})
	}
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	adv := fcap.Cap{Scope: "advertiser", ID: "a", Limit: 5, Window: time.Second}
	return []fcap.Candidate{
		{Caps: []fcap.Cap{{Scope: "creative", ID: "x", Limit: 2, Window: time.Second}, soft, adv}},
		{Caps: []fcap.Cap{{Scope: "creative", ID: "y", Limit: 2, Window: time.Second}, soft, adv}},
		{Caps: []fcap.Cap{{Scope: "creative", ID: "z", Limit: 2, Window: time.Second}, adv}},
	}
}

// readySolo starts a one-node cluster and a client of it with its first
// topology in; ctx bounds the test's calls generously.
func readySolo(t *testing.T) (*node.Node, *client.Client, context.Context) {
	t.Helper()
	nd := soloNode(t, "solo")
	c := newClient(t, nil, nd.DataAddr())
	ctx, cancel := context.WithTimeout(context.Background(), generous)
	t.Cleanup(cancel)
	if err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	// The first call after WaitReady is served (issue 34: WaitReady
	// returned before the connection was up, or while the node was still
	// joining, and that call failed open at once).
	var res client.CheckResult
	err := c.CheckInto(ctx, "warm-up", []fcap.Candidate{{Caps: []fcap.Cap{{Scope: "campaign", ID: "warm-up", Limit: 1, Window: time.Second}}}}, &res, client.At(0))
	if err != nil || res.Verdicts[0].Failed() {
		t.Fatalf("the first check after WaitReady: %v %+v, want the node's verdict", err, res.Verdicts)
	}
	return nd, c, ctx
}

// soloNode starts a one-node cluster in this process, shut down when the
// test ends (after its clients, which close first).
func soloNode(t testing.TB, name string) *node.Node {
	t.Helper()
	cfg := node.DefaultLocalConfig(name)
	cfg.Logger = quiet
	return nodetest.Start(t, cfg)
}

func TestClientAgainstANode(t *testing.T) {
	_, c, ctx := readySolo(t)

	// Records go through the queue and count (podViewer records two).
	cands := podViewer(t, c, ctx)
	res, err := c.Check(ctx, "pod-viewer", cands, client.At(20))
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range res.Verdicts {
		if !v.Allowed || v.Failed() {
			t.Fatalf("verdict %d = %+v", i, v)
		}
	}
	pod := client.NewPod(res)
	if !pod.Take(0) {
		t.Fatal("first creative not placed")
	}
	if pod.Take(1) {
		t.Error("second creative placed although the shared campaign cap had one impression left")
	}
	for range 4 {
		if !pod.Take(2) {
			break
		}
	}
	if pod.Remaining(2) != 0 || pod.Take(2) {
		t.Errorf("the advertiser cap (5 left, 1 used by creative x) let creative z exceed it")
	}

	// Reserve / Release round trip.
	_, r, err := c.Reserve(ctx, "res-viewer", fcap.Candidate{Caps: []fcap.Cap{{Scope: "campaign", ID: "s", Limit: 1, Window: time.Second, Mode: fcap.Strict}}}, time.Minute) // at the node's clock: a reservation made at tick 1 would have expired long ago
	if err != nil || r.ID == 0 {
		t.Fatalf("Reserve = %+v, %v", r, err)
	}
	if err := c.Release(ctx, r); err != nil {
		t.Fatal(err)
	}
	if err := c.Release(ctx, r); !errors.Is(err, client.ErrUnknownReservation) {
		t.Fatalf("second Release = %v, want ErrUnknownReservation", err)
	}
}

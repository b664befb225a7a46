package clienttest

import (
	"context"
	"fmt"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/node"
)

// These are the client's runnable examples (they were client's
// ExampleNew, ExampleClient_Check and so on): they start a node, so they
// live in the test module, named as package examples.

// exampleCluster starts a one-node fcap cluster in this process, the
// examples' stand-in for a real one, and returns its data-plane address
// and a function that stops it, once the node serves. (It turns active a
// moment after it listens: a client that fetched the topology before
// would find no owner, and its first calls would be decided by the
// failure policy, not the output the examples show.)
func exampleCluster() (seed string, stop func()) {
	cfg := node.DefaultLocalConfig("example")
	cfg.Logger = quiet
	nd, err := node.Start(cfg)
	if err != nil {
		panic(err)
	}
	for deadline := time.Now().Add(20 * time.Second); !nd.Ready(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			panic("the example node did not turn ready in 20 s")
		}
	}
	return nd.DataAddr(), func() { nd.Shutdown(context.Background()) }
}

// exampleClient is a ready client of seed. Its Timeout is generous, so
// the examples' output does not depend on how busy the machine is; an
// ad server keeps the 5 ms default.
func exampleClient(seed string) *client.Client {
	c, err := client.New(client.Config{Seeds: []string{seed}, Timeout: 2 * time.Second, Logger: quiet})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		panic(err)
	}
	return c
}

var (
	day          = 24 * time.Hour
	creativeCap  = fcap.Cap{Scope: "creative", ID: "cr42", Limit: 3, Window: time.Hour}
	campaignCap  = fcap.Cap{Scope: "campaign", ID: "c7", Limit: 10, Window: day}
	contractCap  = fcap.Cap{Scope: "campaign", ID: "premium", Limit: 2, Window: day, Mode: fcap.Strict}
	advertiserAd = fcap.Cap{Scope: "advertiser", ID: "acme", Limit: 4, Window: day}
)

// A client needs only the seeds: every other field of Config has a
// working default (a 5 ms deadline, soft caps failing open and strict
// caps failing closed, a 65,536-impression record queue).
func Example_new() {
	seed, stop := exampleCluster()
	defer stop()

	c, err := client.New(client.Config{Seeds: []string{seed}, Logger: quiet})
	if err != nil {
		panic(err) // only an invalid Config is an error: an unreachable cluster is not
	}
	defer c.Close(context.Background()) // flushes queued impressions

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		fmt.Println("cluster not reachable yet:", err)
		return
	}
	fmt.Println("ready")
	// Output: ready
}

// Check asks once for every candidate of an ad request.
func Example_clientCheck() {
	seed, stop := exampleCluster()
	defer stop()
	c := exampleClient(seed)
	defer c.Close(context.Background())

	cands := []fcap.Candidate{
		{Caps: []fcap.Cap{creativeCap, campaignCap}},
		{Caps: []fcap.Cap{{Scope: "creative", ID: "cr43", Limit: 0, Window: day}}}, // an invalid cap
	}
	if _, err := c.Check(context.Background(), "viewer-check", cands); err != nil {
		fmt.Println("refused:", err != nil)
	}
	res, err := c.Check(context.Background(), "viewer-check", cands[:1])
	if err != nil {
		panic(err)
	}
	for i, v := range res.Verdicts {
		// A verdict the cluster could not give in time is decided by the
		// failure policy and says so.
		fmt.Printf("candidate %d: allowed %v, %d left, by policy %v\n", i, v.Allowed, v.Remaining, v.Failed())
	}
	// Output:
	// refused: true
	// candidate 0: allowed true, 3 left, by policy false
}

// An ad server prepares each line item of its catalogue once, when it
// loads it, and checks the ones an ad request's targeting picked without
// encoding their caps again: the hot path's CPU in the client about
// halves. The verdicts are those of Check.
func Example_clientCheckPreparedInto() {
	seed, stop := exampleCluster()
	defer stop()
	c := exampleClient(seed)
	defer c.Close(context.Background())

	// At catalogue load.
	catalogue := map[string]client.PreparedCandidate{}
	for name, cand := range map[string]fcap.Candidate{
		"cr42": {Caps: []fcap.Cap{creativeCap, campaignCap}},
		"acme": {Caps: []fcap.Cap{advertiserAd}},
	} {
		p, err := client.PrepareCandidate(cand)
		if err != nil {
			panic(err) // a cap the wire cannot carry
		}
		catalogue[name] = p
	}

	// Per ad request: the picked line items, and a result reused from
	// one request to the next.
	picked := []client.PreparedCandidate{catalogue["cr42"], catalogue["acme"]}
	var res client.CheckResult
	if err := c.CheckPreparedInto(context.Background(), "viewer-prepared", picked, &res); err != nil {
		panic(err)
	}
	for i, v := range res.Verdicts {
		fmt.Printf("candidate %d: allowed %v, %d left, by policy %v\n", i, v.Allowed, v.Remaining, v.Failed())
	}
	// Output:
	// candidate 0: allowed true, 3 left, by policy false
	// candidate 1: allowed true, 4 left, by policy false
}

// Record reports an impression that played; it is queued and sent in
// batches, and an invalid one is refused at once.
func Example_clientRecord() {
	seed, stop := exampleCluster()
	defer stop()
	c := exampleClient(seed)
	defer c.Close(context.Background())

	// Time 0 means now (the owner's clock).
	err := c.Record("viewer-record", fcap.Impression{ID: "imp-1", Caps: []fcap.Cap{creativeCap, campaignCap}})
	fmt.Println("queued:", err == nil)

	err = c.Record("viewer-record", fcap.Impression{ID: "imp-2", Caps: []fcap.Cap{{Scope: "placement", ID: "p", Limit: 1, Window: day}}})
	fmt.Println(err)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.Flush(ctx); err != nil { // only tests and shutdowns wait
		panic(err)
	}
	res, err := c.Check(ctx, "viewer-record", []fcap.Candidate{{Caps: []fcap.Cap{creativeCap}}})
	if err != nil {
		panic(err)
	}
	fmt.Println("creative left:", res.Verdicts[0].Remaining)
	// Output:
	// queued: true
	// fcap: bad request: record: cap 0: invalid request: unknown cap scope "placement" (accepted: creative, campaign, advertiser)
	// creative left: 2
}

// A strict cap is reserved when the ad is chosen and the reservation is
// confirmed by the impression's Record (or released if the ad does not
// play): in-flight impressions cannot overshoot it.
func Example_clientReserve() {
	seed, stop := exampleCluster()
	defer stop()
	c := exampleClient(seed)
	defer c.Close(context.Background())
	ctx := context.Background()
	cand := fcap.Candidate{Caps: []fcap.Cap{contractCap}}

	for i := range 3 {
		v, r, err := c.Reserve(ctx, "viewer-reserve", cand, time.Minute)
		if err != nil {
			panic(err)
		}
		if !v.Allowed {
			fmt.Printf("request %d: not served (failed closed: %v)\n", i, v.FailClosed)
			continue
		}
		fmt.Printf("request %d: served\n", i)
		// The ad played: the impression confirms the reservation.
		err = c.Record(r.Viewer, fcap.Impression{ID: fmt.Sprint("imp-", i), Caps: cand.Caps, Reservation: r.ID})
		if err != nil {
			panic(err)
		}
	}
	// Output:
	// request 0: served
	// request 1: served
	// request 2: not served (failed closed: false)
}

// A Pod places several ads from one Check without another round trip,
// sharing the caps the candidates have in common.
func Example_pod() {
	seed, stop := exampleCluster()
	defer stop()
	c := exampleClient(seed)
	defer c.Close(context.Background())

	cands := []fcap.Candidate{
		{Caps: []fcap.Cap{{Scope: "creative", ID: "a", Limit: 3, Window: day}, advertiserAd}},
		{Caps: []fcap.Cap{{Scope: "creative", ID: "b", Limit: 3, Window: day}, advertiserAd}},
	}
	res, err := c.Check(context.Background(), "viewer-pod", cands)
	if err != nil {
		panic(err)
	}
	pod := client.NewPod(res)
	var placed []int
	for slot := range 6 { // six slots, the creatives in turn
		if i := slot % len(cands); pod.Take(i) {
			placed = append(placed, i)
		}
	}
	fmt.Println("placed:", placed) // the advertiser's limit of 4 fills the pod
	// Output: placed: [0 1 0 1]
}

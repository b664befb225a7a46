package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
)

// target is a system under test. Every method is safe for concurrent use
// and returns an error only for a failed call (a timeout, a refused
// connection); a denial is a result, not an error.
type target interface {
	Name() string
	// Allow is one atomic check-and-record of a campaign cap.
	Allow(ctx context.Context, viewer string, campaign int, now int64) (allowed bool, err error)
	// Check asks for read-only verdicts on many campaigns in one call and
	// returns how many were allowed.
	Check(ctx context.Context, viewer string, campaigns []int, now int64) (allowed int, err error)
	// Record counts an impression of a campaign.
	Record(ctx context.Context, viewer string, campaign int, id string, now int64) error
	// Failed reports how many answers so far were made up by a failure
	// policy instead of the system (fcap's fail-open verdicts).
	Failed() int64
	Close() error
}

// selfTimed reports whether a target bounds every call by --timeout on
// its own (the fcap client's Timeout, the echo's and raw's timer, the
// null target's nothing to wait for). The driver gives such a target the
// run's context as it is: a context of its own per call
// (context.WithTimeout) costs the generator four allocations and a
// timer, about 2us of its core a call, which is neither the target's
// cost nor the floor's. The types are named exactly, so a test's target
// built on nullTarget still gets its deadline from the driver.
func selfTimed(t target) bool {
	switch t.(type) {
	case *fcapTarget, *echoTarget, nullTarget:
		return true
	}
	return false
}

// targetKinds are the systems fcapbench can drive.
func targetKinds() []string {
	return append([]string{"fcap", "echo", "raw", "null"}, redisKinds...)
}

// targetOpts are the knobs of connecting to a target.
type targetOpts struct {
	timeout    time.Duration // fcap: the client's per-call deadline (Redis: the call's context bounds it)
	conns      int           // fcap: connections per node
	pool       int           // Redis: pooled connections (one per caller)
	redisCheck string        // Redis: "pipeline" or "lua"
	prepared   bool          // fcap: check prepared candidates (CheckPreparedInto)
	tls        *tls.Config   // fcap: TLS to the nodes, nil for plaintext
	token      string        // fcap: token presented on each connection
	callerWork time.Duration // echo: CPU each call spends before it sends (--echo-caller-work)
}

// newTarget connects to a target of the given kind at addrs
// (comma-separated).
func newTarget(kind, addrs string, w *workload, x *ids, o targetOpts) (target, error) {
	switch {
	case kind == "null":
		return nullTarget{}, nil
	case kind == "fcap":
		return newFcapTarget(addrs, w, x, o)
	case kind == "echo":
		return newEchoTarget(addrs, w, x, o)
	case kind == "raw":
		return newRawTarget(addrs, w, x, o)
	case isRedisKind(kind):
		return newRedisTarget(kind, addrs, w, x, o.pool, o.redisCheck)
	}
	return nil, fmt.Errorf("unknown target %q", kind)
}

// fcapTarget drives an fcap cluster through the client.
type fcapTarget struct {
	c         *client.Client
	campaigns []fcap.Cap // per campaign index
	// prepared, with --prepared, holds each campaign's candidate
	// prepared once (per campaign index), as an ad server prepares its
	// catalogue when it loads it.
	prepared []client.PreparedCandidate
	pool     chan *checkBuf
}

type checkBuf struct {
	cands  []fcap.Candidate
	picked []client.PreparedCandidate
	res    client.CheckResult
}

func newFcapTarget(addrs string, w *workload, x *ids, o targetOpts) (*fcapTarget, error) {
	cfg := client.DefaultConfig(strings.Split(addrs, ",")...)
	cfg.Timeout = o.timeout
	cfg.ConnsPerNode = o.conns
	cfg.TLS, cfg.Token = o.tls, o.token
	c, err := client.New(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		c.Close(context.Background())
		return nil, fmt.Errorf("fcap cluster at %s: %w", addrs, err)
	}
	t := &fcapTarget{c: c, pool: make(chan *checkBuf, 4096)}
	mode := fcap.Soft
	if w.Mode == "strict" {
		mode = fcap.Strict
	}
	for _, id := range x.campaigns {
		t.campaigns = append(t.campaigns, fcap.Cap{Scope: "campaign", ID: id, Limit: w.Limit, Window: fcap.Millis(w.Window), Mode: mode})
	}
	if o.prepared {
		t.prepared = make([]client.PreparedCandidate, len(t.campaigns))
		for i := range t.campaigns {
			p, err := client.PrepareCandidate(fcap.Candidate{Caps: t.campaigns[i : i+1]})
			if err != nil {
				c.Close(context.Background())
				return nil, fmt.Errorf("campaign %d: %w", i, err)
			}
			t.prepared[i] = p
		}
	}
	return t, nil
}

func (t *fcapTarget) Name() string { return "fcap" }

// CheckVariant says how Check asks: "prepared" (--prepared), or "" for
// CheckInto.
func (t *fcapTarget) CheckVariant() string {
	if t.prepared != nil {
		return "prepared"
	}
	return ""
}

func (t *fcapTarget) Allow(ctx context.Context, viewer string, campaign int, now int64) (bool, error) {
	v, err := t.c.Allow(ctx, viewer, t.campaigns[campaign:campaign+1], client.At(now))
	if err != nil {
		return false, err
	}
	if v.Failed() {
		return v.Allowed, errFailedOver
	}
	return v.Allowed, nil
}

var errFailedOver = errors.New("answered by the failure policy")

func (t *fcapTarget) Check(ctx context.Context, viewer string, campaigns []int, now int64) (int, error) {
	var b *checkBuf
	select {
	case b = <-t.pool:
	default:
		b = &checkBuf{}
	}
	defer func() {
		select {
		case t.pool <- b:
		default:
		}
	}()
	var err error
	if t.prepared != nil {
		b.picked = b.picked[:0]
		for _, c := range campaigns {
			b.picked = append(b.picked, t.prepared[c])
		}
		err = t.c.CheckPreparedInto(ctx, viewer, b.picked, &b.res, client.At(now))
	} else {
		b.cands = b.cands[:0]
		for _, c := range campaigns {
			b.cands = append(b.cands, fcap.Candidate{Caps: t.campaigns[c : c+1]})
		}
		err = t.c.CheckInto(ctx, viewer, b.cands, &b.res, client.At(now))
	}
	if err != nil {
		return 0, err
	}
	allowed, failed := 0, false
	for _, v := range b.res.Verdicts {
		if v.Allowed {
			allowed++
		}
		failed = failed || v.Failed()
	}
	if failed {
		return allowed, errFailedOver
	}
	return allowed, nil
}

func (t *fcapTarget) Record(_ context.Context, viewer string, campaign int, id string, now int64) error {
	return t.c.Record(viewer, fcap.Impression{ID: id, Time: now, Caps: t.campaigns[campaign : campaign+1]})
}

func (t *fcapTarget) Failed() int64 { return t.c.Stats().FailedOver }

// hedgeCount is a client's hedged requests so far.
type hedgeCount struct{ sent, won int64 }

func (t *fcapTarget) hedges() hedgeCount {
	s := t.c.Stats()
	return hedgeCount{sent: s.HedgesSent, won: s.HedgesWon}
}

// hedgesOf returns a target's hedged requests so far, zero for a target
// that does not hedge.
func hedgesOf(t target) hedgeCount {
	if h, ok := t.(interface{ hedges() hedgeCount }); ok {
		return h.hedges()
	}
	return hedgeCount{}
}

func (t *fcapTarget) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return t.c.Close(ctx)
}

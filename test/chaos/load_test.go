package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime/trace"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
)

// The ad server's caps. 100 candidates; each has a creative cap so large
// it never denies (its count is exactly what was acknowledged, the loss
// check), a campaign cap (3 of 10 campaigns strict with a low limit, the
// others soft) and an advertiser cap.
const (
	numCandidates = 100
	numCampaigns  = 10
	numStrict     = 3
	strictLimit   = 3
	softLimit     = 5
	day           = 24 * time.Hour
)

func candidates() []fcap.Candidate {
	out := make([]fcap.Candidate, numCandidates)
	for k := range out {
		camp := k % numCampaigns
		campaign := fcap.Cap{Scope: "campaign", ID: fmt.Sprint("camp-", camp), Limit: softLimit, Window: day}
		if camp < numStrict {
			campaign.Limit, campaign.Mode = strictLimit, fcap.Strict
		}
		out[k] = fcap.Candidate{Caps: []fcap.Cap{
			{Scope: "creative", ID: fmt.Sprint("cr-", k), Limit: fcap.MaxLimit, Window: day},
			campaign,
			{Scope: "advertiser", ID: fmt.Sprint("adv-", k%4), Limit: fcap.MaxLimit, Window: day},
		}}
	}
	return out
}

// key names one counter of one viewer in the ledger.
type key struct {
	viewer string
	cap    fcap.Cap
}

// ledger is what the ad server saw. A Record (an Allow, the
// acknowledged-write path) that the cluster granted counts on every cap
// of the candidate; one decided by the failure policy may or may not have
// counted.
type ledger struct {
	mu sync.Mutex
	// The fields below are guarded by mu.
	acked    map[key]int // granted by the cluster
	unknown  map[key]int // failed over: counted or not
	queued   map[key]int // impressions handed to client.Record (sent and retried in the background)
	errors   int         // calls that returned an error
	errs     []string    // the first few errors
	calls    int
	checks   int
	records  int            // Allow calls
	reported int            // impressions queued with client.Record
	refused  int            // Record calls the client's queue refused
	late     []lateCall     // calls past their deadline by more than lateSlack
	lateBy   map[string]int // late calls by operation and outcome
	ackedAt  map[key][]time.Time
	lat      []time.Duration // every call's latency
	failOpen []time.Time     // when a call got a fail-open verdict
	failShut int             // calls with a fail-closed verdict
	stale    int             // checks answered by a backup
	skipped  int             // ticks missed because every worker was busy
}

func newLedger() *ledger {
	return &ledger{acked: map[key]int{}, unknown: map[key]int{}, queued: map[key]int{}, ackedAt: map[key][]time.Time{}, lateBy: map[string]int{}}
}

// lateCall is a call that returned past its deadline.
type lateCall struct {
	start time.Time
	took  time.Duration
}

// lateSlack is how far past its deadline a call may return.
const lateSlack = time.Millisecond

func (l *ledger) call(op, outcome string, start time.Time, took, deadline time.Duration, err error) {
	l.calls++
	l.lat = append(l.lat, took)
	if took > deadline+lateSlack {
		l.late = append(l.late, lateCall{start, took})
		l.lateBy[op+" "+outcome]++
		// Marks the call in an execution trace (go test -trace): what its
		// goroutine waited for is then there to read.
		trace.Log(context.Background(), "late", fmt.Sprintf("%s %s took %v", op, outcome, took))
	}
	if err != nil {
		l.errors++
		if len(l.errs) < 5 {
			l.errs = append(l.errs, err.Error())
		}
	}
}

// load is the ad server: at a steady rate, a Zipf-chosen viewer gets a
// 100-candidate Check; about 3% of checks are followed by an impression
// of one allowed candidate, half of them recorded with Allow (check and
// record at decision time, acknowledged in the call) and half reported
// with Record (when the ad plays: queued, batched, retried in the
// background, idempotent on the impression id).
type load struct {
	c        *client.Client
	l        *ledger
	viewers  []string
	cands    []fcap.Candidate
	rate     int // checks per second
	deadline time.Duration
	seed     uint64
	watch    *watchdog // nil: no stack dumps
	impID    atomic.Uint64
}

func (ld *load) run(ctx context.Context, workers int) *sync.WaitGroup {
	var wg sync.WaitGroup
	ticks := make(chan struct{}, workers)
	wg.Go(func() {
		defer close(ticks) // the workers end once the ticks have
		every(ctx, time.Second/time.Duration(ld.rate), func(time.Time) {
			select {
			case ticks <- struct{}{}:
			default:
				ld.l.mu.Lock()
				ld.l.skipped++
				ld.l.mu.Unlock()
			}
		}).Wait()
	})
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(ld.seed, uint64(w)))
			zipf := rand.NewZipf(rng, 1.2, 1, uint64(len(ld.viewers)-1))
			res := &client.CheckResult{}
			for range ticks {
				ld.watch.begin(w)
				ld.request(rng, ld.viewers[zipf.Uint64()], res)
				ld.watch.end(w)
			}
		}()
	}
	return &wg
}

func (ld *load) request(rng *rand.Rand, viewer string, res *client.CheckResult) {
	start := time.Now()
	err := ld.c.CheckInto(context.Background(), viewer, ld.cands, res)
	took := time.Since(start)
	l := ld.l
	l.mu.Lock()
	l.checks++
	var allowed []int
	outcome := "answered"
	if err == nil {
		open, shut, stale := false, false, false
		for i, v := range res.Verdicts {
			open = open || v.FailOpen
			shut = shut || v.FailClosed
			stale = stale || v.Stale
			if v.Allowed && !v.Failed() {
				allowed = append(allowed, i)
			}
		}
		if open {
			l.failOpen = append(l.failOpen, start)
			trace.Log(context.Background(), "fail-open", fmt.Sprintf("check took %v", took))
		}
		if shut {
			l.failShut++
		}
		if stale {
			l.stale++
			outcome = "by a backup"
		}
		if open || shut {
			outcome = "by policy"
		}
	}
	l.call("check", outcome, start, took, ld.deadline, err)
	l.mu.Unlock()
	if len(allowed) == 0 || rng.IntN(100) >= 3 {
		return
	}
	caps := ld.cands[allowed[rng.IntN(len(allowed))]].Caps
	if rng.IntN(2) == 0 {
		imp := fcap.Impression{ID: fmt.Sprint("imp-", ld.seed, "-", ld.impID.Add(1)), Time: time.Now().UnixMilli(), Caps: caps}
		err := ld.c.Record(viewer, imp)
		l.mu.Lock()
		defer l.mu.Unlock()
		if err != nil {
			l.refused++
			return
		}
		l.reported++
		for _, c := range caps {
			l.queued[key{viewer, c}]++
		}
		return
	}
	start = time.Now()
	v, err := ld.c.Allow(context.Background(), viewer, caps)
	took = time.Since(start)
	l.mu.Lock()
	defer l.mu.Unlock()
	outcome = "answered"
	if v.Failed() {
		outcome = "by policy"
	}
	l.call("allow", outcome, start, took, ld.deadline, err)
	l.records++
	switch {
	case err != nil:
	case v.Failed():
		if v.FailOpen {
			l.failOpen = append(l.failOpen, start)
			trace.Log(context.Background(), "fail-open", fmt.Sprintf("allow took %v", took))
		} else {
			l.failShut++
		}
		for _, c := range caps {
			l.unknown[key{viewer, c}]++
		}
	case v.Allowed:
		for _, c := range caps {
			l.acked[key{viewer, c}]++
			l.ackedAt[key{viewer, c}] = append(l.ackedAt[key{viewer, c}], start)
		}
	}
}

// latencies returns the p99 and the max of every call.
func (l *ledger) latencies() (p99, top time.Duration) {
	l.mu.Lock()
	lat := slices.Clone(l.lat)
	l.mu.Unlock()
	if len(lat) == 0 {
		return 0, 0
	}
	slices.Sort(lat)
	return lat[len(lat)*99/100], lat[len(lat)-1]
}

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/fcap-io/fcap/client"
)

// run drives one target with one workload, closed loop (Concurrency
// callers as fast as the target answers) or open loop (Rate requests a
// second on a fixed schedule, latency measured from the scheduled start,
// so a target that falls behind pays for the queue it causes: no
// coordinated omission). The open loop also measures each call alone
// (from the moment a caller takes the request) and the generator's
// queue (scheduled start to that moment), so its own lateness is never
// mistaken for the target's.
type run struct {
	target      target
	w           *workload
	ids         *ids
	concurrency int
	rate        float64 // requests/s; 0 = closed loop
	warmup      time.Duration
	duration    time.Duration
	timeout     time.Duration // every call's deadline
	cutoff      time.Duration // calls longer than this count as past the client's cut-off; 0: cutoffOf(timeout)
	seed        uint64
	progress    io.Writer // nil: no progress line
	name        string    // the result's target name; "" is the target's own
	serverPIDs  []int     // the servers' processes, to tell their CPU from everyone else's
	rateBasis   string    // open loop: how the rate was chosen, for the report
	coarsePacer bool      // open loop: pace with time.Sleep, not the precise pacer (to compare)
	// paceGrain: open loop, requests closer together than this are
	// released in batches, one pacer wake per paceGrain (wakeAt); 0 wakes
	// for every request.
	paceGrain time.Duration
	phases    bool // trace fcap's calls (--phases)
}

// Result is what one run measured. Latencies are in microseconds.
type Result struct {
	Target      string  `json:"target"`
	Kind        string  `json:"kind"`              // fcap, null, redis-sliding, ...
	Variant     string  `json:"variant,omitempty"` // Redis checks: pipeline, lua or mget
	Workload    string  `json:"workload"`          // allow, check, mix; "load" for memory
	Mode        string  `json:"mode"`              // "closed", "open" or "memory"
	Concurrency int     `json:"concurrency"`
	Rate        float64 `json:"rate,omitempty"`       // open loop: requests/s asked for
	RateBasis   string  `json:"rate_basis,omitempty"` // open loop: how that rate was chosen
	Candidates  int     `json:"candidates"`
	Seconds     float64 `json:"seconds"`
	Requests    int64   `json:"requests"`
	Checks      int64   `json:"checks"` // candidate verdicts (Allow: 1 per request)
	Records     int64   `json:"records"`
	Allowed     int64   `json:"allowed"`
	Errors      int64   `json:"errors"`
	FailedOver  int64   `json:"failed_over"`
	// Hedges are the extra requests the target's client sent to a backup
	// because the owner was slow, in the measured window; HedgesWon
	// those the backup answered first (fcap only).
	Hedges    int64 `json:"hedges,omitempty"`
	HedgesWon int64 `json:"hedges_won,omitempty"`
	Skipped   int64 `json:"generator_skipped"` // open loop: slots the generator itself was too late to issue
	// PacerWakes is how many times the open loop's dispatcher slept for
	// a slot, warm-up included: one per request at low rates, one per
	// --pace-grain above them.
	PacerWakes int64 `json:"pacer_wakes,omitempty"`
	// Open loop: requests that waited in the queue past the per-call
	// timeout (the target was behind) and were given up unsent, as an
	// ad server would; their wait is in the latency figures, and they are
	// not in Requests.
	Expired    int64   `json:"expired_in_queue"`
	RequestsPS float64 `json:"requests_per_second"`
	ChecksPS   float64 `json:"checks_per_second"`
	// From each request's scheduled start (open loop) or its start
	// (closed loop) to its answer.
	P50  float64 `json:"p50_us"`
	P90  float64 `json:"p90_us"`
	P99  float64 `json:"p99_us"`
	P999 float64 `json:"p999_us"`
	Max  float64 `json:"max_us"`
	Mean float64 `json:"mean_us"`
	// Open loop: how long requests waited between their scheduled start
	// and a caller taking them (the generator woke late, every caller was
	// busy, or its goroutines were not scheduled); the rest of a
	// request's latency is the call.
	QueueP50  float64 `json:"queue_p50_us,omitempty"`
	QueueP99  float64 `json:"queue_p99_us,omitempty"`
	QueueP999 float64 `json:"queue_p999_us,omitempty"`
	// The call alone, from a caller taking the request to its answer (in
	// the closed loop, the same as P50...).
	CallP50  float64 `json:"call_p50_us"`
	CallP99  float64 `json:"call_p99_us"`
	CallP999 float64 `json:"call_p999_us"`
	// The client's cut-off (fcap: the call's deadline less the client's
	// default margin, when a soft check fails open) and the measured
	// calls that took longer than it: fcap's fail-opens land there, and
	// for the echo floor it is the share of round trips the machine
	// itself made too slow.
	CutoffUS    float64            `json:"cutoff_us"`
	OverCutoff  int64              `json:"over_cutoff"`
	Percentiles map[string]float64 `json:"percentiles_us"` // for the latency curve
	// The machine during the measured window (Linux /proc/stat): how busy
	// it was and how much CPU the hypervisor stole.
	HostBusyPct  float64 `json:"host_busy_pct"`
	HostIdlePct  float64 `json:"host_idle_pct"`
	HostStealPct float64 `json:"host_steal_pct"`
	// The load generator's own CPU (its process: workers, client
	// library, progress), 100 = one core busy the whole window. Near the
	// cores it may use, the generator, not the target, set the pace.
	GenCPUPct float64 `json:"generator_cpu_pct"`
	// With the servers' PIDs known (suite --server-pids): their CPU, and
	// what the rest of the machine used besides them and the generator,
	// 100 = one core. Other work on the machine shows up here.
	ServerCPUPct float64 `json:"server_cpu_pct,omitempty"`
	OtherCPUPct  float64 `json:"other_cpu_pct,omitempty"`
	Attempts     int     `json:"attempts,omitempty"` // suite: runs made to get one with the machine otherwise quiet
	// Memory is set for the memory figure (Mode "memory") only.
	Memory *MemResult `json:"memory,omitempty"`
	// Rounds is how many runs, interleaved with another target's, this
	// result merges (see --floor-rounds); 0 or 1: one run.
	Rounds int `json:"rounds,omitempty"`
	// EchoProcs is set on a floor over several echo processes (see
	// --echo-procs): how many, each call going to one of them by its
	// viewer, as fcap's client sends a check to its viewer's owner.
	EchoProcs int `json:"echo_procs,omitempty"`
	// EchoWorkUS and EchoCallerWorkUS are set on a floor that does work
	// (--echo-work, --echo-caller-work): microseconds of CPU its server
	// spent per request, and its caller per call before sending.
	EchoWorkUS       float64 `json:"echo_work_us,omitempty"`
	EchoCallerWorkUS float64 `json:"echo_caller_work_us,omitempty"`
	// Phases, with --phases, are where fcap's calls spent their time
	// (the client's CallTrace of each; see phases.go).
	Phases []PhaseFigure `json:"phases,omitempty"`

	h  *hists      // the histograms behind the latency figures; nil when read from JSON
	ph *phaseHists // behind Phases, likewise
}

// Label names the result's series in tables and charts: the target, and
// the check variant when there is one.
func (r *Result) Label() string {
	if r.Variant != "" {
		return r.Target + " (" + r.Variant + ")"
	}
	return r.Target
}

// curvePercentiles are the points of the latency curve kept per result.
var curvePercentiles = []float64{0, 10, 20, 30, 40, 50, 60, 70, 75, 80, 85, 90, 92, 94, 95, 96, 97, 98,
	99, 99.2, 99.4, 99.5, 99.6, 99.7, 99.8, 99.9, 99.92, 99.94, 99.95, 99.96, 99.97, 99.98, 99.99, 99.995, 99.999, 100}

// worker state: its own histogram of the measured window, merged at the
// end. The progress line reads a shared histogram fed by every 16th
// measured request.
type worker struct {
	g      *gen
	total  *hdrhistogram.Histogram
	call   *hdrhistogram.Histogram // pickup to answer
	queued *hdrhistogram.Histogram // open loop: scheduled start to pickup
	over   int64                   // measured calls past the cut-off
	n      int
	viewer string // of the current request
	// With --phases: the client's trace of the current call, the
	// context that carries it (made once, reused), and the figures.
	trace client.CallTrace
	tctx  context.Context
	ph    *phaseHists
}

// observe records a measured latency, and every 16th in the progress
// line's sample.
func (wk *worker) observe(us int64, recent *sampled) {
	wk.total.RecordValue(max(us, 1))
	if wk.n++; wk.n%16 == 0 {
		recent.mu.Lock()
		recent.h.RecordValue(max(us, 1))
		recent.mu.Unlock()
	}
}

// Latencies are recorded in microseconds, 1us to 60s, 3 significant
// digits.
func newHist() *hdrhistogram.Histogram { return hdrhistogram.New(1, 60_000_000, 3) }

type sampled struct {
	mu sync.Mutex
	// h is guarded by mu.
	h *hdrhistogram.Histogram
}

type counters struct {
	issued                                             atomic.Int64 // every request, warm-up included
	skipped                                            atomic.Int64 // open loop: slots the generator missed by over skipLate
	wakes                                              atomic.Int64 // open loop: the dispatcher's sleeps, warm-up included
	expired                                            atomic.Int64 // open loop: given up in the queue (measured)
	requests, checks, records, allowed, errors, failed atomic.Int64 // measured ones
}

func (r *run) exec() (*Result, error) {
	ctx := context.Background()
	n := r.concurrency
	if r.rate > 0 {
		// Open loop needs enough callers that a normal answer never delays
		// the next scheduled start; when the target stalls they all wait
		// and the starts they miss are charged to it.
		n = max(n, 1)
	}
	workers := make([]*worker, n)
	for i := range workers {
		wk := &worker{g: newGen(r.w, r.ids, r.seed, i), total: newHist(), call: newHist(), queued: newHist()}
		if r.phases {
			// The fcap client fills the trace, and so does the echo
			// floor's caller (target_echo.go), its own way.
			echoTracing.Store(true)
			wk.ph = newPhaseHists()
			wk.tctx = context.WithValue(client.WithCallTrace(ctx, &wk.trace), echoTraceKey{}, &wk.trace)
		}
		workers[i] = wk
	}
	recent := &sampled{h: newHist()}
	var c counters
	start := time.Now()
	measureFrom := start.Add(r.warmup)
	end := measureFrom.Add(r.duration)
	interval := time.Duration(0)
	if r.rate > 0 {
		interval = time.Duration(float64(time.Second) / r.rate)
	}
	runID := uint64(start.UnixNano())
	cutoff := r.cutoff
	if cutoff <= 0 {
		cutoff = cutoffOf(r.timeout)
	}

	stopProgress := make(chan struct{})
	var progressDone sync.WaitGroup
	if r.progress != nil {
		progressDone.Add(1)
		go func() {
			defer progressDone.Done()
			r.report(recent, &c, start, measureFrom, stopProgress)
		}()
	}

	var cpuStart, cpuEnd cpuTimes
	var genStart, genEnd, srvStart, srvEnd time.Duration
	var wallStart, wallEnd time.Time
	var marks sync.WaitGroup
	var hedgeStart, hedgeEnd hedgeCount
	marks.Add(1)
	go func() { // CPU figures of the measured window only
		defer marks.Done()
		time.Sleep(time.Until(measureFrom))
		cpuStart, genStart, srvStart, wallStart = readCPUTimes(), selfCPU(), procsCPU(r.serverPIDs), time.Now()
		hedgeStart = hedgesOf(r.target)
		time.Sleep(time.Until(end))
		cpuEnd, genEnd, srvEnd, wallEnd = readCPUTimes(), selfCPU(), procsCPU(r.serverPIDs), time.Now()
		hedgeEnd = hedgesOf(r.target)
	}()
	// Open loop: one dispatcher releases each request at its scheduled
	// time onto a queue that idle workers take from. It sleeps on a
	// precise timer (pacer): the Go runtime's own timers wake a process
	// that has nothing else to do up to a millisecond late, which at
	// 2,000/s was the generator's tail, not the target's. A request's
	// latency counts from its scheduled start; the wait until a worker
	// takes it is the queue, reported apart: if every worker is busy, that
	// wait, caused by the target, is charged to it (no coordinated
	// omission). When the dispatcher itself wakes more than skipLate late
	// (it shares the machine with the target, or paused for GC), the
	// slots it missed are skipped and counted, not released in a burst
	// that would charge the generator's stall to the target.
	//
	// A precise wake costs this VM 15-20 us of CPU (the timer is
	// programmed through the hypervisor), a third of the generator's core
	// at 24,000/s, in the floor's rounds as in the target's. With requests
	// closer together than paceGrain the dispatcher wakes once per
	// paceGrain and releases together the ones due by then (wakeAt): a
	// request waits up to paceGrain for its release, which counts in its
	// queue time and its latency from the schedule, not in its call time.
	var queue chan time.Time
	if interval > 0 {
		queue = make(chan time.Time, 1<<16)
		go func() {
			defer close(queue)
			p := newPacer(r.coarsePacer)
			defer p.Close()
			for i := int64(0); ; i++ {
				scheduled := start.Add(time.Duration(i) * interval)
				if scheduled.After(end) {
					return
				}
				if d := time.Until(scheduled); d > 0 {
					p.sleepUntil(wakeAt(scheduled, interval, r.paceGrain))
					c.wakes.Add(1)
				} else if d < -skipLate {
					c.skipped.Add(1)
					continue
				}
				select {
				case queue <- scheduled:
				default:
					c.errors.Add(1) // the target is so far behind the queue is full
				}
			}
		}()
	}
	var wg sync.WaitGroup
	for _, wk := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				var began, picked time.Time
				if queue != nil {
					sched, ok := <-queue
					if !ok {
						return
					}
					began, picked = sched, time.Now()
					wait := picked.Sub(sched)
					if !sched.Before(measureFrom) {
						wk.queued.RecordValue(max(wait.Microseconds(), 1))
					}
					if wait > r.timeout {
						// Its caller's deadline passed while it queued.
						c.issued.Add(1)
						if !sched.Before(measureFrom) {
							c.expired.Add(1)
							wk.observe(wait.Microseconds(), recent)
						}
						continue
					}
				} else {
					began = time.Now()
					picked = began
					if began.After(end) {
						return
					}
				}
				measured := !began.Before(measureFrom)
				sctx := ctx
				if wk.ph != nil {
					wk.trace, sctx = client.CallTrace{}, wk.tctx
				}
				rec := r.step(sctx, wk, &c, measured)
				if measured {
					done := time.Now()
					if wk.ph != nil {
						wk.ph.add(picked, done, &wk.trace)
					}
					call := done.Sub(picked)
					wk.call.RecordValue(max(call.Microseconds(), 1))
					if call > cutoff {
						wk.over++
					}
					wk.observe(done.Sub(began).Microseconds(), recent)
				}
				if rec >= 0 {
					r.record(ctx, wk, &c, measured, rec, runID)
				}
			}
		}()
	}
	wg.Wait()
	marks.Wait()
	close(stopProgress)
	progressDone.Wait()

	h, q, call := newHist(), newHist(), newHist()
	var over int64
	var ph *phaseHists
	for _, wk := range workers {
		h.Merge(wk.total)
		q.Merge(wk.queued)
		call.Merge(wk.call)
		over += wk.over
		if wk.ph != nil {
			if ph == nil {
				ph = newPhaseHists()
			}
			ph.merge(wk.ph)
		}
	}
	res := &Result{
		Target: r.target.Name(), Kind: r.target.Name(), Workload: r.w.Kind, Mode: "closed", Concurrency: r.concurrency,
		Candidates: r.w.Candidates, Seconds: r.duration.Seconds(),
		Requests: c.requests.Load(), Checks: c.checks.Load(), Records: c.records.Load(),
		Allowed: c.allowed.Load(), Errors: c.errors.Load(), FailedOver: c.failed.Load(), Skipped: c.skipped.Load(), PacerWakes: c.wakes.Load(),
		Expired:  c.expired.Load(),
		CutoffUS: float64(cutoff.Microseconds()), OverCutoff: over,
		Hedges: hedgeEnd.sent - hedgeStart.sent, HedgesWon: hedgeEnd.won - hedgeStart.won,
	}
	if r.name != "" {
		res.Target = r.name
	}
	if r.w.Kind == "allow" {
		res.Candidates = 1
	} else if v, ok := r.target.(interface{ CheckVariant() string }); ok {
		res.Variant = v.CheckVariant()
	}
	if r.rate > 0 {
		res.Mode, res.Rate, res.RateBasis = "open", r.rate, r.rateBasis
	}
	res.setLatencies(&hists{total: h, call: call, queue: q})
	res.setPhases(ph)
	res.HostBusyPct, res.HostIdlePct, res.HostStealPct = cpuStart.percents(cpuEnd)
	if wall := wallEnd.Sub(wallStart); wall > 0 {
		// Over the readings' own interval: a busy generator can wake
		// the reader late.
		res.GenCPUPct = 100 * (genEnd - genStart).Seconds() / wall.Seconds()
		if len(r.serverPIDs) > 0 {
			res.ServerCPUPct = 100 * (srvEnd - srvStart).Seconds() / wall.Seconds()
			busyCores := res.HostBusyPct / 100 * float64(cpuEnd.cpus)
			res.OtherCPUPct = max(0, 100*busyCores-res.GenCPUPct-res.ServerCPUPct)
		}
	}
	res.RequestsPS = float64(res.Requests) / res.Seconds
	res.ChecksPS = float64(res.Checks) / res.Seconds
	if res.Requests == 0 {
		return res, errors.New("no request completed in the measured window")
	}
	return res, nil
}

// setPhases sets the result's --phases figures from ph and keeps ph
// (for merging rounds); none when no call was traced (a target other
// than fcap's, or every call answered by the failure policy).
func (res *Result) setPhases(ph *phaseHists) {
	res.ph, res.Phases = nil, nil
	if ph == nil || ph.h[0].TotalCount() == 0 {
		return
	}
	res.ph, res.Phases = ph, ph.figures(res.CallP99)
}

// hists are a result's latency histograms.
type hists struct {
	total, call, queue *hdrhistogram.Histogram
}

// setLatencies sets the result's latency figures from h and keeps h
// (for merging rounds, see mergeResults).
func (res *Result) setLatencies(h *hists) {
	res.h = h
	res.P50, res.P90, res.P99 = float64(h.total.ValueAtQuantile(50)), float64(h.total.ValueAtQuantile(90)), float64(h.total.ValueAtQuantile(99))
	res.P999, res.Max, res.Mean = float64(h.total.ValueAtQuantile(99.9)), float64(h.total.Max()), h.total.Mean()
	res.CallP50, res.CallP99, res.CallP999 = float64(h.call.ValueAtQuantile(50)), float64(h.call.ValueAtQuantile(99)), float64(h.call.ValueAtQuantile(99.9))
	if res.Mode == "open" {
		res.QueueP50, res.QueueP99, res.QueueP999 = float64(h.queue.ValueAtQuantile(50)), float64(h.queue.ValueAtQuantile(99)), float64(h.queue.ValueAtQuantile(99.9))
	}
	res.Percentiles = map[string]float64{}
	for _, q := range curvePercentiles {
		res.Percentiles[fmt.Sprint(q)] = float64(h.total.ValueAtQuantile(q))
	}
}

// defaultPaceGrain is --pace-grain's default: at most 5,000 precise
// wakes a second, a tenth of the generator's core on this VM, where one
// per request took a third of it at 24,000/s; rates up to 5,000/s keep
// a wake per request.
const defaultPaceGrain = 200 * time.Microsecond

// wakeAt is when the open loop's dispatcher wakes to release the request
// scheduled at t, requests being interval apart: at t, or, when they are
// closer together than grain, at t+grain-interval, when the requests due
// up to about grain after t are released with it. Never before t.
func wakeAt(t time.Time, interval, grain time.Duration) time.Time {
	if interval >= grain {
		return t
	}
	return t.Add(grain - interval)
}

// skipLate is how late the open loop's dispatcher may wake and still
// release a request: later than that, the generator, not the target,
// missed the slot.
const skipLate = time.Millisecond

// cutoffOf is when the fcap client, with the default margin, stops
// waiting for a call with the given deadline (client.Config.Margin: a
// tenth of it, at most 5ms).
func cutoffOf(timeout time.Duration) time.Duration {
	return timeout - min(timeout/10, 5*time.Millisecond)
}

// callContext is the context of one call: ctx bounded by --timeout, or
// ctx itself for a target that bounds its calls by --timeout on its own
// (selfTimed).
func (r *run) callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if selfTimed(r.target) {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, r.timeout)
}

// step issues one request of the workload and counts it if measured.
// In the mix it returns the campaign whose impression the caller records
// once it has taken the request's latency (an impression is reported
// after the ad plays, not on the ad request's path), else -1.
func (r *run) step(ctx context.Context, wk *worker, c *counters, measured bool) (record int) {
	g := wk.g
	wk.viewer = g.viewer()
	now := time.Now().UnixMilli()
	cctx, cancel := r.callContext(ctx)
	defer cancel()
	var err error
	var allowed, checks int
	record = -1
	switch r.w.Kind {
	case "allow":
		var ok bool
		ok, err = r.target.Allow(cctx, wk.viewer, g.campaigns(1)[0], now)
		checks = 1
		if ok {
			allowed = 1
		}
	default:
		camps := g.campaigns(r.w.Candidates)
		allowed, err = r.target.Check(cctx, wk.viewer, camps, now)
		checks = len(camps)
		if g.record() {
			record = camps[0]
		}
	}
	c.issued.Add(1)
	if !measured {
		return record
	}
	c.requests.Add(1)
	switch {
	case errors.Is(err, errFailedOver):
		c.failed.Add(1)
	case err != nil:
		c.errors.Add(1)
		return record
	}
	c.checks.Add(int64(checks))
	c.allowed.Add(int64(allowed))
	return record
}

// record reports an impression of campaign to the step's viewer.
func (r *run) record(ctx context.Context, wk *worker, c *counters, measured bool, campaign int, runID uint64) {
	cctx, cancel := r.callContext(ctx)
	defer cancel()
	err := r.target.Record(cctx, wk.viewer, campaign, wk.g.impressionID(runID), time.Now().UnixMilli())
	if err == nil && measured {
		c.records.Add(1)
	}
}

// report prints a progress line every second: rate, p99 over the last
// second (sampled), errors and fail-opens.
func (r *run) report(recent *sampled, c *counters, start, measureFrom time.Time, stop <-chan struct{}) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	var lastReq, lastErr, lastFail, lastExp int64
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			recent.mu.Lock()
			p99 := recent.h.ValueAtQuantile(99)
			recent.h.Reset()
			recent.mu.Unlock()
			req, errs, fails, exp := c.issued.Load(), c.errors.Load(), c.failed.Load(), c.expired.Load()
			phase := "measure"
			if now.Before(measureFrom) {
				phase = "warmup"
			}
			fmt.Fprintf(r.progress, "%6.1fs %-7s %9.0f req/s  p99 %8dus  errors %d  fail-open %d",
				now.Sub(start).Seconds(), phase, float64(req-lastReq), p99, errs-lastErr, fails-lastFail)
			if r.rate > 0 {
				fmt.Fprintf(r.progress, "  expired %d", exp-lastExp)
			}
			fmt.Fprintln(r.progress)
			lastReq, lastErr, lastFail, lastExp = req, errs, fails, exp
		}
	}
}

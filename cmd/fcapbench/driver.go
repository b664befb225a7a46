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
)

// run drives one target with one workload, closed loop (Concurrency
// callers as fast as the target answers) or open loop (Rate requests a
// second on a fixed schedule, latency measured from the scheduled start,
// so a target that falls behind pays for the queue it causes: no
// coordinated omission).
type run struct {
	target      target
	w           *workload
	ids         *ids
	concurrency int
	rate        float64 // requests/s; 0 = closed loop
	warmup      time.Duration
	duration    time.Duration
	timeout     time.Duration
	seed        uint64
	progress    io.Writer // nil: no progress line
}

// Result is what one run measured. Latencies are in microseconds.
type Result struct {
	Target      string             `json:"target"`
	Workload    string             `json:"workload"`
	Mode        string             `json:"mode"` // "closed" or "open"
	Concurrency int                `json:"concurrency"`
	Rate        float64            `json:"rate,omitempty"` // open loop: requests/s asked for
	Candidates  int                `json:"candidates"`
	Seconds     float64            `json:"seconds"`
	Requests    int64              `json:"requests"`
	Checks      int64              `json:"checks"` // candidate verdicts (Allow: 1 per request)
	Records     int64              `json:"records"`
	Allowed     int64              `json:"allowed"`
	Errors      int64              `json:"errors"`
	FailedOver  int64              `json:"failed_over"`
	Skipped     int64              `json:"generator_skipped"` // open loop: slots the generator itself was too late to issue
	RequestsPS  float64            `json:"requests_per_second"`
	ChecksPS    float64            `json:"checks_per_second"`
	P50         float64            `json:"p50_us"`
	P90         float64            `json:"p90_us"`
	P99         float64            `json:"p99_us"`
	P999        float64            `json:"p999_us"`
	Max         float64            `json:"max_us"`
	Mean        float64            `json:"mean_us"`
	Percentiles map[string]float64 `json:"percentiles_us"` // for the latency curve
	// The machine during the measured window (Linux /proc/stat): how busy
	// it was and how much CPU the hypervisor stole.
	HostBusyPct  float64 `json:"host_busy_pct"`
	HostIdlePct  float64 `json:"host_idle_pct"`
	HostStealPct float64 `json:"host_steal_pct"`
}

// worker state: its own histogram of the measured window, merged at the
// end. The progress line reads a shared histogram fed by every 16th
// measured request.
type worker struct {
	g     *gen
	total *hdrhistogram.Histogram
	n     int
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
	skipped                                            atomic.Int64 // open loop: slots the generator missed
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
		workers[i] = &worker{g: newGen(r.w, r.ids, r.seed, i), total: newHist()}
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
	var marks sync.WaitGroup
	marks.Add(1)
	go func() { // CPU figures of the measured window only
		defer marks.Done()
		time.Sleep(time.Until(measureFrom))
		cpuStart = readCPUTimes()
		time.Sleep(time.Until(end))
		cpuEnd = readCPUTimes()
	}()
	// Open loop: one dispatcher releases each request at its scheduled
	// time (to about 200us) onto a queue that idle workers take from. A
	// request counts from its release; if every worker is busy it waits
	// in the queue, and that wait, caused by the target, is charged to it
	// (no coordinated omission). When the dispatcher itself wakes more
	// than 1ms late (it shares the machine with the target), the slots it
	// missed are skipped and counted, not released in a burst that would
	// charge the generator's delay to the target.
	var queue chan time.Time
	if interval > 0 {
		queue = make(chan time.Time, 1<<16)
		go func() {
			defer close(queue)
			for i := int64(0); ; i++ {
				scheduled := start.Add(time.Duration(i) * interval)
				if scheduled.After(end) {
					return
				}
				d := time.Until(scheduled)
				if d > 200*time.Microsecond {
					time.Sleep(d)
				} else if d < -time.Millisecond {
					c.skipped.Add(1)
					continue
				}
				release := time.Now()
				if release.Before(scheduled) {
					release = scheduled
				}
				select {
				case queue <- release:
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
				var began time.Time
				if queue != nil {
					rel, ok := <-queue
					if !ok {
						return
					}
					began = rel
				} else {
					began = time.Now()
					if began.After(end) {
						return
					}
				}
				measured := !began.Before(measureFrom)
				r.step(ctx, wk, &c, measured, runID)
				lat := time.Since(began).Microseconds()
				if measured {
					wk.total.RecordValue(max(lat, 1))
					if wk.n++; wk.n%16 == 0 {
						recent.mu.Lock()
						recent.h.RecordValue(max(lat, 1))
						recent.mu.Unlock()
					}
				}
			}
		}()
	}
	wg.Wait()
	marks.Wait()
	close(stopProgress)
	progressDone.Wait()

	h := newHist()
	for _, wk := range workers {
		h.Merge(wk.total)
	}
	res := &Result{
		Target: r.target.Name(), Workload: r.w.Kind, Mode: "closed", Concurrency: r.concurrency,
		Candidates: r.w.Candidates, Seconds: r.duration.Seconds(),
		Requests: c.requests.Load(), Checks: c.checks.Load(), Records: c.records.Load(),
		Allowed: c.allowed.Load(), Errors: c.errors.Load(), FailedOver: c.failed.Load(), Skipped: c.skipped.Load(),
		P50: float64(h.ValueAtQuantile(50)), P90: float64(h.ValueAtQuantile(90)), P99: float64(h.ValueAtQuantile(99)),
		P999: float64(h.ValueAtQuantile(99.9)), Max: float64(h.Max()), Mean: h.Mean(),
		Percentiles: map[string]float64{},
	}
	if r.w.Kind == "allow" {
		res.Candidates = 1
	}
	if r.rate > 0 {
		res.Mode, res.Rate = "open", r.rate
	}
	res.HostBusyPct, res.HostIdlePct, res.HostStealPct = cpuStart.percents(cpuEnd)
	res.RequestsPS = float64(res.Requests) / res.Seconds
	res.ChecksPS = float64(res.Checks) / res.Seconds
	for _, q := range []float64{0, 10, 25, 50, 75, 90, 95, 99, 99.5, 99.9, 99.95, 99.99, 100} {
		res.Percentiles[fmt.Sprint(q)] = float64(h.ValueAtQuantile(q))
	}
	if res.Requests == 0 {
		return res, errors.New("no request completed in the measured window")
	}
	return res, nil
}

// step issues one request of the workload and counts it if measured.
func (r *run) step(ctx context.Context, wk *worker, c *counters, measured bool, runID uint64) {
	g := wk.g
	viewer := g.viewer()
	now := time.Now().UnixMilli()
	cctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	var err error
	var allowed, checks int
	switch r.w.Kind {
	case "allow":
		var ok bool
		ok, err = r.target.Allow(cctx, viewer, g.campaigns(1)[0], now)
		checks = 1
		if ok {
			allowed = 1
		}
	default:
		camps := g.campaigns(r.w.Candidates)
		allowed, err = r.target.Check(cctx, viewer, camps, now)
		checks = len(camps)
		if g.record() {
			if rerr := r.target.Record(cctx, viewer, camps[0], g.impressionID(runID), now); rerr == nil && measured {
				c.records.Add(1)
			}
		}
	}
	c.issued.Add(1)
	if !measured {
		return
	}
	c.requests.Add(1)
	switch {
	case errors.Is(err, errFailedOver):
		c.failed.Add(1)
	case err != nil:
		c.errors.Add(1)
		return
	}
	c.checks.Add(int64(checks))
	c.allowed.Add(int64(allowed))
}

// report prints a progress line every second: rate, p99 over the last
// second (sampled), errors and fail-opens.
func (r *run) report(recent *sampled, c *counters, start, measureFrom time.Time, stop <-chan struct{}) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	var lastReq, lastErr, lastFail int64
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			recent.mu.Lock()
			p99 := recent.h.ValueAtQuantile(99)
			recent.h.Reset()
			recent.mu.Unlock()
			req, errs, fails := c.issued.Load(), c.errors.Load(), c.failed.Load()
			phase := "measure"
			if now.Before(measureFrom) {
				phase = "warmup"
			}
			fmt.Fprintf(r.progress, "%6.1fs %-7s %9.0f req/s  p99 %8dus  errors %d  fail-open %d\n",
				now.Sub(start).Seconds(), phase, float64(req-lastReq), p99, errs-lastErr, fails-lastFail)
			lastReq, lastErr, lastFail = req, errs, fails
		}
	}
}

package main

import (
	"fmt"
	"io"
	"math"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/fcap-io/fcap/client"
)

// --phases: where fcap's calls spent their time, from the client's
// CallTrace of every measured call (client.WithCallTrace): the figures
// of each step, and what each step took on average in the calls at or
// past the call p99, the tail the floor's ratio is about.

// phaseNames name the steps of a call, in order.
var phaseNames = []string{
	"draw and encode", // the caller took the request; the workload's draw, the client's table and frame, until queued on the connection
	"to the write",    // queued until a write carrying it began: the writing caller's yield, or writes ahead of it
	"write",           // that write's system call
	"wire and node",   // the write's end until the client's reader took the answer off the socket
	"resume",          // the reader took it until the caller ran again with it decoded
	"after",           // the caller's own bookkeeping until the call's latency was taken
}

const nPhases = 6

// tailBins are quarter-octave bins of call latency, in microseconds:
// bin b holds calls of 2^(b/4) us up to the next. Each bin sums its
// calls' phases, so the tail's split can be read once the p99 is known.
const tailBins = 4 * 27 // up to 2^27 us

func tailBin(us int64) int {
	if us < 1 {
		return 0
	}
	return min(int(4*math.Log2(float64(us))), tailBins-1)
}

// phaseHists are a run's (or a worker's) phase figures.
type phaseHists struct {
	h    [nPhases]*hdrhistogram.Histogram
	bins [tailBins]struct {
		n   int64
		sum [nPhases]int64
	}
}

func newPhaseHists() *phaseHists {
	p := &phaseHists{}
	for i := range p.h {
		p.h[i] = newHist()
	}
	return p
}

// add records one call: picked when a caller took it, done when its
// latency was taken, tr the client's trace of it. A call the client
// answered by its failure policy has no trace and is not recorded.
func (p *phaseHists) add(picked, done time.Time, tr *client.CallTrace) {
	if tr.Resumed.IsZero() {
		return
	}
	// The writer notes its write's start and end once the write returned.
	// On a loaded process the answer can be read before that (the writer
	// was not scheduled again in time): the end is then unknown, or noted
	// after the answer came, and the write is not told apart from the
	// wire, which counts from the write's start; no stamp at all (the
	// caller resumed first) leaves the wire counting from the queue. Taken
	// as they are, the wire would read 0 (an end past the answer, clamped)
	// or centuries (a zero start): in a tail of a few such calls, its mean
	// would say the wire took nothing.
	writing, written := tr.Writing, tr.Written
	if writing.IsZero() {
		writing = tr.Queued
	}
	if written.IsZero() || written.After(tr.Read) {
		written = writing
	}
	steps := [nPhases + 1]time.Time{picked, tr.Queued, writing, written, tr.Read, tr.Resumed, done}
	var us [nPhases]int64
	for i := range us {
		us[i] = max(steps[i+1].Sub(steps[i]).Microseconds(), 0)
		p.h[i].RecordValue(max(us[i], 1))
	}
	b := &p.bins[tailBin(done.Sub(picked).Microseconds())]
	b.n++
	for i, v := range us {
		b.sum[i] += v
	}
}

func (p *phaseHists) merge(o *phaseHists) {
	for i := range p.h {
		p.h[i].Merge(o.h[i])
	}
	for b := range p.bins {
		p.bins[b].n += o.bins[b].n
		for i := range p.bins[b].sum {
			p.bins[b].sum[i] += o.bins[b].sum[i]
		}
	}
}

// PhaseFigure is one step of fcap's calls (--phases), in microseconds:
// its percentiles over every traced call, and its mean over the calls at
// or past the call p99 (by quarter-octave bins: the calls in the p99's
// bin and above).
type PhaseFigure struct {
	Name     string  `json:"name"`
	P50      float64 `json:"p50_us"`
	P99      float64 `json:"p99_us"`
	P999     float64 `json:"p999_us"`
	TailMean float64 `json:"tail_mean_us"`
}

// heldFrom reports whether any call fell in bin b or above.
func (p *phaseHists) heldFrom(b int) bool {
	for ; b < tailBins; b++ {
		if p.bins[b].n > 0 {
			return true
		}
	}
	return false
}

// figures returns the phases' figures, the tail being the calls of
// callP99 microseconds or more.
func (p *phaseHists) figures(callP99 float64) []PhaseFigure {
	var n int64
	var sum [nPhases]int64
	from := tailBin(int64(callP99))
	// The histogram's p99 is the top of its bucket: with few calls it can
	// lie above every call's bin. The tail is then the slowest bin held.
	for from > 0 && !p.heldFrom(from) {
		from--
	}
	for b := from; b < tailBins; b++ {
		n += p.bins[b].n
		for i := range sum {
			sum[i] += p.bins[b].sum[i]
		}
	}
	out := make([]PhaseFigure, nPhases)
	for i := range out {
		h := p.h[i]
		out[i] = PhaseFigure{Name: phaseNames[i], P50: float64(h.ValueAtQuantile(50)), P99: float64(h.ValueAtQuantile(99)), P999: float64(h.ValueAtQuantile(99.9))}
		if n > 0 {
			out[i].TailMean = float64(sum[i]) / float64(n)
		}
	}
	return out
}

// printPhases prints the phases of the results that have them.
func printPhases(w io.Writer, results []*Result) {
	for _, r := range results {
		if len(r.Phases) == 0 {
			continue
		}
		fmt.Fprintf(w, "\nphases of %s at %.0f/s (--phases; call p99 %s): where its calls spent their time\n", r.Label(), r.Rate, fmtLatency(r.CallP99))
		fmt.Fprintf(w, "%-18s %10s %10s %10s %16s\n", "step", "p50 us", "p99 us", "p999 us", "tail mean us")
		for _, f := range r.Phases {
			fmt.Fprintf(w, "%-18s %10.0f %10.0f %10.0f %16.1f\n", f.Name, f.P50, f.P99, f.P999, f.TailMean)
		}
	}
}

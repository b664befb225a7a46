package chaos

import (
	"context"
	"fmt"
	"math"
	"runtime/metrics"
	"slices"
	"sync"
	"time"
)

// lagMeter measures how late this process's goroutines wake from a
// timer: a call can only return by its deadline if the client's goroutine
// runs when its timer fires, so a late call with an equally late wake-up
// says the machine was starved (2 shared vCPUs, race-built processes),
// not that the client ignored its deadline.
type lagMeter struct {
	mu sync.Mutex
	// The fields below are guarded by mu.
	lags []time.Duration
	woke []time.Time // when each probe ran, in order (lags[i] late)
	at   []time.Time // when each lag over lateSlack was seen
	gc0  gcFigures   // the process's GC figures when it started
	// sorted: woke (with lags) is in time order; probes append out of it.
	sorted bool
}

// gcFigures are the test process's garbage collector's running totals.
type gcFigures struct {
	cycles              uint64
	pause, assist, work float64 // seconds: stop-the-world pauses, mutator assists, all GC CPU
}

func readGC() gcFigures {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}, {Name: "/sched/pauses/total/gc:seconds"},
		{Name: "/cpu/classes/gc/mark/assist:cpu-seconds"}, {Name: "/cpu/classes/gc/total:cpu-seconds"}}
	metrics.Read(s)
	var f gcFigures
	if s[0].Value.Kind() == metrics.KindUint64 {
		f.cycles = s[0].Value.Uint64()
	}
	if s[1].Value.Kind() == metrics.KindFloat64Histogram {
		h := s[1].Value.Float64Histogram()
		for i, c := range h.Counts {
			if lo := h.Buckets[i]; c > 0 && lo > 0 && !math.IsInf(lo, 0) {
				f.pause += float64(c) * lo // lower bound of each bucket: an underestimate
			}
		}
	}
	if s[2].Value.Kind() == metrics.KindFloat64 {
		f.assist = s[2].Value.Float64()
	}
	if s[3].Value.Kind() == metrics.KindFloat64 {
		f.work = s[3].Value.Float64()
	}
	return f
}

// gc describes the process's garbage collection since run.
func (m *lagMeter) gc() string {
	now := readGC()
	return fmt.Sprintf("%d GC cycles, stop-the-world pauses >= %.1f ms in all, %.2f s of CPU in mutator assists, %.2f s of GC CPU",
		now.cycles-m.gc0.cycles, (now.pause-m.gc0.pause)*1000, now.assist-m.gc0.assist, now.work-m.gc0.work)
}

// probes is how many goroutines measure the lag, their 5 ms periods
// staggered: goroutines on two Ps are not starved alike, and one probe
// samples too rarely to see a short stall on the other P.
const probes = 4

func (m *lagMeter) run(ctx context.Context) *sync.WaitGroup {
	m.gc0 = readGC()
	var wg sync.WaitGroup
	for i := range probes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			const period = 5 * time.Millisecond
			first := period + time.Duration(i)*period/probes
			t := time.NewTimer(first)
			defer t.Stop()
			due := time.Now().Add(first)
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					// Now, not the time the channel carries: that is when the
					// timer fired, and a goroutine can wait far longer than
					// that for a CPU to run it.
					lag := time.Since(due)
					m.mu.Lock()
					m.lags = append(m.lags, lag)
					m.woke = append(m.woke, due.Add(lag))
					if lag > lateSlack {
						m.at = append(m.at, due)
					}
					m.sorted = false
					m.mu.Unlock()
					due = time.Now().Add(period)
					t.Reset(period)
				}
			}
		}()
	}
	return &wg
}

// stats returns the p99 and the max lag and when lags over lateSlack were
// seen.
func (m *lagMeter) stats() (p99, top time.Duration, late []time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.lags) == 0 {
		return 0, 0, nil
	}
	l := slices.Clone(m.lags)
	slices.Sort(l)
	return l[len(l)*99/100], l[len(l)-1], slices.Clone(m.at)
}

// worstAround is the largest wake-up lag of a probe that ran between from
// and to (or the first one after to: a starved process may run no probe
// inside a short span at all), over every probe.
func (m *lagMeter) worstAround(from, to time.Time) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.sorted {
		idx := make([]int, len(m.woke))
		for i := range idx {
			idx[i] = i
		}
		slices.SortFunc(idx, func(a, b int) int { return m.woke[a].Compare(m.woke[b]) })
		woke, lags := make([]time.Time, len(idx)), make([]time.Duration, len(idx))
		for i, j := range idx {
			woke[i], lags[i] = m.woke[j], m.lags[j]
		}
		m.woke, m.lags, m.sorted = woke, lags, true
	}
	i, _ := slices.BinarySearchFunc(m.woke, from, func(a, b time.Time) int { return a.Compare(b) })
	var worst time.Duration
	for ; i < len(m.woke); i++ {
		worst = max(worst, m.lags[i])
		if m.woke[i].After(to) {
			break
		}
	}
	return worst
}

// ringWatch records when the client's topology changed epoch: a late
// membership change after a fault healed moves primaries again.
type ringWatch struct {
	mu sync.Mutex
	at []time.Time // guarded by mu
}

func (rw *ringWatch) run(ctx context.Context, epoch func() uint64) *sync.WaitGroup {
	last := epoch()
	return every(ctx, 5*time.Millisecond, func(now time.Time) {
		if e := epoch(); e != last {
			last = e
			rw.mu.Lock()
			rw.at = append(rw.at, time.Now())
			rw.mu.Unlock()
		}
	})
}

// every calls f with the time of each tick, every period, on a goroutine
// of its own until ctx is done. The WaitGroup is done once it returned.
func every(ctx context.Context, period time.Duration, f func(now time.Time)) *sync.WaitGroup {
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				f(now)
			}
		}
	})
	return &wg
}

// before returns how long before t the topology last changed, and false
// if it never did.
func (rw *ringWatch) before(t time.Time) (time.Duration, bool) {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	var best time.Duration
	found := false
	for _, a := range rw.at {
		if !a.After(t) {
			best, found = t.Sub(a), true
		}
	}
	return best, found
}

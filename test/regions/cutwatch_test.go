package regions

// What TestLinkedCutLosesNothing shows besides losing nothing (issue 36,
// "a region link cut for 10 minutes under load"): the catch-up, from
// the heal until every region counts every acknowledged impression, and
// the checks of every region meanwhile: their fail-open share and p99
// before the cut (the long form only), during it and after the heal,
// each beside a bare echo of the same size at the same rate in the same
// run (echo_test.go).

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/test/cluster"
)

// cutCatchUpBound is the bound on the catch-up after a heal,
// enforced when the cut lasted cutLong or more (a short cut on a busy
// machine measures the machine).
const (
	cutCatchUpBound = 60 * time.Second
	cutLong         = time.Minute
)

// cutWatch checks viewers in every region at a steady rate with a
// production client (client.DefaultConfig: its 5 ms deadline and
// failure policy) for the whole of the cut test, by phase.
type cutWatch struct {
	t       *testing.T
	cut     time.Duration
	regions []string
	clients map[string]*client.Client
	echo    string
	rate    float64 // checks a second per region
	// loads are the soft impressions recorded in every region meanwhile
	// (FCAP_REGIONS_CUT_LOAD a second per region; none by default), by
	// region, through loaders' clients.
	loads   map[string]*recordLoad
	loaders map[string]*client.Client
	stop    chan struct{}
	wg      sync.WaitGroup

	mu sync.Mutex
	// The fields below are guarded by mu.
	phases []*cutPhase
	cur    *cutPhase
}

// cutPhase is what the checks saw in one phase, by region.
type cutPhase struct {
	name     string
	start    time.Time
	took     time.Duration
	byRegion map[string]*checkFigures
	floor    *echoLoad
}

type checkFigures struct {
	calls, failOpen, errs atomic.Int64
	lat                   *latencyHist
}

// startCutWatch starts the checks (FCAP_REGIONS_CUT_CHECKS a second per
// region, default 50, on 1,000 viewers) and, when the cut is long
// (>= cutLong), measures them for cutBaseline(cut) before the cut. Call
// it before the cut.
func startCutWatch(t *testing.T, b *Bed, cut time.Duration) *cutWatch {
	t.Helper()
	first := "during the cut"
	if cut >= cutLong {
		first = "before the cut"
	}
	w := newCutWatch(t, b, cut, startEcho(t), first)
	if cut >= cutLong {
		// The checks' figures without a cut, in the same run: a window
		// of measurement, not a wait for a condition.
		time.Sleep(cutBaseline(cut))
		w.setPhase("during the cut")
	}
	return w
}

// cutBaseline is how long the checks are measured without a cut: before
// it, and in a single region after the test (singleRegion).
func cutBaseline(cut time.Duration) time.Duration { return min(cut, 30*time.Second) }

// newCutWatch starts the checks (and the load, with
// FCAP_REGIONS_CUT_LOAD) in every region of b, in a phase named first;
// echo is the echo server of the floor.
func newCutWatch(t *testing.T, b *Bed, cut time.Duration, echo, first string) *cutWatch {
	t.Helper()
	w := &cutWatch{
		t: t, cut: cut, clients: map[string]*client.Client{}, echo: echo,
		rate: envFloat(t, "FCAP_REGIONS_CUT_CHECKS", 50), stop: make(chan struct{}),
	}
	for _, r := range b.Regions {
		w.regions = append(w.regions, r.Name)
		w.clients[r.Name] = cluster.Client(t, client.DefaultConfig(r.Seeds()...))
	}
	t.Cleanup(w.close)
	if os.Getenv("FCAP_REGIONS_CUT_LOAD") != "" {
		rate := envFloat(t, "FCAP_REGIONS_CUT_LOAD", 1)
		w.loads, w.loaders = map[string]*recordLoad{}, map[string]*client.Client{}
		for _, r := range w.regions {
			w.loaders[r] = benchClient(t, b, r)
			w.loads[r] = startRecordLoad(w.loaders[r], "cutload-"+r+"-", rate)
		}
		t.Cleanup(w.stopLoads)
	}
	w.setPhase(first)
	for _, r := range w.regions {
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			w.checks(r)
		}()
	}
	return w
}

// singleRegion, after a long cut (>= cutLong) or with
// FCAP_REGIONS_CUT_SINGLE=1, stops the linked bed's nodes and measures
// the same checks (and load) for cutBaseline(cut) in one region of as
// many nodes with no peer region: the single-region run the issue
// compares the checks during the cut with, in the same run.
func (w *cutWatch) singleRegion(linked *Bed) {
	w.t.Helper()
	if w.cut < cutLong && os.Getenv("FCAP_REGIONS_CUT_SINGLE") != "1" {
		return
	}
	nodes := len(linked.Regions[0].Nodes)
	for _, r := range linked.Regions {
		cluster.KillAll(r.Nodes)
	}
	solo := Start(w.t, Config{Regions: []string{"solo"}, Nodes: nodes})
	sw := newCutWatch(w.t, solo, w.cut, w.echo, "in a single region, no peer region")
	time.Sleep(cutBaseline(w.cut)) // a window of measurement
	sw.stopLoads()
	sw.close()
	sw.log()
}

// checks runs region r's checks until close.
func (w *cutWatch) checks(r string) {
	c := w.clients[r]
	cands := []fcap.Candidate{{Caps: []fcap.Cap{softCap}}}
	var inner sync.WaitGroup
	defer inner.Wait()
	paceAt(w.stop, w.rate, func() {
		w.mu.Lock()
		f := w.cur.byRegion[r]
		w.mu.Unlock()
		inner.Add(1)
		go func() {
			defer inner.Done()
			v := fmt.Sprintf("watch-%d", rand.IntN(1000))
			start := time.Now()
			res, err := c.Check(context.Background(), v, cands)
			f.lat.add(time.Since(start))
			f.calls.Add(1)
			switch {
			case err != nil:
				f.errs.Add(1)
			case len(res.Verdicts) == 1 && res.Verdicts[0].Failed():
				f.failOpen.Add(1)
			}
		}()
	})
}

// setPhase ends the current phase (its echo floor stops) and starts the
// next: the checks count in it from now, and a bare echo of a check's
// size runs beside them at the same total rate.
func (w *cutWatch) setPhase(name string) {
	p := &cutPhase{name: name, start: time.Now(), byRegion: map[string]*checkFigures{}}
	for _, r := range w.regions {
		p.byRegion[r] = &checkFigures{lat: newLatencyHist()}
	}
	p.floor = startEchoLoad(w.t, w.echo, checkSize(w.t, "watch-999", softCap, 1), w.rate*float64(len(w.regions)), 32, time.Second)
	w.mu.Lock()
	prev := w.cur
	w.cur = p
	w.phases = append(w.phases, p)
	w.mu.Unlock()
	if prev != nil {
		prev.floor.stopLoad()
		prev.took = time.Since(prev.start)
	}
}

// healed is called at the heal: it measures the catch-up (every region
// counting every impression of want, polled), logs it and the checks'
// figures of every phase, and fails the test when the catch-up took
// longer than cutCatchUpBound after a cut of cutLong or more.
func (w *cutWatch) healed(counters map[string]*client.Client, want map[string]int) {
	w.t.Helper()
	heal := time.Now()
	w.setPhase("after the heal")
	want = w.loadViewers(want)
	took := catchUp(w.t, counters, w.regions, want, heal)
	w.close()
	w.t.Logf("catch-up: every region counts every acknowledged impression (%d viewers) %v after the heal of a %v cut (bound %v for cuts of %v or more)",
		len(want), took.Round(time.Millisecond), w.cut, cutCatchUpBound, cutLong)
	w.log()
	if w.cut >= cutLong && took > cutCatchUpBound {
		w.t.Errorf("catch-up took %v after the heal of a %v cut, over the issue's %v", took.Round(time.Millisecond), w.cut, cutCatchUpBound)
	}
}

// log writes the checks' figures, phase by phase, region by region,
// beside the phase's echo floor.
func (w *cutWatch) log() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range w.phases {
		fl := p.floor.lat
		w.t.Logf("checks %s (%v, %.0f/s per region, production deadline; a fail-open answers at the deadline and its latency counts): echo floor of a check's size, same run: %s",
			p.name, p.took.Round(time.Millisecond), w.rate, fl.summary())
		for _, r := range w.regions {
			f := p.byRegion[r]
			n := f.calls.Load()
			if n == 0 {
				w.t.Logf("  region %s: no check", r)
				continue
			}
			w.t.Logf("  region %s: %d checks, fail-open %.2f%%, errors %.2f%%, %s; p99 / echo p99 = %.2f",
				r, n, 100*float64(f.failOpen.Load())/float64(n), 100*float64(f.errs.Load())/float64(n),
				f.lat.summary(), benchRatio(f.lat.ms(99), fl.ms(99)))
		}
	}
}

// stopLoads stops the impression loads. Safe to call twice.
func (w *cutWatch) stopLoads() {
	for _, l := range w.loads {
		l.stopLoad()
	}
}

// loadViewers stops the impression loads and, once their clients have
// sent everything (every impression acknowledged: none given up), adds
// about 2,000 of their viewers per region, evenly spread, to a copy of
// want, each counted once. When a client gave impressions up (its queue
// was full, or its attempts ran out) the load's viewers are left out:
// which of them were acknowledged is not known.
func (w *cutWatch) loadViewers(want map[string]int) map[string]int {
	w.t.Helper()
	if w.loads == nil {
		return want
	}
	w.stopLoads()
	out := maps.Clone(want)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, r := range w.regions {
		c, l := w.loaders[r], w.loads[r]
		if err := c.Flush(ctx); err != nil {
			w.t.Errorf("region %s: the load's impressions were not all sent a minute after the heal: %v", r, err)
			continue
		}
		st := c.Stats()
		sent := l.sent.Load()
		w.t.Logf("region %s: the load recorded %d impressions during the test (%d acknowledged, %d given up by the client)", r, sent, st.RecordsAcked, st.RecordsDropped)
		if st.RecordsDropped > 0 {
			w.t.Logf("region %s: the load's viewers are not checked: its client gave %d impressions up (lower FCAP_REGIONS_CUT_LOAD)", r, st.RecordsDropped)
			continue
		}
		step := max(sent/2000, 1)
		for i := int64(1); i <= sent; i += step {
			out[fmt.Sprintf("cutload-%s-%d", r, i)] = 1
		}
	}
	return out
}

// close stops the checks and the echo floor. Safe to call twice.
func (w *cutWatch) close() {
	select {
	case <-w.stop:
		return
	default:
		close(w.stop)
	}
	w.wg.Wait()
	w.mu.Lock()
	cur := w.cur
	w.mu.Unlock()
	cur.floor.stopLoad()
	if cur.took == 0 {
		cur.took = time.Since(cur.start)
	}
}

// catchUp polls every region's count of every viewer of want, the
// regions at once and 8 readers per region, each region rechecking only
// the viewers it still counts short (a soft count only grows while the
// window holds it), and returns the time from heal until the last
// region counted them all. A count above want fails at once; not done
// within FCAP_REGIONS_CATCHUP_LIMIT (5 minutes) fails too.
func catchUp(t *testing.T, counters map[string]*client.Client, regions []string, want map[string]int, heal time.Time) time.Duration {
	t.Helper()
	limit := envDuration(t, "FCAP_REGIONS_CATCHUP_LIMIT", 5*time.Minute)
	var mu sync.Mutex
	var last time.Duration
	var failures []string
	fail := func(format string, args ...any) {
		mu.Lock()
		failures = append(failures, fmt.Sprintf(format, args...))
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for _, r := range regions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			short := make([]string, 0, len(want))
			for v := range want {
				short = append(short, v)
			}
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			for {
				short = recheck(counters[r], short, want, func(v string, n int) {
					fail("region %s counts %d for %s, more than the %d recorded", r, n, v, want[v])
				})
				if len(short) == 0 {
					break
				}
				if time.Since(heal) > limit {
					fail("region %s still counts %d of %d viewers short %v after the heal (e.g. %s)", r, len(short), len(want), limit, short[0])
					return
				}
				<-tick.C
			}
			mu.Lock()
			last = max(last, time.Since(heal))
			mu.Unlock()
		}()
	}
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("catch-up after the heal: %v", failures)
	}
	return last
}

// recheck reads the count of every viewer of short through c, 8 at a
// time, and returns those still counted short of want (or not
// answered); over is told of a count above want.
func recheck(c *client.Client, short []string, want map[string]int, over func(v string, n int)) []string {
	const readers = 8
	var mu sync.Mutex
	var left []string
	var wg sync.WaitGroup
	for w := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(short); i += readers {
				v := short[i]
				n, ok := Counted(context.Background(), c, v, softCap)
				if ok && n > want[v] {
					over(v, n)
				}
				if !ok || n < want[v] {
					mu.Lock()
					left = append(left, v)
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	return left
}

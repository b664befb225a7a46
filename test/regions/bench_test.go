package regions

// The figures of issue 36 (regions), with real fcapd processes: 3
// regions x 3 nodes on one machine, the region links through the WAN
// proxy. They are figures, not tests: run them on a quiet machine (see
// README.md, "Benchmarks"), one at a time, for example
//
//	go test ./test/regions -run '^$' -bench RegionLag -benchtime 1x -timeout 30m
//	go test ./test/regions -run '^$' -bench RegionCost -benchtime 1x -timeout 30m
//
// Every latency stands beside a bare echo of the same size measured in
// the same run (echo_test.go), as a ratio.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/test/cluster"
	"github.com/fcap-io/fcap/test/wanproxy"
)

// envFloat reads a positive number from the environment, def when unset;
// a value that does not parse fails the benchmark.
func envFloat(t testing.TB, name string, def float64) float64 {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f <= 0 {
		t.Fatalf("%s=%q: want a number above 0", name, v)
	}
	return f
}

// benchLink is the WAN of the benchmarks: FCAP_REGIONS_LATENCY ±
// FCAP_REGIONS_JITTER one way (40 ms ± 5 ms: the 80 ms ± 10 ms
// round trip), as linkedBed's.
func benchLink(t testing.TB) wanproxy.Link {
	return wanproxy.Link{
		Latency: envDuration(t, "FCAP_REGIONS_LATENCY", 40*time.Millisecond),
		Jitter:  envDuration(t, "FCAP_REGIONS_JITTER", 5*time.Millisecond),
	}
}

// benchClient is a client of region name whose record queue holds a few
// seconds of the load (the default 65,536 is 3 s at 20k/s).
func benchClient(t testing.TB, b *Bed, name string) *client.Client {
	return b.Client(t, name, func(c *client.Config) { c.RecordQueue = 1 << 20 })
}

// recordLoad records soft impressions, one per viewer (distinct
// viewers), at a steady rate through c: an open loop (Record queues and
// returns; an impression the queue cannot take is dropped and counted).
type recordLoad struct {
	sent, dropped atomic.Int64
	stop          chan struct{}
	done          chan struct{}
}

func startRecordLoad(c *client.Client, prefix string, rate float64) *recordLoad {
	l := &recordLoad{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(l.done)
		var i int64
		paceAt(l.stop, rate, func() {
			i++
			v := prefix + strconv.FormatInt(i, 10)
			if c.Record(v, fcap.Impression{ID: "i", Caps: []fcap.Cap{softCap}}) != nil {
				l.dropped.Add(1)
			}
			l.sent.Add(1)
		})
	}()
	return l
}

// stopLoad ends the load; it returns once the generator stopped.
func (l *recordLoad) stopLoad() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	<-l.done
}

// lagMetrics scrapes fcap_region_lag_seconds (every peer region) and
// fcap_region_queue_viewers from every node's /metrics every second and
// keeps the largest values seen.
type lagMetrics struct {
	nodes []*cluster.Node
	stop  chan struct{}
	done  chan struct{}

	mu sync.Mutex
	// The fields below are guarded by mu.
	lag, queue float64
	scrapes    int
}

func startLagMetrics(b *Bed) *lagMetrics {
	m := &lagMetrics{stop: make(chan struct{}), done: make(chan struct{})}
	for _, r := range b.Regions {
		m.nodes = append(m.nodes, r.Nodes...)
	}
	go func() {
		defer close(m.done)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			m.scrape()
			select {
			case <-m.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return m
}

func (m *lagMetrics) scrape() {
	for _, n := range m.nodes {
		s, err := n.Metrics()
		if err != nil {
			continue
		}
		m.mu.Lock()
		m.scrapes++
		for k, v := range s {
			switch {
			case strings.HasPrefix(k, "fcap_region_lag_seconds"):
				m.lag = max(m.lag, v)
			case strings.HasPrefix(k, "fcap_region_queue_viewers"):
				m.queue = max(m.queue, v)
			}
		}
		m.mu.Unlock()
	}
}

// finish scrapes once more and returns the largest lag (seconds) and
// queue seen, and how many node scrapes answered.
func (m *lagMetrics) finish() (lag, queue float64, scrapes int) {
	select {
	case <-m.stop:
	default:
		close(m.stop)
	}
	<-m.done
	m.scrape()
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lag, m.queue, m.scrapes
}

// lagProbes writes probe viewers at a steady rate in every region (one
// soft impression each, acknowledged: RecordSync) and polls each in
// every other region until it is counted there: the lag from the
// acknowledgement in x to a read in y that counts it, as a client sees
// it. At most inflight probes are followed at once; a probe due while
// they are all under way is skipped and counted.
type lagProbes struct {
	clients  map[string]*client.Client // probe writes and polls, by region
	regions  []string
	poll     time.Duration
	limit    time.Duration // a probe not counted everywhere after this is "not seen"
	sem      chan struct{}
	lat      *latencyHist            // every (x, y) pair's lag
	pairs    map[string]*latencyHist // by "x->y"
	union    *latencyHist            // per probe: the largest of its lags (counted everywhere)
	within2s atomic.Int64            // probes counted in every region within 2 s
	written  atomic.Int64            // probes acknowledged
	unseen   atomic.Int64            // probes some region did not count within limit
	failed   atomic.Int64            // probe writes not acknowledged
	skipped  atomic.Int64            // probes skipped: inflight probes under way
	stop     chan struct{}
	wg       sync.WaitGroup
}

func startProbes(clients map[string]*client.Client, regions []string, rate float64, poll time.Duration, inflight int) *lagProbes {
	p := &lagProbes{
		clients: clients, regions: regions, poll: poll, limit: 30 * time.Second,
		sem: make(chan struct{}, inflight), lat: newLatencyHist(), union: newLatencyHist(),
		pairs: map[string]*latencyHist{}, stop: make(chan struct{}),
	}
	for _, x := range regions {
		for _, y := range regions {
			if x != y {
				p.pairs[x+"->"+y] = newLatencyHist()
			}
		}
	}
	for _, x := range regions {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			var n int
			paceAt(p.stop, rate, func() {
				select {
				case p.sem <- struct{}{}:
				default:
					p.skipped.Add(1)
					return
				}
				n++
				v := fmt.Sprintf("probe-%s-%d", x, n)
				p.wg.Add(1)
				go func() {
					defer p.wg.Done()
					defer func() { <-p.sem }()
					p.follow(x, v)
				}()
			})
		}()
	}
	return p
}

// follow writes probe v in region x and polls it in every other region.
func (p *lagProbes) follow(x, v string) {
	ctx, cancel := context.WithTimeout(context.Background(), p.limit)
	defer cancel()
	acks := p.clients[x].RecordSync(ctx, []client.RecordItem{{Viewer: v, Impression: fcap.Impression{ID: v, Caps: []fcap.Cap{softCap}}}})
	acked := time.Now()
	if acks[0].Err != nil {
		p.failed.Add(1)
		return
	}
	p.written.Add(1)
	var mu sync.Mutex
	var worst time.Duration
	seen := true
	var wg sync.WaitGroup
	for _, y := range p.regions {
		if y == x {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			lag, ok := p.pollUntilCounted(p.clients[y], v, acked)
			mu.Lock()
			defer mu.Unlock()
			if !ok {
				seen = false
				return
			}
			worst = max(worst, lag)
			p.lat.add(lag)
			p.pairs[x+"->"+y].add(lag)
		}()
	}
	wg.Wait()
	if !seen {
		p.unseen.Add(1)
		return
	}
	p.union.add(worst)
	if worst <= 2*time.Second {
		p.within2s.Add(1)
	}
}

// pollUntilCounted checks v in a region every p.poll until the region
// counts it; the lag runs from acked to the answer that counted it.
func (p *lagProbes) pollUntilCounted(c *client.Client, v string, acked time.Time) (time.Duration, bool) {
	tick := time.NewTicker(p.poll)
	defer tick.Stop()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		n, ok := Counted(ctx, c, v, softCap)
		cancel()
		if ok && n >= 1 {
			return time.Since(acked), true
		}
		if time.Since(acked) > p.limit {
			return 0, false
		}
		<-tick.C
	}
}

// stopProbes stops writing probes and waits for those under way (each
// is counted everywhere or given up after p.limit).
func (p *lagProbes) stopProbes() {
	close(p.stop)
	p.wg.Wait()
}

// BenchmarkRegionLag: 3 regions x 3 nodes linked through a WAN of 40 ms
// ± 5 ms one way; in every region an open loop of soft impressions on
// distinct viewers at FCAP_REGIONS_BENCH_RATE a second
// (default 20,000) for FCAP_REGIONS_BENCH_DURATION (20 s). Beside it,
// probe viewers written at FCAP_REGIONS_BENCH_PROBES a second per region
// (50) and polled every FCAP_REGIONS_BENCH_POLL (5 ms) in the two other
// regions: the cross-region lag p50/p99/max from a probe's
// acknowledgement in x to a read in y that counts it, and the share of
// probes counted in every region within 2 s of their write (the issue:
// p99 < 1 s; union within 2 s). The largest fcap_region_lag_seconds any
// node showed (scraped every second and at the end) is reported too.
// The floor: an echo of a probe's Record and its answer through a
// wanproxy with the same link, at the probes' rate, in the same run.
func BenchmarkRegionLag(b *testing.B) {
	rate := envFloat(b, "FCAP_REGIONS_BENCH_RATE", 20000)
	dur := envDuration(b, "FCAP_REGIONS_BENCH_DURATION", 20*time.Second)
	probeRate := envFloat(b, "FCAP_REGIONS_BENCH_PROBES", 50)
	poll := envDuration(b, "FCAP_REGIONS_BENCH_POLL", 5*time.Millisecond)
	inflight := int(envFloat(b, "FCAP_REGIONS_BENCH_INFLIGHT", 512))
	RequireRegionFlags(b)
	link := benchLink(b)
	echo := startEcho(b)
	for range b.N {
		bed := Start(b, Config{Linked: true, Link: link})
		names := []string{}
		load, poller := map[string]*client.Client{}, map[string]*client.Client{}
		for _, r := range bed.Regions {
			names = append(names, r.Name)
			load[r.Name] = benchClient(b, bed, r.Name)
			poller[r.Name] = bed.Client(b, r.Name)
		}
		// The links carry before the clock starts: one probe each way.
		warm := startProbes(poller, names, 1, poll, 16)
		cluster.Eventually(b, time.Minute, func() bool { return warm.written.Load() >= int64(len(names)) },
			"the warm-up probes were not acknowledged")
		warm.stopProbes()
		if warm.unseen.Load() > 0 || warm.failed.Load() > 0 {
			b.Fatalf("warm-up: %d probes not counted everywhere, %d not acknowledged: the region link does not carry", warm.unseen.Load(), warm.failed.Load())
		}

		wan, err := wanproxy.New(echo)
		if err != nil {
			b.Fatal(err)
		}
		if err := wan.SetBoth(link); err != nil {
			b.Fatal(err)
		}
		metrics := startLagMetrics(bed)
		floor := startEchoLoad(b, wan.Addr(), recordSize(b, "probe-a-1000000", "probe-a-1000000", softCap),
			probeRate*float64(len(names)), 64, 10*time.Second)
		loads := map[string]*recordLoad{}
		for _, r := range names {
			loads[r] = startRecordLoad(load[r], "load-"+r+"-", rate)
		}
		pr := startProbes(poller, names, probeRate, poll, inflight)
		start := time.Now()
		time.Sleep(dur) // the measured time: the loads run meanwhile
		for _, l := range loads {
			l.stopLoad()
		}
		elapsed := time.Since(start)
		var acked int64 // impressions of the load acknowledged while it ran
		for _, r := range names {
			acked += load[r].Stats().RecordsAcked
		}
		pr.stopProbes()
		floor.stopLoad()
		wan.Close()
		lagMax, queueMax, scrapes := metrics.finish()

		var sent, dropped int64
		for _, r := range names {
			sent += loads[r].sent.Load()
			dropped += loads[r].dropped.Load()
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		for _, r := range names {
			if err := load[r].Flush(ctx); err != nil {
				b.Logf("region %s: flushing the load's records: %v", r, err)
			}
		}
		cancel()
		var lost int64 // given up by the clients: queue full, attempts spent
		for _, r := range names {
			lost += load[r].Stats().RecordsDropped
		}
		written := pr.written.Load()
		if written == 0 {
			b.Fatalf("no probe was acknowledged (%d failed, %d skipped)", pr.failed.Load(), pr.skipped.Load())
		}
		union := float64(pr.within2s.Load()) / float64(written)
		p99, floorP99 := pr.lat.ms(99), floor.lat.ms(99)
		ratio := 0.0
		if floorP99 > 0 {
			ratio = p99 / floorP99
		}
		sustained := float64(acked) / elapsed.Seconds() / float64(len(names))
		b.Logf("load: %.0f impressions/s asked per region, %.0f/s offered, %.0f/s acknowledged while it ran, per region over %v (%d refused by the clients' full queues; %d given up by the clients in all)",
			rate, float64(sent)/elapsed.Seconds()/float64(len(names)), sustained, elapsed.Round(time.Millisecond), dropped, lost)
		b.Logf("cross-region lag (ack in x -> a read in y counts it, polled every %v): %s; %d probes acknowledged, %d not counted everywhere within %v, %d not acknowledged, %d skipped (%d in flight at most)",
			poll, pr.lat.summary(), written, pr.unseen.Load(), pr.limit, pr.failed.Load(), pr.skipped.Load(), inflight)
		var pairs []string
		for _, x := range names {
			for _, y := range names {
				if x != y {
					l := pr.pairs[x+"->"+y]
					pairs = append(pairs, fmt.Sprintf("%s->%s p50 %.0f p99 %.0f max %.0f", x, y, l.ms(50), l.ms(99), l.maxMS()))
				}
			}
		}
		b.Logf("  by pair (ms): %s", strings.Join(pairs, "; "))
		b.Logf("union: %.2f%% of probes counted in every region within 2 s of their write (the last region to count a probe: %s)", 100*union, pr.union.summary())
		b.Logf("floor: a bare echo of a probe's Record (and its answer) through a wanproxy of %v ± %v one way, same run: round trip %s (%d errors, %d skipped); lag p99 / echo round-trip p99 = %.2f",
			link.Latency, link.Jitter, floor.lat.summary(), floor.errs.Load(), floor.skipped.Load(), ratio)
		b.Logf("fcap_region_lag_seconds: at most %.3f s on any node and peer region (%d node scrapes, every second and at the end); fcap_region_queue_viewers at most %.0f",
			lagMax, scrapes, queueMax)
		b.ReportMetric(pr.lat.ms(50), "lag_p50_ms")
		b.ReportMetric(p99, "lag_p99_ms")
		b.ReportMetric(pr.lat.maxMS(), "lag_max_ms")
		b.ReportMetric(100*union, "union_2s_%")
		b.ReportMetric(floor.lat.ms(50), "echo_rtt_p50_ms")
		b.ReportMetric(floorP99, "echo_rtt_p99_ms")
		b.ReportMetric(ratio, "lag_p99/echo_p99")
		b.ReportMetric(1000*lagMax, "lag_metric_max_ms")
		b.ReportMetric(sustained, "acked_imps/s/region")
		b.ReportMetric(0, "ns/op")
		for _, r := range bed.Regions {
			cluster.KillAll(r.Nodes)
		}
	}
}

// fcapbenchResult is what BenchmarkRegionCost reads of fcapbench's
// --json results.
type fcapbenchResult struct {
	Mode       string  `json:"mode"`
	Requests   int64   `json:"requests"`
	Errors     int64   `json:"errors"`
	FailedOver int64   `json:"failed_over"`
	RequestsPS float64 `json:"requests_per_second"`
	ChecksPS   float64 `json:"checks_per_second"`
	CallP99    float64 `json:"call_p99_us"`
}

// closedLoopPeak runs fcapbench closed loop against target at addr (a
// node's data-plane address, or an echo server): 100-candidate checks
// (fcapbench's check workload, its defaults otherwise) for dur after a
// 2 s warm-up.
func closedLoopPeak(t testing.TB, target, addr string, dur time.Duration) fcapbenchResult {
	t.Helper()
	out := filepath.Join(t.TempDir(), "peak.json")
	args := []string{"--target", target, "--addr", addr, "--workload", "check", "--candidates", "100",
		"--duration", dur.String(), "--warmup", "2s", "--quiet", "--json", out}
	if c := os.Getenv("FCAP_REGIONS_COST_CONCURRENCY"); c != "" {
		args = append(args, "--concurrency", c)
	}
	cmd := exec.Command(cluster.Tool(t, "fcapbench"), args...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("fcapbench %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	raw, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var res []fcapbenchResult
	if err := json.Unmarshal(raw, &res); err != nil || len(res) != 1 {
		t.Fatalf("fcapbench's results %s: %v (%d results)", raw, err, len(res))
	}
	return res[0]
}

// BenchmarkRegionCost: the cost of shipping to two peer regions, as
// the share of a node's closed-loop peak it takes (the bound:
// <= 25%). The peak is fcapbench's closed loop of 100-candidate checks
// (its check workload, its defaults otherwise) against region a, while
// a client records soft impressions in region a at
// FCAP_REGIONS_COST_RATE a second (default 6,667 per node of a: a
// node's share of the 20,000/s per region of 3; distinct
// viewers). Once with three regions that know nothing of each other (no
// --region, no peer region: a's single-region path), then, back to back
// in the same run, with the three linked through a WAN of 40 ms ± 5 ms,
// so each of a's impressions is also shipped to b and c: the same
// processes, the same load, only the shipping differs. Regions have
// FCAP_REGIONS_COST_NODES nodes (default 1: the peak is one node's, and
// all of a's shipping is that node's); the checks run
// FCAP_REGIONS_COST_DURATION (20 s) each, with fcapbench's 64 callers
// unless FCAP_REGIONS_COST_CONCURRENCY. On one machine b and c applying
// what a ships share its CPU with a: the cost measured is the
// machine's, at most the node's. The floor: the same closed loop against
// a bare echo of the same frames, in the same run.
// FCAP_REGIONS_COST_ROUNDS (1) repeats alone/linked and reports the
// medians.
func BenchmarkRegionCost(b *testing.B) {
	nodes := int(envFloat(b, "FCAP_REGIONS_COST_NODES", 1))
	rate := envFloat(b, "FCAP_REGIONS_COST_RATE", 20000.0/3*float64(nodes))
	dur := envDuration(b, "FCAP_REGIONS_COST_DURATION", 20*time.Second)
	rounds := int(envFloat(b, "FCAP_REGIONS_COST_ROUNDS", 1))
	RequireRegionFlags(b)
	link := benchLink(b)
	echo := startEcho(b)
	for range b.N {
		var without, with []fcapbenchResult
		floor := closedLoopPeak(b, "echo", echo, dur)
		for round := range rounds {
			for _, linked := range []bool{false, true} {
				cfg := Config{Nodes: nodes, Link: link, Linked: linked}
				bed := Start(b, cfg)
				c := benchClient(b, bed, "a")
				load := startRecordLoad(c, fmt.Sprintf("cost-%d-%t-", round, linked), rate)
				var metrics *lagMetrics
				if linked {
					metrics = startLagMetrics(bed)
				}
				peak := closedLoopPeak(b, "fcap", bed.Region("a").Nodes[0].Data, dur)
				load.stopLoad()
				what := "unlinked"
				if linked {
					lag, queue, _ := metrics.finish()
					ab, ac := bed.Carried("a", "b"), bed.Carried("a", "c")
					if ab == 0 || ac == 0 {
						b.Fatalf("linked, yet a carried %d bytes to b and %d to c: nothing was shipped", ab, ac)
					}
					what = fmt.Sprintf("linked to b and c (%d and %d bytes carried a->b and a->c; fcap_region_lag_seconds at most %.3f s, queue at most %.0f viewers)", ab, ac, lag, queue)
					with = append(with, peak)
				} else {
					without = append(without, peak)
				}
				b.Logf("round %d, region a %s: %.0f checks/s (100 candidates), call p99 %.0f us, %d errors, %d failed over; records: %d offered, %d dropped by the client's queue",
					round, what, peak.RequestsPS, peak.CallP99, peak.Errors, peak.FailedOver, load.sent.Load(), load.dropped.Load())
				for _, r := range bed.Regions {
					cluster.KillAll(r.Nodes)
				}
			}
		}
		wo, wi := medianPeak(without), medianPeak(with)
		cost := 0.0
		if wo.RequestsPS > 0 {
			cost = 1 - wi.RequestsPS/wo.RequestsPS
		}
		b.Logf("closed-loop peak of 100-candidate checks in region a, %d nodes per region, %.0f soft impressions/s recorded in a: unlinked %.0f/s, linked to two peer regions %.0f/s: shipping costs %.1f%% of the peak (bound 25%%); floor: a bare echo of the same frames %.0f/s, call p99 %.0f us (unlinked p99 %.2fx, linked %.2fx)",
			nodes, rate, wo.RequestsPS, wi.RequestsPS, 100*cost, floor.RequestsPS, floor.CallP99,
			benchRatio(wo.CallP99, floor.CallP99), benchRatio(wi.CallP99, floor.CallP99))
		b.ReportMetric(wo.RequestsPS, "checks/s_unlinked")
		b.ReportMetric(wi.RequestsPS, "checks/s_linked")
		b.ReportMetric(100*cost, "cost_%")
		b.ReportMetric(floor.RequestsPS, "checks/s_echo")
		b.ReportMetric(wo.CallP99, "p99_us_unlinked")
		b.ReportMetric(wi.CallP99, "p99_us_linked")
		b.ReportMetric(floor.CallP99, "p99_us_echo")
		b.ReportMetric(0, "ns/op")
	}
}

func benchRatio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// medianPeak returns the result of median throughput.
func medianPeak(rs []fcapbenchResult) fcapbenchResult {
	s := append([]fcapbenchResult(nil), rs...)
	for i := range s { // insertion sort: a handful of rounds
		for j := i; j > 0 && s[j].RequestsPS < s[j-1].RequestsPS; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	return s[len(s)/2]
}

package chaos

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/node/engine"
	"github.com/fcap-io/fcap/test/cluster"
)

var (
	duration = flag.Duration("chaos.duration", 0, "how long to inject faults; 0 runs the short version (every kind of fault once)")
	seedFlag = flag.Uint64("chaos.seed", 0, "seed of the fault schedule and the load; 0 picks one from the clock")
	numNodes = flag.Int("chaos.nodes", 3, "fcapd processes")
	replicas = flag.Int("chaos.replicas", 2, "owners per partition (R)")
	rate     = flag.Int("chaos.rate", 200, "checks per second")
	deadline = flag.Duration("chaos.deadline", 50*time.Millisecond, "deadline of every client call")
)

// grace is how long after a fault heals (and the cluster has settled)
// its effects may still show: fail-open verdicts in a fault window or
// this long after it are the fault's.
const grace = 2 * time.Second

// blockEnv names the file of cut gossip links fcapd reads (a test-only
// fault-injection hook, see cmd/fcapd/fault.go).
const blockEnv = "FCAP_FAULT_GOSSIP_BLOCKLIST"

// window is a time span during which a fault (or its healing) was in
// force.
type window struct{ from, to time.Time }

// harness is a cluster, a proxy per node, and the client the load uses.
type harness struct {
	t       *testing.T
	nodes   []*cluster.Node
	proxies []*Proxy
	routes  sync.Map // node data address -> proxy address
	direct  atomic.Int64
	block   string // the block-list file
}

func (h *harness) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	if p, ok := h.routes.Load(addr); ok {
		return d.DialContext(ctx, network, p.(string))
	}
	h.direct.Add(1)
	return d.DialContext(ctx, network, addr)
}

func (h *harness) route(i int) {
	h.proxies[i].SetTarget(h.nodes[i].Data)
	h.routes.Store(h.nodes[i].Data, h.proxies[i].Addr())
}

func (h *harness) seeds() []string {
	var s []string
	for _, n := range h.nodes {
		if n.Running() {
			s = append(s, n.Data)
		}
	}
	return s
}

// settle waits until every node is up, active, ready, serves every
// partition it owns and holds every replica: the next fault may then
// take down any R-1 owners without losing what was acknowledged.
func (h *harness) settle() {
	h.t.Helper()
	cluster.WaitActive(h.t, h.nodes, len(h.nodes))
	cluster.Eventually(h.t, 90*time.Second, func() bool {
		for _, n := range h.nodes {
			m, err := n.Metrics()
			if err != nil || m["fcap_partitions_syncing"] != 0 || m["fcap_partitions_under_replicated"] != 0 {
				return false
			}
		}
		return true
	}, "partitions not served and fully replicated again")
}

// cut writes the block list: every link between side and the rest.
func (h *harness) cut(side []int) {
	h.t.Helper()
	in := map[int]bool{}
	for _, i := range side {
		in[i] = true
	}
	var b strings.Builder
	for i := range h.nodes {
		for j := range h.nodes {
			if in[i] && !in[j] {
				fmt.Fprintf(&b, "%s %s\n", h.nodes[i].Gossip, h.nodes[j].Gossip)
			}
		}
	}
	h.writeBlock(b.String())
}

func (h *harness) writeBlock(s string) {
	h.t.Helper()
	tmp := h.block + ".tmp"
	if err := os.WriteFile(tmp, []byte(s), 0o644); err != nil {
		h.t.Fatal(err)
	}
	if err := os.Rename(tmp, h.block); err != nil {
		h.t.Fatal(err)
	}
}

// suspected reports whether a node other than i counts fewer than all
// members active.
func (h *harness) suspected(i int) bool {
	for j, n := range h.nodes {
		if j == i || !n.Running() {
			continue
		}
		m, err := n.Metrics()
		if err == nil && m[`fcap_ring_members{state="active"}`] < float64(len(h.nodes)) {
			return true
		}
	}
	return false
}

// inject runs one fault to its end and returns when the cluster has
// settled after it.
func (h *harness) inject(f fault) (noticed bool) {
	h.t.Helper()
	switch f.kind {
	case kill:
		h.nodes[f.node].Kill()
		time.Sleep(f.hold)
		h.nodes[f.node].Restart()
		h.route(f.node)
	case pause:
		h.nodes[f.node].Pause()
		until := time.Now().Add(f.hold)
		for time.Now().Before(until) {
			noticed = noticed || h.suspected(f.node)
			time.Sleep(100 * time.Millisecond)
		}
		h.nodes[f.node].Resume()
	case slow, reset, blackHole:
		fl := map[kind]Fault{slow: Slow, reset: Reset, blackHole: BlackHole}[f.kind]
		h.proxies[f.node].Set(fl, f.delay)
		time.Sleep(f.hold)
		h.proxies[f.node].Set(Pass, 0)
	case partition:
		h.cut(f.side)
		until := time.Now().Add(f.hold)
		for time.Now().Before(until) {
			noticed = noticed || h.suspected(-1)
			time.Sleep(100 * time.Millisecond)
		}
		h.writeBlock("")
	}
	h.settle()
	return noticed
}

// TestChaos: see the package doc and README.md.
func TestChaos(t *testing.T) {
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("chaos seed %d (replay: go test ./test/chaos -run Chaos -v -chaos.seed %d -chaos.duration %v)", seed, seed, *duration)
	if *replicas < 2 || *numNodes < *replicas {
		t.Fatalf("need R >= 2 and at least R nodes, got %d nodes, R=%d", *numNodes, *replicas)
	}
	h := &harness{t: t, block: filepath.Join(t.TempDir(), "gossip-blocklist")}
	h.writeBlock("")
	t.Setenv(blockEnv, h.block)
	h.nodes = cluster.StartCluster(t, *numNodes, cluster.Options{Replicas: *replicas})
	for i := range h.nodes {
		p, err := NewProxy(h.nodes[i].Data)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		h.proxies = append(h.proxies, p)
		h.route(i)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range h.nodes {
				t.Logf("--- %s log tail:\n%s", n.Name, tail(n.Logs(), 40))
			}
		}
	})

	cfg := client.DefaultConfig(h.seeds()...)
	cfg.Timeout = *deadline
	cfg.Dial = h.dial
	c := newClient(t, cfg)

	l := newLedger()
	viewers := make([]string, 2000)
	for i := range viewers {
		viewers[i] = fmt.Sprint("viewer-", i)
	}
	ld := &load{c: c, l: l, viewers: viewers, cands: candidates(), rate: *rate, deadline: *deadline, seed: seed}
	ctx, stop := context.WithCancel(context.Background())
	wg := ld.run(ctx, 16)
	defer func() { stop(); wg.Wait() }()

	count := len(kinds)
	if *duration > 0 {
		count = 1 << 20
	}
	var windows []window
	began := time.Now()
	for i, f := range schedule(seed, len(h.nodes), count) {
		if i >= len(kinds) && time.Since(began) > *duration {
			break
		}
		time.Sleep(f.gap)
		from := time.Now()
		noticed := h.inject(f)
		windows = append(windows, window{from, time.Now().Add(grace)})
		note := ""
		if f.kind == pause || f.kind == partition {
			note = fmt.Sprintf(" (gossip noticed: %v)", noticed)
		}
		t.Logf("fault %d: %v; healed and settled after %v%s", i+1, f, time.Since(from).Round(time.Millisecond), note)
	}
	time.Sleep(grace + time.Second) // quiet traffic after the last fault
	stop()
	wg.Wait()
	h.check(l, windows, viewers)
}

func (h *harness) check(l *ledger, windows []window, viewers []string) {
	t := h.t
	h.settle()
	l.mu.Lock()
	defer l.mu.Unlock()

	// 1. No error reaches the ad server.
	t.Logf("calls: %d (%d checks, %d records), %d ticks skipped (every worker busy)", l.calls, l.checks, l.records, l.skipped)
	t.Logf("invariant errors returned: %d (want 0) %v", l.errors, l.errs)
	if l.errors != 0 {
		t.Errorf("%d calls returned an error", l.errors)
	}

	// 2. Every call returns by its deadline.
	l.mu.Unlock()
	p99, top := l.latencies()
	l.mu.Lock()
	t.Logf("invariant calls past deadline+%v: %d (want 0); latency p99 %v, max %v, deadline %v", lateSlack, l.late, p99, top, *deadline)
	if l.late != 0 {
		t.Errorf("%d calls returned more than %v after their %v deadline (max %v)", l.late, lateSlack, *deadline, top)
	}

	// 3. Fail-open only while a fault is in force.
	outside := 0
	for _, at := range l.failOpen {
		in := false
		for _, w := range windows {
			if !at.Before(w.from) && !at.After(w.to) {
				in = true
				break
			}
		}
		if !in {
			outside++
		}
	}
	t.Logf("invariant fail-open calls outside fault windows: %d (want 0); during faults %d; fail-closed calls %d; backup-answered verdicts %d",
		outside, len(l.failOpen)-outside, l.failShut, l.stale)
	if outside != 0 {
		t.Errorf("%d calls failed open while no fault was in force", outside)
	}

	// 4. Strict caps never exceeded; soft overshoot reported.
	strictOver, softOver, strictKeys := 0, 0, 0
	for k, n := range l.acked {
		switch {
		case k.cap.Mode == engine.Strict:
			strictKeys++
			if n > int(k.cap.Limit) {
				strictOver += n - int(k.cap.Limit)
				t.Errorf("strict cap exceeded: %s %v granted %d times, limit %d", k.viewer, k.cap, n, k.cap.Limit)
			}
		case k.cap.Scope == "campaign":
			softOver += max(n-int(k.cap.Limit), 0)
		}
	}
	t.Logf("invariant strict grants over limit: %d (want 0) over %d strict keys; soft campaign overshoot: %d impressions", strictOver, strictKeys, softOver)

	// 5. Nothing acknowledged is lost: read every counter back.
	got := h.readBack(l)
	lost, extra, keys := 0, 0, 0
	var lostKeys []string
	for k, n := range got {
		keys++
		if a := l.acked[k]; n < a && !(k.cap.Limit < engine.MaxLimit && n == int(k.cap.Limit) && a > n) {
			lost += a - n
			if len(lostKeys) < 10 {
				lostKeys = append(lostKeys, fmt.Sprintf("%s %v: acked %d counted %d", k.viewer, k.cap, a, n))
			}
		}
		if k.cap.Limit == engine.MaxLimit && n > l.acked[k]+l.unknown[k] {
			extra += n - l.acked[k] - l.unknown[k]
		}
	}
	sort.Strings(lostKeys)
	t.Logf("invariant acknowledged impressions lost: %d (want 0) over %d counters; counted more than acknowledged+unknown: %d", lost, keys, extra)
	if lost != 0 {
		t.Errorf("%d acknowledged impressions lost: %v", lost, lostKeys)
	}
	if d := h.direct.Load(); d != 0 {
		t.Logf("note: %d connections bypassed the proxies (address not routed)", d)
	}
}

// readBack counts every counter the ledger touched, through a client
// that reaches the nodes directly with a generous deadline.
func (h *harness) readBack(l *ledger) map[key]int {
	t := h.t
	cfg := client.DefaultConfig(h.seeds()...)
	cfg.Timeout = 2 * time.Second
	c := newClient(t, cfg)
	per := map[string][]engine.Cap{}
	for _, m := range []map[key]int{l.acked, l.unknown} {
		for k := range m {
			per[k.viewer] = append(per[k.viewer], k.cap)
		}
	}
	out := map[key]int{}
	for v, caps := range per {
		seen := map[engine.Cap]bool{}
		var cands []engine.Candidate
		for _, c := range caps {
			if !seen[c] {
				seen[c] = true
				cands = append(cands, engine.Candidate{Caps: []engine.Cap{c}})
			}
		}
		var res *client.CheckResult
		cluster.Eventually(t, 30*time.Second, func() bool {
			var err error
			res, err = c.Check(context.Background(), v, cands)
			if err != nil {
				return false
			}
			for _, vd := range res.Verdicts {
				if vd.Failed() || vd.Stale {
					return false
				}
			}
			return true
		}, "the cluster does not answer for %s", v)
		for i, cd := range cands {
			out[key{v, cd.Caps[0]}] = int(cd.Caps[0].Limit - res.Verdicts[i].Remaining)
		}
	}
	return out
}

func newClient(t *testing.T, cfg client.Config) *client.Client {
	t.Helper()
	c, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c.Close(ctx)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

package chaos

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
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
	"github.com/fcap-io/fcap/test/cluster"
)

var (
	duration  = flag.Duration("chaos.duration", 0, "how long to inject faults; 0 runs the short version (every kind of fault once)")
	seedFlag  = flag.Uint64("chaos.seed", 0, "seed of the fault schedule and the load; 0 picks one from the clock")
	numNodes  = flag.Int("chaos.nodes", 3, "fcapd processes")
	replicas  = flag.Int("chaos.replicas", 2, "owners per partition (R)")
	rate      = flag.Int("chaos.rate", 200, "checks per second")
	deadline  = flag.Duration("chaos.deadline", 50*time.Millisecond, "deadline of every client call")
	stacks    = flag.String("chaos.stacks", "", "folder: dump every goroutine's stack when a load request overruns its deadlines by 20ms (at most 5 dumps)")
	clientLog = flag.String("chaos.clientlog", "", "file: the load's client logs there at debug level (failovers, retried and dropped impressions)")
	strictFl  = flag.Bool("chaos.strict", false, "assert every invariant: the known failures in the short run, the timing ones under the race detector")
)

// knownFailures are invariants that may break by design: the long run
// (-chaos.duration > 0) and -chaos.strict assert them; the short run
// that CI runs prints their figures, marked, without failing.
var knownFailures = map[string]string{
	// Asynchronous replication by design (DESIGN.md, soft caps): a kill -9
	// loses what the owner acknowledged within the replication lag.
	"soft-loss": "soft impressions acknowledged within the replication lag of a killed owner can be lost (asynchronous replication, by design)",
}

// timing are the invariants about when calls return and whether the
// cluster answered in time. They hold on this 2-vCPU machine when the
// nodes and this process run at full speed; under the race detector
// (5-10x slower, its own scheduling stalls) they measure the detector,
// so a race-built run prints them, marked, and asserts them only with
// -chaos.strict. CI runs the suite both ways (.ci/run).
var timing = map[string]bool{"deadline": true, "fail-open": true}

// raceBuilt reports whether this process or the fcapd it starts (see
// test/cluster: race-built unless FCAP_TEST_NORACE is set) carry the
// race detector.
func raceBuilt() bool { return raceEnabled || os.Getenv("FCAP_TEST_NORACE") == "" }

// grace is how long after a fault heals (and the cluster has settled)
// its effects may still show: fail-open verdicts in a fault window or
// this long after it are the fault's.
const grace = 2 * time.Second

// blockEnv names the file of cut gossip links fcapd reads (a test-only
// fault-injection hook, see cmd/fcapd/fault.go).
const blockEnv = "FCAP_FAULT_GOSSIP_BLOCKLIST"

// window is a time span during which a fault (or its healing) was in
// force.
type window struct {
	from, to time.Time
	what     string
}

// during names the fault windows t falls in, or "no fault".
func during(windows []window, t time.Time) string {
	var in []string
	for _, w := range windows {
		if !t.Before(w.from) && !t.After(w.to) {
			in = append(in, w.what)
		}
	}
	if len(in) == 0 {
		return "no fault"
	}
	return strings.Join(in, " + ")
}

// tally counts times by the fault windows they fall in.
func tally(windows []window, times []time.Time) string {
	n := map[string]int{}
	for _, t := range times {
		n[during(windows, t)]++
	}
	var out []string
	for w, c := range n {
		out = append(out, fmt.Sprintf("%d in %s", c, w))
	}
	sort.Strings(out)
	return strings.Join(out, "; ")
}

// harness is a cluster, a proxy per node, and the client the load uses.
type harness struct {
	t       *testing.T
	nodes   []*cluster.Node
	proxies []*Proxy
	routes  sync.Map // node data address -> proxy address
	direct  atomic.Int64
	block   string // the block-list file
	began   time.Time
	// unsettled: a settle timed out; the end-of-run checks do not wait
	// another 90 s.
	unsettled bool
	rings     ringWatch // when the load's client saw the ring change
}

// violated fails the test, unless the invariant is a known failure and
// this is the short run: then it only says so, loudly.
func (h *harness) violated(invariant, format string, args ...any) {
	h.t.Helper()
	msg := fmt.Sprintf(format, args...)
	if why, ok := knownFailures[invariant]; ok && *duration == 0 && !*strictFl {
		h.t.Logf("KNOWN FAILURE, not asserted in the short run (%s): %s", why, msg)
		return
	}
	if timing[invariant] && raceBuilt() && !*strictFl {
		h.t.Logf("NOT ASSERTED under the race detector (a timing invariant; asserted in runs without it): %s", msg)
		return
	}
	h.t.Error(msg)
}

// since is t as an offset into the run, for reports.
func (h *harness) since(t time.Time) string { return t.Sub(h.began).Round(time.Millisecond).String() }

// owners names the viewer's partition and owners in the settled ring.
func owners(c *client.Client, viewer string) string {
	r := c.Ring()
	p, os := r.Lookup(viewer)
	var names []string
	for _, o := range os {
		names = append(names, r.Members()[o].Name)
	}
	return fmt.Sprintf("partition %d owners %v", p, names)
}

func (h *harness) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	// A restarted node may gossip its new address (and the client dial
	// it) a moment before Restart returns and the harness routes it: wait
	// for the route rather than bypass the proxy, whose faults would then
	// miss that connection.
	for {
		if p, ok := h.routes.Load(addr); ok {
			return d.DialContext(ctx, network, p.(string))
		}
		select {
		case <-ctx.Done():
			h.direct.Add(1)
			return d.DialContext(context.Background(), network, addr)
		case <-time.After(time.Millisecond):
		}
	}
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
//
// It reports false (after saying so through violated) when partitions
// stay under-replicated or syncing for 90 s: known failure "settle".
func (h *harness) settle() bool {
	h.t.Helper()
	// Polled through the nodes' status calls, not /metrics: parsing three
	// metrics pages every 20 ms would itself starve the load of CPU.
	var last string
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		ok, why := cluster.Settled(h.nodes, len(h.nodes))
		if ok {
			return true
		}
		last = why
		if time.Now().After(deadline) {
			h.violated("settle", "after 90s, partitions not served and fully replicated again: %s", last)
			h.unsettled = true
			return false
		}
	}
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
		if active, err := n.ActiveMembers(); err == nil && active < len(h.nodes) {
			return true
		}
	}
	return false
}

// inject runs one fault to its end and returns when the cluster has
// settled after it, or reports that it did not.
func (h *harness) inject(f fault) (noticed, settled bool) {
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
	return noticed, h.settle()
}

// TestChaos: see the package doc and README.md.
func TestChaos(t *testing.T) {
	seed := *seedFlag
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	t.Logf("chaos seed %d (replay: go test ./test/chaos -run Chaos -v -chaos.seed %d -chaos.duration %v)", seed, seed, *duration)
	if raceBuilt() {
		t.Logf("race-built (this process or fcapd): the timing invariants (deadline, fail-open) are printed, not asserted; FCAP_TEST_NORACE=1 without -race asserts them")
	}
	if *replicas < 2 || *numNodes < *replicas {
		t.Fatalf("need R >= 2 and at least R nodes, got %d nodes, R=%d", *numNodes, *replicas)
	}
	h := &harness{t: t, block: filepath.Join(t.TempDir(), "gossip-blocklist"), began: time.Now()}
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
			dir, err := os.MkdirTemp("", fmt.Sprintf("fcap-chaos-%d-", seed))
			if err != nil {
				t.Log(err)
				return
			}
			for _, n := range h.nodes {
				os.WriteFile(filepath.Join(dir, n.Name+".log"), []byte(n.Logs()), 0o644)
				t.Logf("--- %s, last lines but memberlist's:\n%s", n.Name, tail(n.Logs(), 30))
			}
			t.Logf("full node logs in %s", dir)
		}
	})

	// StartCluster waits for active, ready members; the load must also
	// find every partition served and replicated, or its first calls
	// fail over with no fault in force.
	if !h.settle() {
		t.FailNow() // no fault yet: nothing to blame but the start
	}
	cfg := client.DefaultConfig(h.seeds()...)
	cfg.Timeout = *deadline
	cfg.Dial = h.dial
	if *clientLog != "" {
		lf, err := os.Create(*clientLog)
		if err != nil {
			t.Fatal(err)
		}
		defer lf.Close()
		cfg.Logger = slog.New(slog.NewTextHandler(lf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	c := cluster.Client(t, cfg)

	l := newLedger()
	viewers := make([]string, 2000)
	for i := range viewers {
		viewers[i] = fmt.Sprint("viewer-", i)
	}
	ld := &load{c: c, l: l, viewers: viewers, cands: candidates(), rate: *rate, deadline: *deadline, seed: seed}
	ctx, stop := context.WithCancel(context.Background())
	const workers = 16
	if *stacks != "" {
		ld.watch = newWatchdog(*stacks, workers, 2**deadline+20*time.Millisecond)
		wwg := ld.watch.run(ctx, t.Logf)
		defer wwg.Wait()
	}
	wg := ld.run(ctx, workers)
	lag := &lagMeter{}
	lwg := lag.run(ctx)
	rwg := h.rings.run(ctx, func() uint64 { return c.Ring().Epoch() })
	defer func() { stop(); wg.Wait(); lwg.Wait(); rwg.Wait() }()

	var windows []window
	began := time.Now()
	for i, f := range schedule(seed, len(h.nodes)) {
		// The short run: every kind once. The long one: faults until
		// the duration is spent (and at least every kind once).
		if i >= len(kinds) && (*duration == 0 || time.Since(began) > *duration) {
			break
		}
		time.Sleep(f.gap)
		from := time.Now()
		noticed, settled := h.inject(f)
		windows = append(windows, window{from, time.Now().Add(grace), fmt.Sprintf("fault %d (%s)", i+1, f.kind)})
		note := ""
		if f.kind == pause || f.kind == partition {
			note = fmt.Sprintf(" (gossip noticed: %v)", noticed)
		}
		if !settled {
			// More faults could take down the last holder of a
			// partition: stop injecting and check what happened so far.
			t.Logf("fault %d at +%s: %v; healed but the cluster did not settle: no more faults", i+1, h.since(from), f)
			break
		}
		t.Logf("fault %d at +%s: %v; healed and settled after %v%s", i+1, h.since(from), f, time.Since(from).Round(time.Millisecond), note)
	}
	time.Sleep(grace + time.Second) // quiet traffic after the last fault
	stop()
	wg.Wait()
	lwg.Wait()
	rwg.Wait()
	// Every impression handed to Record is now acknowledged or dropped.
	fctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	if err := c.Flush(fctx); err != nil {
		t.Errorf("Flush: impressions still unacknowledged after 60 s: %v", err)
	}
	cancel()
	h.check(l, lag, windows, c.Stats())
}

func tail(s string, n int) string {
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		if !strings.Contains(l, `"component":"memberlist"`) {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

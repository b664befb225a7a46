package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/proto"
	"github.com/fcap-io/fcap/ring"
	"github.com/fcap-io/fcap/test/cluster"
)

// ledger is the test's own account of what the cluster acknowledged, to
// compare with what it counts at the end.
type ledger struct {
	mu sync.Mutex
	// The fields below are guarded by mu.
	acked   map[string]int // per viewer: impressions acknowledged
	nAcked  int            // impressions acknowledged, every viewer's
	unknown map[string]int // per viewer: calls whose fate is unknown (failed over after sending)
	refused map[string]int // per viewer: calls a node refused (the cap had no room)
	errors  int            // errors returned to the caller
	failed  int            // verdicts decided by the failure policy
	// fails holds the first maxFails calls decided by the failure policy
	// or errors, for a test to place in the nodes' logs.
	fails []failure
}

// failure is a call the failure policy decided, or an error: its viewer
// and when the call began and ended.
type failure struct {
	viewer     string
	began, end time.Time
	err        error
}

const maxFails = 20

// failures returns the failed calls recorded.
func (l *ledger) failures() []failure {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]failure(nil), l.fails...)
}

// fail records a failed call of viewer v begun at began; l.mu is held.
func (l *ledger) fail(v string, began time.Time, err error) {
	if len(l.fails) < maxFails {
		l.fails = append(l.fails, failure{viewer: v, began: began, end: time.Now(), err: err})
	}
}

func newLedger() *ledger {
	return &ledger{acked: map[string]int{}, unknown: map[string]int{}, refused: map[string]int{}}
}

// allowed accounts for the answer to an Allow of viewer v.
func (l *ledger) allowed(v string, vd client.Verdict, err error) {
	l.allowedAt(v, vd, err, time.Time{})
}

// allowedAt is allowed for a call begun at began (zero: unknown).
func (l *ledger) allowedAt(v string, vd client.Verdict, err error, began time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case err != nil:
		l.errors++
		l.fail(v, began, err)
	case vd.Failed():
		l.failed++
		l.unknown[v]++
		l.fail(v, began, nil)
	case vd.Allowed:
		l.acked[v]++
		l.nAcked++
	default:
		l.refused[v]++
	}
}

// ackedTotal is how many impressions were acknowledged so far.
func (l *ledger) ackedTotal() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.nAcked
}

// traffic runs Allow calls on a set of viewers until stop, each a new
// impression on a cap so large it never denies, so the count of every
// viewer is exactly its acknowledged calls. Checks run beside them.
func traffic(ctx context.Context, c *client.Client, l *ledger, viewers []string, capc fcap.Cap, workers int) *sync.WaitGroup {
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for ctx.Err() == nil {
				v := viewers[rng.IntN(len(viewers))]
				began := time.Now()
				vd, err := c.Allow(context.Background(), v, []fcap.Cap{capc})
				l.allowedAt(v, vd, err, began)
				if rng.IntN(4) == 0 {
					began := time.Now()
					res, err := c.Check(context.Background(), v, []fcap.Candidate{{Caps: []fcap.Cap{capc}}})
					l.mu.Lock()
					if err != nil {
						l.errors++
						l.fail(v, began, err)
					} else if res.Verdicts[0].Failed() {
						l.failed++
						l.fail(v, began, nil)
					}
					l.mu.Unlock()
				}
			}
		}()
	}
	return &wg
}

// trafficRun is a client's traffic on a cap that never denies (see traffic)
// on a cluster of three nodes with R=2, every answer accounted in l.
type trafficRun struct {
	nodes   []*cluster.Node
	c       *client.Client
	capc    fcap.Cap
	viewers []string
	l       *ledger
	stop    context.CancelFunc
	wg      *sync.WaitGroup
}

// startTraffic starts the cluster, a client and workers callers on viewers
// viewers, the cap and the viewers named after name. The traffic stops
// when the test ends, if end has not stopped it before.
func startTraffic(t *testing.T, name string, viewers, workers int) *trafficRun {
	t.Helper()
	tr := &trafficRun{
		nodes:   cluster.StartCluster(t, 3, cluster.Options{Replicas: 2}),
		capc:    fcap.Cap{Scope: "campaign", ID: name, Limit: fcap.MaxLimit, Window: 24 * time.Hour},
		viewers: viewerIDs(name, viewers),
		l:       newLedger(),
	}
	tr.c = testClient(t, seeds(tr.nodes...))
	ctx, stop := context.WithCancel(context.Background())
	tr.stop = stop
	tr.wg = traffic(ctx, tr.c, tr.l, tr.viewers, tr.capc, workers)
	t.Cleanup(tr.end)
	return tr
}

// started waits until more than n viewers have an acknowledged
// impression.
func (tr *trafficRun) started(t *testing.T, n int) {
	t.Helper()
	cluster.Eventually(t, 30*time.Second, func() bool {
		tr.l.mu.Lock()
		defer tr.l.mu.Unlock()
		return len(tr.l.acked) > n
	}, "traffic did not start")
}

// ran waits until the traffic has had another impression acknowledged
// for each of its viewers (on average) since the call: it ran on the
// cluster as the last step left it.
func (tr *trafficRun) ran(t *testing.T) {
	t.Helper()
	want := tr.l.ackedTotal() + len(tr.viewers)
	cluster.Eventually(t, time.Minute, func() bool { return tr.l.ackedTotal() >= want },
		"the traffic did not go on: fewer than %d impressions acknowledged", want)
}

// end stops the traffic and waits until every caller has returned.
func (tr *trafficRun) end() {
	tr.stop()
	tr.wg.Wait()
}

// verify compares what the cluster counts with what the ledger says it
// acknowledged (see verify).
func (tr *trafficRun) verify(t *testing.T) (lost, extra int) {
	t.Helper()
	return verify(t, tr.l, counted(t, tr.c, tr.viewers, tr.capc))
}

// counted asks each viewer's owner how many impressions it holds. A
// backup's answer (stale: a hedged check the owner was slower than) is
// asked again: its copy of a soft cap may still lack the last writes,
// replicated asynchronously, and would read as a loss.
func counted(t *testing.T, c *client.Client, viewers []string, capc fcap.Cap) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, v := range viewers {
		var res *client.CheckResult
		cluster.Eventually(t, 30*time.Second, func() bool {
			var err error
			res, err = c.Check(context.Background(), v, []fcap.Candidate{{Caps: []fcap.Cap{capc}}})
			return err == nil && !res.Verdicts[0].Failed() && !res.Verdicts[0].Stale
		}, "the owner does not answer for %s", v)
		out[v] = int(capc.Limit - res.Verdicts[0].Remaining)
	}
	return out
}

// verify compares the cluster's counts with the ledger: nothing
// acknowledged is lost, nothing is counted twice. A call whose answer was
// lost may or may not have counted.
func verify(t *testing.T, l *ledger, got map[string]int) (lost, extra int) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for v, n := range got {
		switch {
		case n < l.acked[v]:
			lost += l.acked[v] - n
			t.Errorf("%s: %d impressions acknowledged, %d counted", v, l.acked[v], n)
		case n > l.acked[v]+l.unknown[v]:
			extra += n - l.acked[v] - l.unknown[v]
			t.Errorf("%s: counted %d, but only %d acknowledged and %d unknown (%d refused)", v, n, l.acked[v], l.unknown[v], l.refused[v])
		}
	}
	return lost, extra
}

func seeds(nodes ...*cluster.Node) []string { return cluster.Seeds(nodes...) }

// testClient is a ready client with deadlines of seconds (race-built
// processes on 2 shared cores).
func testClient(t *testing.T, addrs []string) *client.Client {
	t.Helper()
	return cluster.NewClient(t, addrs)
}

func viewerIDs(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}

// waitStable waits until every running node is active and ready.
func waitStable(t *testing.T, nodes []*cluster.Node) {
	t.Helper()
	want := 0
	for _, n := range nodes {
		if n.Running() {
			want++
		}
	}
	cluster.WaitActive(t, nodes, want)
}

// TestScaleUpAndDownUnderTraffic grows a cluster from 3 to 5 nodes and
// shrinks it to 3 (graceful stops) while a client keeps recording and
// checking: every acknowledged impression is counted exactly once and the
// caller never sees an error.
func TestScaleUpAndDownUnderTraffic(t *testing.T) {
	tr := startTraffic(t, "scale", 300, 4)
	nodes, c, l := tr.nodes, tr.c, tr.l
	pause := func() { tr.ran(t) } // let traffic run between steps

	// checkpoint compares, between steps, the impressions acknowledged
	// before the step with what the cluster counts after it.
	checkpoint := func(step string) {
		if testing.Verbose() {
			l.mu.Lock()
			before := map[string]int{}
			for v, n := range l.acked {
				before[v] = n
			}
			l.mu.Unlock()
			got := counted(t, c, tr.viewers[:30], tr.capc)
			lost := 0
			for v, n := range got {
				lost += max(before[v]-n, 0)
			}
			t.Logf("after %s: %d lost on a sample of 30 viewers", step, lost)
		}
	}
	pause()
	for _, name := range []string{"n4", "n5"} {
		n := cluster.Start(t, name, cluster.Options{Replicas: 2, Seeds: []string{nodes[0].Gossip}})
		nodes = append(nodes, n)
		waitStable(t, nodes)
		pause()
		checkpoint("join " + name)
	}
	for _, n := range nodes[:2] {
		if !n.Stop(60 * time.Second) {
			t.Fatalf("%s did not stop gracefully:\n%s", n.Name, n.Logs())
		}
		waitStable(t, nodes)
		pause()
		checkpoint("stop " + n.Name)
	}
	tr.end()

	lost, extra := tr.verify(t)
	acked := total(l.acked)
	t.Logf("acknowledged %d impressions; lost %d, counted twice %d; errors %d; failed over %d", acked, lost, extra, l.errors, l.failed)
	if l.errors != 0 {
		t.Errorf("the client surfaced %d errors", l.errors)
	}
	if acked < 100 {
		t.Errorf("only %d impressions acknowledged: the traffic did not run", acked)
	}
}

// capTraffic runs Allow calls against a cap with a real limit, recording
// grants: it shows both loss (a grant the cluster forgot) and overshoot
// (more grants than the limit).
func capTraffic(ctx context.Context, c *client.Client, l *ledger, viewers []string, capc fcap.Cap, workers int) *sync.WaitGroup {
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 11))
			for ctx.Err() == nil {
				v := viewers[rng.IntN(len(viewers))]
				vd, err := c.Allow(context.Background(), v, []fcap.Cap{capc})
				l.allowed(v, vd, err)
				time.Sleep(time.Duration(rng.IntN(3)) * time.Millisecond)
			}
		}()
	}
	return &wg
}

// crashTest kills nodes under soft and strict traffic and checks the
// invariants: no error to the caller, nothing acknowledged lost under
// strict caps, no strict cap exceeded; for soft caps it reports loss and
// overshoot.
func crashTest(t *testing.T, size, replicas int, kill []int, restart bool) {
	nodes := cluster.StartCluster(t, size, cluster.Options{Replicas: replicas})
	c := testClient(t, seeds(nodes...))
	const limit = 40
	strictCap := fcap.Cap{Scope: "campaign", ID: "strict", Limit: limit, Window: 24 * time.Hour, Mode: fcap.Strict}
	softCap := fcap.Cap{Scope: "campaign", ID: "soft", Limit: limit, Window: 24 * time.Hour}
	strictViewers, softViewers := viewerIDs("strict", 60), viewerIDs("soft", 60)
	strict, soft := newLedger(), newLedger()
	ctx, stop := context.WithCancel(context.Background())
	ws := capTraffic(ctx, c, strict, strictViewers, strictCap, 3)
	wsoft := capTraffic(ctx, c, soft, softViewers, softCap, 3)

	time.Sleep(2 * time.Second)
	beforeKill := snapshot(nodes, strictViewers)
	for _, i := range kill {
		if restart {
			// Back before gossip declares it dead: its peers see only a
			// new incarnation, which holds nothing.
			nodes[i].Restart()
		} else {
			nodes[i].Kill()
		}
	}
	killed := time.Now()
	alive := []*cluster.Node{}
	for _, n := range nodes {
		if n.Running() {
			alive = append(alive, n)
		}
	}
	waitStable(t, alive)
	// Every partition served again and re-replicated.
	cluster.Eventually(t, 60*time.Second, func() bool {
		for _, n := range alive {
			m, err := n.Metrics()
			if err != nil || m["fcap_partitions_syncing"] != 0 || m["fcap_partitions_under_replicated"] != 0 {
				return false
			}
		}
		return true
	}, "partitions not served and fully replicated again")
	t.Logf("killed %v: every partition served and re-replicated %v later", kill, time.Since(killed).Round(time.Millisecond))
	afterKill := snapshot(alive, strictViewers)
	for _, n := range alive {
		for _, line := range strings.Split(n.Logs(), "\n") {
			if strings.Contains(line, "claimed without a hand-over") || strings.Contains(line, "gone before its hand-over") {
				t.Logf("%s: %s", n.Name, line)
			}
		}
	}
	time.Sleep(2 * time.Second)
	stop()
	ws.Wait()
	wsoft.Wait()

	strictCounts := counted(t, c, strictViewers, strictCap)
	strictLost, _ := verify(t, strict, strictCounts)
	softCounts := counted(t, c, softViewers, softCap)
	softLost, overshoot := 0, 0
	soft.mu.Lock()
	for v, n := range softCounts {
		softLost += max(soft.acked[v]-n, 0)
		overshoot += max(soft.acked[v]-limit, 0)
	}
	soft.mu.Unlock()
	strict.mu.Lock()
	defer strict.mu.Unlock()
	for v, g := range strict.acked {
		if g > limit {
			t.Errorf("strict cap exceeded for %s: %d grants, limit %d", v, g, limit)
		}
	}
	if strict.errors+soft.errors != 0 {
		t.Errorf("the client surfaced %d errors", strict.errors+soft.errors)
	}
	if strictLost != 0 {
		t.Errorf("%d acknowledged strict impressions lost", strictLost)
	}
	if t.Failed() {
		var bad []string
		for v, g := range strict.acked {
			if g > limit || strictCounts[v] < g {
				bad = append(bad, v)
			}
		}
		logPartitions(t, nodes, bad)
		for _, v := range bad {
			t.Logf("viewer %s, every node's copy just before the kill: %s", v, beforeKill[v])
			t.Logf("viewer %s, every live node's copy once the cluster settled: %s", v, afterKill[v])
		}
	}
	t.Logf("strict: %d acknowledged, %d lost, %d failed closed; soft: %d acknowledged, %d lost, overshoot %d, %d failed open",
		total(strict.acked), strictLost, strict.failed, total(soft.acked), softLost, overshoot, soft.failed)
}

// snapshot reads every node's own copy of each viewer (Inspect, not
// routed), as one line per viewer: each node's timestamps of the
// viewer's counters, for a failure to be read against the ledger.
func snapshot(nodes []*cluster.Node, viewers []string) map[string]string {
	out := map[string]string{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, v := range viewers {
		var b strings.Builder
		for _, n := range nodes {
			var st proto.ViewerState
			if err := client.Call(ctx, n.Data, &proto.Inspect{Viewer: v}, &st); err != nil {
				fmt.Fprintf(&b, " %s: %v;", n.Name, err)
				continue
			}
			fmt.Fprintf(&b, " %s (primary %v):", n.Name, st.Primary)
			for _, k := range st.Keys {
				fmt.Fprintf(&b, " %d values %v", len(k.Values), k.Values)
			}
			b.WriteString(";")
		}
		out[v] = b.String()
	}
	return out
}

// logPartitions logs, for each viewer, every node's log lines about its
// partition (at most 400 a node, the last ones) and its ring changes: what a failure needs to
// be read (the nodes run at debug). With FCAP_TEST_LOGS set to a
// folder, it writes every node's whole log there too.
func logPartitions(t *testing.T, nodes []*cluster.Node, viewers []string) {
	t.Helper()
	if dir := os.Getenv("FCAP_TEST_LOGS"); dir != "" { // every node's whole log, to read at leisure
		for _, n := range nodes {
			if err := os.WriteFile(filepath.Join(dir, n.Name+".log"), []byte(n.Logs()), 0o644); err != nil {
				t.Log(err)
			}
		}
	}
	for _, v := range viewers {
		p := ring.PartitionOf(fcap.ViewerKey(v), ring.DefaultConfig().Partitions)
		t.Logf("viewer %s: partition %d", v, p)
		tag := fmt.Sprintf(`"partition":%d,`, p) // the nodes log JSON
		for _, n := range nodes {
			var lines []string
			for _, line := range strings.Split(n.Logs(), "\n") {
				if strings.Contains(line, tag) || strings.Contains(line, "ring changed") {
					lines = append(lines, line)
				}
			}
			lines = lines[max(0, len(lines)-400):]
			for _, line := range lines {
				t.Logf("  %s: %s", n.Name, line)
			}
		}
	}
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// TestKillOneOfThree: kill -9 one of three nodes (R=2) under traffic.
func TestKillOneOfThree(t *testing.T) { crashTest(t, 3, 2, []int{1}, false) }

// TestKillAndRestartAtOnce: kill -9 one of three nodes (R=2) and start it
// again at once, faster than gossip notices the death. Its peers must not
// wait for the hand-over of a process that no longer exists, nor take
// its new, empty incarnation for a holder of anything.
func TestKillAndRestartAtOnce(t *testing.T) { crashTest(t, 3, 2, []int{1}, true) }

// TestKillTwoOfFive: kill -9 two of five nodes at once (R=3).
func TestKillTwoOfFive(t *testing.T) { crashTest(t, 5, 3, []int{1, 3}, false) }

// TestRollingRestart restarts every node in turn (graceful stop, start
// with the same name) under traffic: nothing lost, no error.
func TestRollingRestart(t *testing.T) {
	tr := startTraffic(t, "rolling", 200, 3)
	nodes, l := tr.nodes, tr.l
	tr.ran(t)
	for _, n := range nodes {
		if !n.Stop(60 * time.Second) {
			t.Fatalf("%s did not stop gracefully", n.Name)
		}
		n.Restart()
		waitStable(t, nodes)
		tr.ran(t)
	}
	tr.end()
	lost, extra := tr.verify(t)
	t.Logf("acknowledged %d; lost %d; counted twice %d; errors %d; failed over %d", total(l.acked), lost, extra, l.errors, l.failed)
	if l.errors != 0 {
		t.Errorf("the client surfaced %d errors", l.errors)
	}
}

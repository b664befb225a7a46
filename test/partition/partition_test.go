//go:build linux

package partition

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/fcap-io/fcap/test/cluster"
)

// A nemesis is one kind of fault, run on a cluster of nodes while the
// drivers race. Its run function injects the first fault, calls e.Go
// (the drivers start racing then), keeps faulting until e.End, then
// returns; the harness heals whatever is left (links, paused and killed
// nodes).
type nemesis struct {
	name  string
	nodes int
	// minority lists the nodes that cannot reach a majority while the
	// fault lasts; they must grant no strict Allow meanwhile. Empty
	// when no fixed side lacks a majority.
	minority []int
	short    bool // part of the short form
	run      func(e *env)
}

var nemeses = []nemesis{{
	name: "isolate-one", nodes: 3, minority: []int{1}, short: true,
	run: func(e *env) {
		e.cut(Split([]int{1}, []int{2, 3}))
		e.Go()
		e.sleepUntil(e.End)
	},
}, {
	name: "split-2-1", nodes: 3, minority: []int{3},
	run: func(e *env) {
		e.cut(Split([]int{1, 2}, []int{3}))
		e.Go()
		e.sleepUntil(e.End)
	},
}, {
	name: "split-3-2", nodes: 5, minority: []int{4, 5}, short: true,
	run: func(e *env) {
		e.cut(Split([]int{1, 2, 3}, []int{4, 5}))
		e.Go()
		e.sleepUntil(e.End)
	},
}, {
	// n3 hears nothing from n1 and n2; they still hear n3.
	name: "one-way", nodes: 3, minority: []int{3},
	run: func(e *env) {
		e.cut(OneWay([]int{1, 2}, []int{3}))
		e.Go()
		e.sleepUntil(e.End)
	},
}, {
	// Every 1-3 s the cut moves: a random node is isolated, or the
	// network heals.
	name: "flapping", nodes: 3, short: true,
	run: func(e *env) {
		x := 1 + e.rng.IntN(3)
		e.cut(Split([]int{x}, others(x, 3)))
		e.Go()
		for cut := true; ; cut = !cut {
			next := time.Now().Add(time.Second + time.Duration(e.rng.Int64N(int64(2*time.Second))))
			if next.After(e.End) {
				e.sleepUntil(e.End)
				return
			}
			e.sleepUntil(next)
			if cut {
				e.cut(nil)
			} else {
				x = 1 + e.rng.IntN(3)
				e.cut(Split([]int{x}, others(x, 3)))
			}
		}
	},
}, {
	// n3 cut off; in the middle third of the cut n1 (majority side) is
	// killed with SIGKILL and restarted on its data dir.
	name: "split-kill9", nodes: 3, minority: []int{3}, short: true,
	run: func(e *env) {
		e.cut(Split([]int{1, 2}, []int{3}))
		e.Go()
		e.sleepUntil(e.at(1, 3))
		e.note("kill -9 n1")
		e.nodes[0].Kill()
		e.sleepUntil(e.at(2, 3))
		e.note("restart n1")
		if err := e.nodes[0].Start(); err != nil {
			e.t.Error(err)
		}
		e.sleepUntil(e.End)
	},
}, {
	// n3 cut off; in the middle third n1 (majority side) is paused with
	// SIGSTOP, then continued.
	name: "split-pause", nodes: 3, minority: []int{3},
	run: func(e *env) {
		e.cut(Split([]int{1, 2}, []int{3}))
		e.Go()
		e.sleepUntil(e.at(1, 3))
		e.note("SIGSTOP n1")
		e.nodes[0].Pause()
		e.sleepUntil(e.at(2, 3))
		e.note("SIGCONT n1")
		e.nodes[0].Resume()
		e.sleepUntil(e.End)
	},
}, {
	// No cut: n1 is starved of CPU, stopped 200 ms of every 500 ms.
	name: "starve", nodes: 3,
	run: func(e *env) {
		e.Go()
		for time.Now().Add(500 * time.Millisecond).Before(e.End) {
			e.nodes[0].Pause()
			time.Sleep(200 * time.Millisecond)
			e.nodes[0].Resume()
			time.Sleep(300 * time.Millisecond)
		}
		e.sleepUntil(e.End)
	},
}}

func others(x, n int) []int {
	var out []int
	for i := 1; i <= n; i++ {
		if i != x {
			out = append(out, i)
		}
	}
	return out
}

// env is what a nemesis acts on.
type env struct {
	t     *testing.T
	net   *Net
	nodes []*Node
	rng   *rand.Rand
	cutD  time.Duration
	begin func(t0 time.Time)

	T0, End time.Time // set by Go: the fault's start and when it must end
	mu      sync.Mutex
	events  []string // guarded by mu
}

// Go starts the drivers' race: the first fault is in.
func (e *env) Go() {
	e.T0 = time.Now()
	e.End = e.T0.Add(e.cutD)
	e.note("go")
	e.begin(e.T0)
}

// at returns the instant num/den of the way through the fault.
func (e *env) at(num, den int) time.Time {
	return e.T0.Add(e.cutD * time.Duration(num) / time.Duration(den))
}

func (e *env) cut(links []Link) {
	if err := e.net.SetCuts(links); err != nil {
		e.t.Error(err)
	}
	e.note("cut %v", links)
}

func (e *env) note(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	off := time.Duration(0)
	if !e.T0.IsZero() {
		off = time.Since(e.T0).Round(time.Millisecond)
	}
	e.events = append(e.events, fmt.Sprintf("%v %s", off, fmt.Sprintf(format, args...)))
}

// sleepUntil waits for the nemesis's schedule: the faults' timing is
// what the test is about, not a condition to poll for.
func (e *env) sleepUntil(tm time.Time) {
	if d := time.Until(tm); d > 0 {
		time.Sleep(d)
	}
}

// result is what one run found.
type result struct {
	nemesis        string
	ops, grants    int
	unknown        int
	viewers        int
	overGranted    int // viewers granted more than Limit
	maxGranted     int
	lost           int // acknowledged grants missing from the settled count
	illegal        int // viewers whose history is not linearizable
	undecided      int // viewers the checker ran out of time on
	diff           int // drifting viewers fcapctl verify found; -1 if it could not tell
	settled        bool
	counted        bool
	minority       bool
	majorityFailTo time.Duration // offset of the majority side's last failed call during the fault
	minorityLast   time.Duration // offset of the minority side's last grant during the fault; -1 none
	problems       []string
}

func (r result) linearizable() bool { return r.illegal == 0 && r.undecided == 0 }

var runSeq atomic.Int64

// settings of a run.
type settings struct {
	cut, tail time.Duration
	replicas  int
}

func runOnce(t *testing.T, bins binaries, nm nemesis, s settings) result {
	res := result{nemesis: fmt.Sprintf("%s/%dnodes", nm.name, nm.nodes), diff: -1, minority: len(nm.minority) > 0, minorityLast: -1}
	tag := fmt.Sprint(runSeq.Add(1))
	nt, err := NewNet(tag, nm.nodes)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := nt.Close(); err != nil {
			t.Error(err)
		}
	})
	outDir := t.TempDir()
	if keep := os.Getenv("FCAP_PARTITION_OUT"); keep != "" {
		outDir = filepath.Join(keep, strings.ReplaceAll(t.Name(), "/", "_"))
		if err := os.MkdirAll(outDir, 0o755); err != nil {
			t.Fatal(err)
		}
	}

	// The cluster.
	var join []string
	for i := 1; i <= nm.nodes; i++ {
		join = append(join, fmt.Sprintf("%s:%d", IP(i), GossipPort))
	}
	nodes := make([]*Node, nm.nodes)
	for i := range nodes {
		nodes[i] = NewNode(nt, i+1, bins.fcapd, filepath.Join(outDir, fmt.Sprintf("data-n%d", i+1)), s.replicas, join)
		t.Cleanup(nodes[i].Kill)
	}
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("FCAP_PARTITION_OUT") != "" {
			for _, n := range nodes {
				os.WriteFile(filepath.Join(outDir, n.Name+".log"), []byte(n.Logs()), 0o644)
			}
		}
	})
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = n.Start()
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := waitSettled(bins, nt, nodes, 60*time.Second); err != nil {
		t.Fatalf("the cluster did not form: %v", err)
	}

	// The drivers, one beside each node.
	e := &env{t: t, net: nt, nodes: nodes, rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1)), cutD: s.cut}
	drivers := make([]*driverProc, len(nodes))
	for i, n := range nodes {
		seeds := []string{n.Data}
		for _, o := range nodes {
			if o != n {
				seeds = append(seeds, o.Data)
			}
		}
		d, err := startDriver(bins.driver, n, seeds, "r"+tag, s.cut+s.tail, filepath.Join(outDir, "history-"+n.Name+".jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(d.kill)
		drivers[i] = d
	}
	for _, d := range drivers {
		if err := d.waitReady(60 * time.Second); err != nil {
			t.Fatal(err)
		}
	}
	e.begin = func(t0 time.Time) {
		for _, d := range drivers {
			fmt.Fprintf(d.stdin, "go %d\n", t0.UnixNano())
		}
	}

	// The fault, then the heal.
	nm.run(e)
	if e.T0.IsZero() {
		t.Fatal("the nemesis never called Go")
	}
	heal(e)
	healAt := time.Now()
	e.note("healed")

	var ops []Op
	for _, d := range drivers {
		got, err := d.wait(s.cut + s.tail + 60*time.Second)
		if err != nil {
			t.Error(err)
		}
		ops = append(ops, got...)
	}
	t.Logf("events: %s", strings.Join(e.events, "; "))

	// Settle, read back, verify.
	if err := waitSettled(bins, nt, nodes, 90*time.Second); err != nil {
		res.problems = append(res.problems, fmt.Sprintf("did not settle after the heal: %v", err))
	} else {
		res.settled = true
	}
	checks := CheckAll(ops, 20*time.Second)
	counts, err := readCounts(bins, nt, nodes, checks)
	if err != nil {
		res.problems = append(res.problems, fmt.Sprintf("reading counts back: %v", err))
	} else {
		res.counted = true
	}
	if res.settled {
		diff, err := verify(bins, nt, nodes)
		if err != nil {
			res.problems = append(res.problems, fmt.Sprintf("fcapctl verify: %v", err))
		}
		res.diff = diff
	}

	// The figures.
	res.ops, res.viewers = len(ops), len(checks)
	minority := map[string]bool{}
	for _, i := range nm.minority {
		minority[fmt.Sprintf("n%d", i)] = true
	}
	t0, t1 := e.T0.UnixNano(), healAt.UnixNano()
	for _, op := range ops {
		inFault := op.Call >= t0 && op.Call < t1
		switch {
		case op.Result == Granted:
			res.grants++
			// A grant answered while the fault lasted; one answered
			// after the heal may have waited for it.
			if inFault && op.Return < t1 && minority[op.Side] {
				res.minorityLast = max(res.minorityLast, time.Duration(op.Return-t0))
			}
		case op.Result == Unknown:
			res.unknown++
			if inFault && !minority[op.Side] {
				res.majorityFailTo = max(res.majorityFailTo, time.Duration(min(op.Return, t1)-t0))
			}
		}
	}
	for _, vc := range checks {
		res.maxGranted = max(res.maxGranted, vc.Granted)
		if vc.OverGranted() {
			res.overGranted++
			res.problems = append(res.problems, fmt.Sprintf("%s granted %d (%v)", vc.Viewer, vc.Granted, vc.GrantedBySide))
		}
		switch vc.Linearizable {
		case porcupine.Illegal:
			res.illegal++
		case porcupine.Unknown:
			res.undecided++
		}
		if n, ok := counts[vc.Viewer]; ok {
			if l := min(vc.Granted, Limit) - int(n); l > 0 {
				res.lost += l
				res.problems = append(res.problems, fmt.Sprintf("%s: %d grants acknowledged, %d counted", vc.Viewer, vc.Granted, n))
			}
		} else if res.counted {
			res.problems = append(res.problems, fmt.Sprintf("%s: no count read back", vc.Viewer))
		}
	}
	return res
}

// heal removes every cut, continues paused nodes and restarts killed
// ones.
func heal(e *env) {
	if err := e.net.Heal(); err != nil {
		e.t.Error(err)
	}
	for _, n := range e.nodes {
		if n.Running() {
			n.Resume()
			continue
		}
		if err := n.Start(); err != nil {
			e.t.Error(err)
		}
	}
}

// assert fails the test for each invariant the run broke.
func (r result) assert(t *testing.T) {
	t.Logf("%s: %d Allows (%d granted, %d unknown) over %d viewers; most granted to one viewer %d",
		r.nemesis, r.ops, r.grants, r.unknown, r.viewers, r.maxGranted)
	if r.ops == 0 || r.grants == 0 {
		t.Errorf("the drivers made %d Allows and %d grants: the run tested nothing", r.ops, r.grants)
	}
	if r.overGranted > 0 {
		t.Errorf("%d viewers granted more than %d", r.overGranted, Limit)
	}
	if r.illegal > 0 || r.undecided > 0 {
		t.Errorf("strict histories not linearizable: %d viewers illegal, %d undecided (checker timed out)", r.illegal, r.undecided)
	}
	if r.lost > 0 {
		t.Errorf("%d acknowledged strict grants lost", r.lost)
	}
	if r.diff != 0 {
		t.Errorf("fcapctl verify: %d drifting viewers (-1: no answer)", r.diff)
	}
	if r.minority && r.minorityLast >= 0 {
		t.Errorf("the minority side granted strict Allows during the fault, the last %v after it began", r.minorityLast)
	}
	for i, p := range r.problems {
		if i == 20 {
			t.Logf("... %d more", len(r.problems)-i)
			break
		}
		t.Log(p)
	}
	if !r.settled || !r.counted {
		t.Error("the cluster did not settle or could not be read back after the heal")
	}
}

// driverProc is one running `driver race`.
type driverProc struct {
	side   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	stderr *cluster.LogBuffer
	out    string
	done   chan struct{}
	err    error // set before done is closed
}

func startDriver(bin string, n *Node, seeds []string, prefix string, d time.Duration, out string) (*driverProc, error) {
	cmd := Exec(n.NS, bin, "race",
		"--seeds", strings.Join(seeds, ","),
		"--side", n.Name,
		"--prefix", prefix,
		"--duration", d.String(),
		"--out", out,
	)
	p := &driverProc{side: n.Name, cmd: cmd, stderr: &cluster.LogBuffer{}, out: out, done: make(chan struct{})}
	var err error
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p.stdout = bufio.NewReader(stdout)
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("driver beside %s: %w", n.Name, err)
	}
	return p, nil
}

// waitReady waits for the driver's "ready" line.
func (p *driverProc) waitReady(timeout time.Duration) error {
	line := make(chan string, 1)
	go func() {
		l, _ := p.stdout.ReadString('\n')
		line <- l
	}()
	select {
	case l := <-line:
		if strings.TrimSpace(l) != "ready" {
			p.kill()
			return fmt.Errorf("driver beside %s said %q: %s", p.side, l, p.stderr.String())
		}
	case <-time.After(timeout):
		p.kill()
		return fmt.Errorf("driver beside %s not ready after %v: %s", p.side, timeout, p.stderr.String())
	}
	go func() {
		io.Copy(io.Discard, p.stdout)
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	return nil
}

// wait waits for the driver to finish and reads its history.
func (p *driverProc) wait(timeout time.Duration) ([]Op, error) {
	select {
	case <-p.done:
	case <-time.After(timeout):
		p.kill()
		return nil, fmt.Errorf("driver beside %s still racing after %v", p.side, timeout)
	}
	if p.err != nil {
		return nil, fmt.Errorf("driver beside %s: %v: %s", p.side, p.err, p.stderr.String())
	}
	f, err := os.Open(p.out)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ReadOps(f)
}

func (p *driverProc) kill() {
	if p.cmd.Process != nil && p.cmd.ProcessState == nil {
		p.cmd.Process.Kill()
	}
}

func addrs(nodes []*Node, http bool) string {
	var out []string
	for _, n := range nodes {
		if http {
			out = append(out, n.HTTP)
		} else {
			out = append(out, n.Data)
		}
	}
	return strings.Join(out, ",")
}

// waitSettled runs `driver settled` from the bridge namespace.
func waitSettled(bins binaries, nt *Net, nodes []*Node, timeout time.Duration) error {
	out, err := Exec(nt.Bridge, bins.driver, "settled",
		"--data", addrs(nodes, false), "--http", addrs(nodes, true),
		"--want", fmt.Sprint(len(nodes)), "--timeout", timeout.String()).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%v: %s", err, bytes.TrimSpace(out))
	}
	return nil
}

// readCounts reads every checked viewer's count back from the bridge
// namespace.
func readCounts(bins binaries, nt *Net, nodes []*Node, checks []ViewerCheck) (map[string]int64, error) {
	var in strings.Builder
	for _, vc := range checks {
		fmt.Fprintln(&in, vc.Viewer)
	}
	cmd := Exec(nt.Bridge, bins.driver, "counts", "--seeds", addrs(nodes, false))
	cmd.Stdin = strings.NewReader(in.String())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	counts := map[string]int64{}
	if jerr := json.Unmarshal(out, &counts); jerr != nil {
		return nil, fmt.Errorf("%v %v: %s", err, jerr, stderr.String())
	}
	if err != nil {
		return counts, fmt.Errorf("%v: %s", err, stderr.String())
	}
	return counts, nil
}

// verify runs `fcapctl verify` from the bridge namespace and returns how
// many viewers' copies drift.
func verify(bins binaries, nt *Net, nodes []*Node) (int, error) {
	cmd := Exec(nt.Bridge, bins.fcapctl, "verify", "--addr", addrs(nodes, false), "--settle", "500ms", "--json")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, _ := cmd.Output() // exit status 1 on drift: the report says why
	var rep struct {
		Unreachable []string `json:"unreachable"`
		NotHeld     []string `json:"not_held"`
		DriftTotal  int      `json:"drift_total"`
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		return -1, fmt.Errorf("printed %q (%v): %s", out, err, stderr.String())
	}
	if len(rep.Unreachable) > 0 {
		return -1, fmt.Errorf("unreachable: %v", rep.Unreachable)
	}
	return rep.DriftTotal, nil
}

func TestPartition(t *testing.T) {
	requireNetns(t)
	bins := build(t)
	long := os.Getenv("FCAP_PARTITION_LONG") == "1"
	runs, s := 1, settings{cut: 6 * time.Second, tail: 2 * time.Second, replicas: 2}
	if long {
		runs, s.cut, s.tail = 5, 20*time.Second, 3*time.Second
	}
	// Overrides, for a quick look at one nemesis of the long form.
	if v := os.Getenv("FCAP_PARTITION_RUNS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("FCAP_PARTITION_RUNS=%q: want a positive count", v)
		}
		runs = n
	}
	if v := os.Getenv("FCAP_PARTITION_CUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < time.Second {
			t.Fatalf("FCAP_PARTITION_CUT=%q: want a duration of at least 1s", v)
		}
		s.cut = d
	}
	var results []result
	for _, nm := range nemeses {
		if !long && !nm.short {
			continue
		}
		t.Run(fmt.Sprintf("%s/%dnodes", nm.name, nm.nodes), func(t *testing.T) {
			for r := range runs {
				t.Run(fmt.Sprintf("run%d", r+1), func(t *testing.T) {
					res := runOnce(t, bins, nm, s)
					results = append(results, res)
					res.assert(t)
				})
			}
		})
	}
	if len(results) > 0 {
		printSummary(os.Stdout, results)
	}
}

// printSummary prints one line per nemesis, its runs added up.
func printSummary(w io.Writer, results []result) {
	type row struct {
		runs, over, lost, notLin, diff int
		diffUnknown                    bool
		failTo, minLast                time.Duration
		minority                       bool
	}
	var order []string
	rows := map[string]*row{}
	for _, r := range results {
		x, ok := rows[r.nemesis]
		if !ok {
			x = &row{minLast: -1}
			rows[r.nemesis] = x
			order = append(order, r.nemesis)
		}
		x.runs++
		x.over += r.overGranted
		x.lost += r.lost
		if !r.linearizable() {
			x.notLin++
		}
		if r.diff < 0 {
			x.diffUnknown = true
		} else {
			x.diff += r.diff
		}
		x.failTo = max(x.failTo, r.majorityFailTo)
		x.minLast = max(x.minLast, r.minorityLast)
		x.minority = r.minority
	}
	fmt.Fprintln(w, "\npartition suite summary (times: offset from the fault's start; worst run)")
	fmt.Fprintf(w, "%-22s %4s %12s %9s %13s %10s %18s %18s\n", "nemesis", "runs", "over-granted", "lost-acks", "linearizable", "diff-copies", "majority-serves-at", "minority-last-grant")
	for _, name := range order {
		x := rows[name]
		lin := "yes"
		if x.notLin > 0 {
			lin = fmt.Sprintf("no (%d/%d)", x.notLin, x.runs)
		}
		diff := fmt.Sprint(x.diff)
		if x.diffUnknown {
			diff += "+?"
		}
		minLast := "none"
		switch {
		case !x.minority:
			minLast = "n/a"
		case x.minLast >= 0:
			minLast = x.minLast.Round(time.Millisecond).String()
		}
		fmt.Fprintf(w, "%-22s %4d %12d %9d %13s %10s %18s %18s\n", name, x.runs, x.over, x.lost, lin, diff,
			x.failTo.Round(time.Millisecond).String(), minLast)
	}

}

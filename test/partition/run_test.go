//go:build linux

package partition

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// runSeq numbers the runs of this process: their namespaces' tag.
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
	outDir, keep := t.TempDir(), os.Getenv("FCAP_PARTITION_OUT")
	if keep != "" {
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
		if keep == "" {
			if t.Failed() {
				t.Log("set FCAP_PARTITION_OUT=DIR to keep the histories, node logs and checker drawings")
			}
			return
		}
		for _, n := range nodes {
			os.WriteFile(filepath.Join(outDir, n.Name+".log"), []byte(n.Logs()), 0o644)
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
	timeout := nm.timeout
	if timeout == 0 {
		timeout = time.Second
	}
	for i, n := range nodes {
		seeds := []string{n.Data}
		for _, o := range nodes {
			if o != n {
				seeds = append(seeds, o.Data)
			}
		}
		d, err := startDriver(bins.driver, n, seeds, "r"+tag, s.cut+s.tail, timeout, filepath.Join(outDir, "history-"+n.Name+".jsonl"))
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
	if keep != "" {
		_, byViewer := ByViewer(ops)
		for _, vc := range checks {
			if vc.Linearizable != porcupine.Ok && !vc.OverGranted() {
				path := filepath.Join(outDir, "linearizability-"+vc.Viewer+".html")
				if err := Visualize(byViewer[vc.Viewer], path, 20*time.Second); err != nil {
					t.Logf("drawing %s: %v", vc.Viewer, err)
				}
			}
		}
	}
	counts, err := readCounts(bins, nt, nodes, checks)
	if err != nil {
		res.problems = append(res.problems, fmt.Sprintf("reading counts back: %v", err))
	} else {
		res.counted = true
	}
	if res.settled {
		// Copies may still be converging: drift counts only if it
		// outlasts a generous deadline.
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Second) {
			diff, err := verify(bins, nt, nodes)
			res.diff = diff
			if err == nil && diff == 0 {
				break
			}
			if time.Now().After(deadline) {
				if err != nil {
					res.problems = append(res.problems, fmt.Sprintf("fcapctl verify: %v", err))
				}
				break
			}
		}
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
			if int(n) == vc.Granted {
				res.exact++
			}
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

//go:build linux

package partition

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
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
	// softSides is how many copies may serve one viewer's soft caps at
	// once, each counting only its own grants (the soft bound is
	// softSides x Limit); 0 means 2 with a minority, else 1.
	softSides int
	// timeout is the drivers' deadline for one Allow; 0 means 1 s.
	timeout time.Duration
	run     func(e *env)
}

var nemeses = []nemesis{{
	// The control: no fault. A run that fails here is the suite's (or
	// the cluster's) fault, not a partition's.
	name: "none", nodes: 3, short: true,
	run: func(e *env) {
		e.Go()
		e.sleepUntil(e.End)
	},
}, {
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
	// network heals. For soft caps, each node may be the one cut off in
	// turn, each counting only the grants it saw: up to three sides for
	// one viewer (the fourth session's full suite granted 15).
	name: "flapping", nodes: 3, short: true, softSides: 3,
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
	// SIGSTOP, then continued. Three sides for soft caps: n3, n2 (which
	// took n1's viewers over), and n1 once it resumes, serving its
	// viewers from its copy of before the pause until their partitions
	// come back to it whole (ARCHITECTURE.md, "Soft caps under a
	// partition"; 12-13 granted by nodes to a viewer in 3 of 5 runs).
	name: "split-pause", nodes: 3, minority: []int{3}, softSides: 3,
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
	// No cut: n1 is starved of CPU, stopped 200 ms of every 500 ms. The
	// drivers' deadline is shorter than a stop, so calls that wait on
	// n1 go unanswered while n1 may still apply them.
	name: "starve", nodes: 3, timeout: 100 * time.Millisecond,
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

package chaos

import (
	"fmt"
	"iter"
	"math/rand/v2"
	"testing"
	"time"
)

// kind is one sort of fault.
type kind string

const (
	kill      kind = "kill"       // kill -9, down for hold, restart with the same name
	pause     kind = "pause"      // SIGSTOP for hold (long enough for gossip to suspect), SIGCONT
	slow      kind = "slow"       // the node's proxy holds every chunk for delay
	reset     kind = "reset"      // the node's proxy refuses and closes connections
	blackHole kind = "black-hole" // the node's proxy swallows every byte
	partition kind = "partition"  // gossip between two halves of the cluster is cut
)

var kinds = []kind{kill, pause, slow, reset, blackHole, partition}

// fault is one step of the schedule: it starts after gap of quiet,
// lasts hold, then heals.
type fault struct {
	kind  kind
	node  int   // the node hit (kill, pause, proxy faults)
	side  []int // partition: the nodes cut off from the others
	hold  time.Duration
	delay time.Duration // slow: added per chunk, each way
	gap   time.Duration
}

func (f fault) String() string {
	switch f.kind {
	case partition:
		return fmt.Sprintf("%s %v|rest for %v", f.kind, names(f.side), f.hold)
	case slow:
		return fmt.Sprintf("%s n%d +%v for %v", f.kind, f.node+1, f.delay, f.hold)
	}
	return fmt.Sprintf("%s n%d for %v", f.kind, f.node+1, f.hold)
}

func names(idx []int) []string {
	out := make([]string, len(idx))
	for i, n := range idx {
		out[i] = fmt.Sprint("n", n+1)
	}
	return out
}

// schedule yields the faults a seed gives: every kind once, in a
// seeded order, then kinds at random, for as long as the caller ranges
// over it. The same seed gives the same schedule (when each fault starts
// depends on how fast the cluster recovers from the previous one).
//
// An iterator, not a slice: the long run has no fixed count, and a
// slice sized for "enough" faults (it was 1<<20) is 80 MB of pointers
// that every GC cycle of the test process must mark; the mark workers
// then hold both Ps for tens of milliseconds while the load's timers
// wait (Go's idle mark workers yield to runnable goroutines and network
// events, not to expired timers).
func schedule(seed uint64, nodes int) iter.Seq2[int, fault] {
	return func(yield func(int, fault) bool) {
		rng := rand.New(rand.NewPCG(seed, 0x6368616f73))
		order := append([]kind(nil), kinds...)
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for i := 0; ; i++ {
			k := rng.IntN(len(kinds))
			f := fault{kind: kinds[k], node: rng.IntN(nodes), gap: time.Duration(500+rng.IntN(1500)) * time.Millisecond}
			if i < len(order) {
				f.kind = order[i]
			}
			switch f.kind {
			case pause:
				// local gossip profile: probes every 400ms, so 2-4s is
				// long enough to be suspected and often declared dead.
				f.hold = time.Duration(2000+rng.IntN(2000)) * time.Millisecond
			case partition:
				perm := rng.Perm(nodes)
				f.side = perm[:1+rng.IntN(nodes/2)]
				f.hold = time.Duration(2000+rng.IntN(3000)) * time.Millisecond
			default:
				f.hold = time.Duration(500+rng.IntN(2500)) * time.Millisecond
			}
			if f.kind == slow {
				f.delay = time.Duration(5+rng.IntN(95)) * time.Millisecond
			}
			if !yield(i, f) {
				return
			}
		}
	}
}

// first returns the schedule's first n faults.
func first(seed uint64, nodes, n int) []fault {
	var out []fault
	for i, f := range schedule(seed, nodes) {
		if i == n {
			break
		}
		out = append(out, f)
	}
	return out
}

func TestScheduleIsSeeded(t *testing.T) {
	a, b := first(7, 3, 200), first(7, 3, 200)
	if len(a) != 200 {
		t.Fatalf("schedule gave %d faults, want 200", len(a))
	}
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatal("the same seed gave two schedules")
	}
	if fmt.Sprint(a) == fmt.Sprint(first(8, 3, 200)) {
		t.Fatal("seeds 7 and 8 gave the same schedule")
	}
	seen := map[kind]bool{}
	for _, f := range a[:len(kinds)] {
		seen[f.kind] = true
	}
	if len(seen) != len(kinds) {
		t.Fatalf("the first %d faults are %v, want every kind once", len(kinds), a[:len(kinds)])
	}
	for _, f := range a {
		if f.node < 0 || f.node >= 3 || f.hold <= 0 || f.gap <= 0 {
			t.Fatalf("fault out of range: %+v", f)
		}
	}
}

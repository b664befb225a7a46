package main

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// A node's own requests allocate nothing, but memberlist does: a 64 KB
// buffer for every gossip packet it receives (hashicorp/memberlist
// NetTransport.udpListen), about 0.7 MB/s on a node of a 3-node cluster.
// With GOGC's default, a node whose live heap is small (15 MB: a node
// holding few viewers) collects every time it allocated as much again:
// a cycle every 20 s or so, whose mark worker, on a node given one core,
// holds it for up to a few milliseconds at a time while checks wait
// (Go execution traces, docs/bench/BENCHMARKS.md, issue 21).
//
// gcFloorBytes is how much the heap may grow past what the last cycle
// kept before the next one starts, at least: GOGC=100 once the live heap
// is past it, a higher GOGC below. A node then collects about once every
// gcFloorBytes / 0.7 MB/s (a minute and a half) when its heap is small,
// for a heap at most gcFloorBytes larger; a large heap is unchanged.
const gcFloorBytes = 64 << 20

// runtimeHeapMinimum is the Go runtime's smallest heap goal at GOGC=100;
// it scales with GOGC (4 MB * GOGC/100), so a GOGC set for a tiny live
// heap must stay under floor / runtimeHeapMinimum * 100 or the goal
// overshoots the floor (at GOGC=10000, a first cycle at 400 MB).
const runtimeHeapMinimum = 4 << 20

// gcPercentFor is the GOGC that lets a heap of live bytes grow by at
// least floor before the next cycle (live * GOGC/100 >= floor), never
// under the default 100, and never so high that the runtime's minimum
// goal passes the floor.
func gcPercentFor(live, floor uint64) int {
	most := max(floor*100/runtimeHeapMinimum, 100)
	if live == 0 {
		return int(most)
	}
	pct := (floor*100 + live - 1) / live
	return int(min(max(pct, 100), most))
}

var gcFloorOnce sync.Once

// startGCFloor keeps the heap's growth between GC cycles at least floor
// bytes, unless the operator set GOGC (lookup is os.LookupEnv): after
// each cycle, the live heap it found sets GOGC for the next one. It
// starts no goroutine: the runtime runs the cleanup that re-arms it once
// per cycle. Only the first call does anything.
func startGCFloor(floor uint64, lookup func(string) (string, bool)) {
	if _, set := lookup("GOGC"); set {
		return
	}
	gcFloorOnce.Do(func() {
		f := &gcFloor{floor: floor, pct: 100}
		f.adjust()
		f.arm()
	})
}

type gcFloor struct {
	floor  uint64
	pct    int // the GOGC set last; read and written by one cleanup at a time
	sample [1]metrics.Sample
}

// arm registers a cleanup on a fresh object: it runs once a GC cycle
// found the object unreachable, that is after the next cycle.
func (f *gcFloor) arm() {
	sentinel := new([32]byte) // not in the tiny allocator, whose objects may never be cleaned up
	runtime.AddCleanup(sentinel, func(f *gcFloor) {
		f.adjust()
		f.arm()
	}, f)
}

// adjust sets GOGC from the live heap the last cycle found, when it
// changed by more than a tenth.
func (f *gcFloor) adjust() {
	f.sample[0].Name = "/gc/heap/live:bytes"
	metrics.Read(f.sample[:])
	if f.sample[0].Value.Kind() != metrics.KindUint64 {
		return
	}
	pct := gcPercentFor(f.sample[0].Value.Uint64(), f.floor)
	if d := pct - f.pct; d > f.pct/10 || -d > f.pct/10 {
		debug.SetGCPercent(pct)
		f.pct = pct
	}
}

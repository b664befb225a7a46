package main

import (
	"fmt"
	"math/rand/v2"
	"strconv"
)

// workload describes what the load looks like; every target gets the
// same one.
type workload struct {
	Kind        string  // "allow", "check" or "mix"
	Viewers     int     // viewer ids, Zipf-distributed
	Campaigns   int     // campaign ids
	Candidates  int     // campaigns per ad request (check, mix)
	Zipf        float64 // Zipf exponent s (> 1) for viewers
	ZipfV       float64 // Zipf offset v (>= 1): P(k) is proportional to (v+k)^-s
	RecordRatio float64 // mix: records per check
	Limit       int64   // the campaign cap
	Window      int64   // its window, milliseconds
	Mode        string  // fcap: the cap's consistency, "soft" or "strict"
}

func (w *workload) validate() error {
	switch w.Kind {
	case "allow", "check", "mix":
	default:
		return fmt.Errorf("--workload must be allow, check or mix, got %q", w.Kind)
	}
	if w.Viewers < 1 || w.Campaigns < 1 || w.Candidates < 1 || w.Candidates > w.Campaigns {
		return fmt.Errorf("need viewers >= 1 and 1 <= candidates <= campaigns (%d, %d, %d)", w.Viewers, w.Candidates, w.Campaigns)
	}
	if w.Zipf <= 1 || w.ZipfV < 1 {
		return fmt.Errorf("--zipf must be above 1 and --zipf-v at least 1, got %v and %v", w.Zipf, w.ZipfV)
	}
	if w.Mode != "" && w.Mode != "soft" && w.Mode != "strict" {
		return fmt.Errorf("--mode must be soft or strict, got %q", w.Mode)
	}
	if w.RecordRatio < 0 || w.RecordRatio > 1 {
		return fmt.Errorf("--record-ratio must be in [0, 1], got %v", w.RecordRatio)
	}
	return nil
}

// gen draws requests for one worker; not safe for concurrent use.
type gen struct {
	w         *workload
	rng       *rand.Rand
	zipf      *rand.Zipf
	viewerIDs *ids     // shared, read-only
	campIDs   []string // shared, read-only
	picked    []int
	// seen has a bit per campaign, set once this draw picked it: 5,000
	// campaigns are ten cache lines, where a word per campaign was 300
	// that the network stack evicted between a worker's calls (the
	// draw's reads missed the cache: 11% of the generator's core at
	// 18,000 checks/s).
	seen   []uint64
	seq    uint64
	worker int
}

// ids are built once and shared by every worker so the generator does
// not allocate per request.
//
// The viewers' ids are one string and where each ends, not a string
// each: a million strings are a million objects the generator's GC
// marks on every cycle (a quarter of a second of its one core, landing
// in some round of a run and making that target look slow), where one
// string and one array without pointers are two it does not scan.
type ids struct {
	viewerBlob string   // every viewer's id, one after another
	viewerEnd  []uint32 // viewerEnd[i]: where viewer i's id ends in viewerBlob
	campaigns  []string
}

// newIDs names the workload's viewers "viewer-<i>".
func newIDs(w *workload) *ids {
	return newIDsNamed(w, func(b []byte, i int) []byte { return strconv.AppendInt(append(b, "viewer-"...), int64(i), 10) })
}

// newIDsNamed names viewer i by what name appends to b.
func newIDsNamed(w *workload, name func(b []byte, i int) []byte) *ids {
	x := &ids{viewerEnd: make([]uint32, w.Viewers), campaigns: make([]string, w.Campaigns)}
	var blob []byte
	for i := range x.viewerEnd {
		blob = name(blob, i)
		x.viewerEnd[i] = uint32(len(blob))
	}
	x.viewerBlob = string(blob)
	for i := range x.campaigns {
		x.campaigns[i] = "campaign-" + strconv.Itoa(i)
	}
	return x
}

// viewer returns viewer i's id, a slice of the shared string: no
// allocation.
func (x *ids) viewer(i int) string {
	start := uint32(0)
	if i > 0 {
		start = x.viewerEnd[i-1]
	}
	return x.viewerBlob[start:x.viewerEnd[i]]
}

// viewerCount is how many viewers there are.
func (x *ids) viewerCount() int { return len(x.viewerEnd) }

func newGen(w *workload, x *ids, seed uint64, worker int) *gen {
	rng := rand.New(rand.NewPCG(seed, uint64(worker)))
	return &gen{
		w:         w,
		rng:       rng,
		zipf:      rand.NewZipf(rng, w.Zipf, w.ZipfV, uint64(w.Viewers-1)),
		viewerIDs: x,
		campIDs:   x.campaigns,
		seen:      make([]uint64, (w.Campaigns+63)/64),
		worker:    worker,
	}
}

// viewer draws a viewer id (Zipf: a few viewers are very busy).
func (g *gen) viewer() string { return g.viewerIDs.viewer(int(g.zipf.Uint64())) }

// campaigns draws n distinct campaign indexes.
func (g *gen) campaigns(n int) []int {
	g.picked = g.picked[:0]
	clear(g.seen)
	for len(g.picked) < n {
		c := g.rng.IntN(g.w.Campaigns)
		if bit := uint64(1) << (c % 64); g.seen[c/64]&bit == 0 {
			g.seen[c/64] |= bit
			g.picked = append(g.picked, c)
		}
	}
	return g.picked
}

// impressionID is unique per run, worker and call.
func (g *gen) impressionID(run uint64) string {
	g.seq++
	return strconv.FormatUint(run, 36) + "-" + strconv.Itoa(g.worker) + "-" + strconv.FormatUint(g.seq, 36)
}

// record reports whether this mix step also records an impression.
func (g *gen) record() bool {
	return g.w.Kind == "mix" && g.rng.Float64() < g.w.RecordRatio
}

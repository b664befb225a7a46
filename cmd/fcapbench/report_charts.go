package main

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// The report's charts: throughput bars, latency curves per workload and
// mode, memory bars, drawn with one colour per target throughout.

// chartFile is a chart written beside the report.
type chartFile struct{ title, file string }

// charts draws the throughput bars, the latency curves of each workload
// and mode, and the memory bars.
func (rep *report) charts(dir string) ([]chartFile, error) {
	pal := newPalette()
	for _, r := range rep.Results {
		if r.Memory == nil && !r.isCeiling() {
			pal.color(r.Target, r.Kind, r.Variant)
		}
	}
	var out []chartFile
	add := func(title, file string, draw func(path string) error) error {
		if err := draw(filepath.Join(dir, file)); err != nil {
			return fmt.Errorf("chart %s: %w", file, err)
		}
		out = append(out, chartFile{title, file})
		return nil
	}
	// Throughput: a panel per workload, closed loop.
	var panels []barPanel
	for _, w := range []string{"allow", "check", "mix"} {
		var p barPanel
		for _, r := range rep.Results {
			if r.Memory != nil || r.isCeiling() || r.Workload != w || r.Mode != "closed" {
				continue
			}
			if p.title == "" {
				p.title = workloadTitle(r) + ", closed loop, " + strconv.Itoa(r.Concurrency) + " callers"
				if w == "allow" {
					p.title += ": calls/s"
				} else {
					p.title += ": candidate checks/s"
				}
			}
			b := bar{label: r.Label(), value: r.ChecksPS, col: pal.color(r.Target, r.Kind, r.Variant)}
			if w != "allow" {
				b.note = "(" + fmtNum(r.RequestsPS) + " req/s)"
			}
			p.bars = append(p.bars, b)
		}
		if len(p.bars) > 0 {
			panels = append(panels, p)
		}
	}
	if len(panels) > 0 {
		if err := add("Throughput", "throughput.png", func(path string) error {
			return drawBars(path, "Throughput (more is better)", "each target's peak with the same callers; a lighter bar is Redis's one-call check (Lua or MGET)", panels)
		}); err != nil {
			return nil, err
		}
	}
	// Latency: one chart per workload, mode and rate basis.
	type group struct{ workload, mode, basis string }
	var groups []group
	for _, r := range rep.Results {
		if r.Memory != nil || r.isCeiling() {
			continue
		}
		g := group{r.Workload, r.Mode, r.RateBasis}
		if !slices.Contains(groups, g) {
			groups = append(groups, g)
		}
	}
	same := rep.sameRateBasis()
	// fcap's runs at a Redis target's rate belong beside Redis at half its
	// own peak.
	atRedisRate := func(r *Result) bool {
		return r.Kind == "fcap" && r.Mode == "open" && r.RateBasis != same && strings.HasPrefix(r.RateBasis, "half of ")
	}
	groups = slices.DeleteFunc(groups, func(g group) bool {
		return g.mode == "open" && g.basis != same && g.basis != ownPeak
	})
	for i, g := range groups {
		var curves []curve
		var first *Result
		for _, r := range rep.Results {
			inGroup := r.Memory == nil && !r.isCeiling() && r.Workload == g.workload && r.Mode == g.mode &&
				(r.RateBasis == g.basis || g.basis == ownPeak && atRedisRate(r))
			if !inGroup {
				continue
			}
			if first == nil {
				first = r
			}
			note := "p99 " + fmtLatency(r.P99) + expiredNote(r)
			if r.Mode == "open" && g.basis != same {
				note += " at " + fmtNum(r.Rate) + "/s"
			}
			curves = append(curves, curve{label: r.Label(), col: pal.color(r.Target, r.Kind, r.Variant), pts: r.curve(), note: note})
		}
		if len(curves) == 0 {
			continue
		}
		title := workloadTitle(first)
		sub := g.mode + " loop, " + strconv.Itoa(first.Concurrency) + " callers"
		file := "latency-" + g.workload + "-" + g.mode
		if g.mode == "open" {
			if g.basis == same {
				sub = "open loop at " + fmtNum(first.Rate) + " requests/s for every target (" + g.basis + "), " + strconv.Itoa(first.Concurrency) + " callers"
			} else {
				sub = "open loop, each Redis at half its own peak, fcap at the rate of its Redis counterpart, " + strconv.Itoa(first.Concurrency) + " callers"
				file += "-redis-rate"
				if g.basis != ownPeak {
					file += strconv.Itoa(i)
				}
			}
		}
		sub += "; latency from each request's scheduled start"
		goal := 0.0
		if g.workload == "check" && g.mode == "open" {
			goal = 1000
		}
		if err := add("Latency: "+title+", "+sub, file+".png", func(path string) error {
			return drawLatency(path, title, sub, curves, goal)
		}); err != nil {
			return nil, err
		}
	}
	// Memory.
	var heap, rss barPanel
	for _, r := range rep.Results {
		if r.Memory == nil {
			continue
		}
		label := r.Target + " (" + r.Memory.Method + ")"
		col := pal.color(r.Target, r.Kind, r.Memory.Method)
		heap.bars = append(heap.bars, bar{label: label, value: r.Memory.BytesPerKey, col: col})
		rss.bars = append(rss.bars, bar{label: label, value: r.Memory.RSSPerKey, col: col})
	}
	if len(heap.bars) > 0 {
		heap.title = "bytes per key: fcap node's Go heap after GC, Redis used_memory"
		rss.title = "RSS bytes per key (the process's resident memory growth)"
		if err := add("Memory per key", "memory.png", func(path string) error {
			m := rep.memShape()
			return drawBars(path, "Memory per key (less is better)", m, []barPanel{heap, rss})
		}); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// isCeiling reports whether r is the suite's generator-ceiling run (the
// null target measured first), which charts leave out.
func (r *Result) isCeiling() bool { return r.Kind == "null" && r.Target == "null" }

// curve returns the result's latency percentiles in ascending order.
func (r *Result) curve() [][2]float64 {
	var pts [][2]float64
	for k, v := range r.Percentiles {
		p, err := strconv.ParseFloat(k, 64)
		if err == nil {
			pts = append(pts, [2]float64{p, v})
		}
	}
	slices.SortFunc(pts, func(a, b [2]float64) int { return cmpF(a[0], b[0]) })
	return pts
}

func workloadTitle(r *Result) string {
	switch r.Workload {
	case "allow":
		return "allow: single Allow calls"
	case "check":
		return "check: " + strconv.Itoa(r.Candidates) + "-candidate ad requests"
	case "mix":
		return "mix: " + strconv.Itoa(r.Candidates) + "-candidate ad requests + records"
	}
	return r.Workload
}

package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
)

// "fcapbench floor-median a.json b.json c.json": the medians over
// several --floor runs of the same command, as a markdown table, one row
// per open loop (by position: every file must hold the same sequence of
// runs, as the same command writes).

// floorRows pairs each open-loop target result in rs with the echo run
// just before it, as --floor writes them; with --echo-procs, the echo
// over several processes sits between the one-process echo and the
// target.
func floorRows(rs []*Result) []floorRow {
	isEcho := func(r *Result) bool {
		return r.Mode == "open" && (r.Kind == "echo" || r.EchoProcs > 1 || r.EchoWorkUS > 0 || r.EchoCallerWorkUS > 0)
	}
	var out []floorRow
	for i := 1; i < len(rs); i++ {
		if !isEcho(rs[i-1]) || isEcho(rs[i]) || rs[i].Mode != "open" {
			continue
		}
		if p := rs[i-1]; p.EchoProcs > 1 {
			if i >= 2 && isEcho(rs[i-2]) && rs[i-2].EchoProcs <= 1 {
				out = append(out, compareFloors(rs[i-2], p, rs[i]))
			}
			continue
		}
		out = append(out, compareFloors(rs[i-1], nil, rs[i]))
	}
	return out
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// floorColumn is a figure of the median table: a name and how to read
// and print it from a row.
type floorColumn struct {
	name string
	get  func(f floorRow) float64
	fmt  func(float64) string
}

// floorMedianColumns are the figures of the median table.
var floorMedianColumns = []floorColumn{
	{"rate/s", func(f floorRow) float64 { return f.Target.Rate }, func(v float64) string { return fmt.Sprintf("%.0f", v) }},
	{"echo call p50", func(f floorRow) float64 { return f.Echo.CallP50 }, fmtLatency},
	{"echo call p99", func(f floorRow) float64 { return f.Echo.CallP99 }, fmtLatency},
	{"echo call p99.9", func(f floorRow) float64 { return f.Echo.CallP999 }, fmtLatency},
	{"echo queue p99", func(f floorRow) float64 { return f.Echo.QueueP99 }, fmtLatency},
	{"echo past cut-off", func(f floorRow) float64 { return f.EchoOver }, fmtShare},
	{"target call p50", func(f floorRow) float64 { return f.Target.CallP50 }, fmtLatency},
	{"target call p99", func(f floorRow) float64 { return f.Target.CallP99 }, fmtLatency},
	{"target call p99.9", func(f floorRow) float64 { return f.Target.CallP999 }, fmtLatency},
	{"target queue p99", func(f floorRow) float64 { return f.Target.QueueP99 }, fmtLatency},
	{"target past cut-off", func(f floorRow) float64 { return f.TargetOver }, fmtShare},
	{"fail-open", func(f floorRow) float64 { return f.FailOpen }, fmtShare},
	{"call p99 / echo", func(f floorRow) float64 { return f.CallP99Ratio }, fmtRatio},
	{"fail-open / echo past cut-off", func(f floorRow) float64 { return ratio(f.FailOpen, f.EchoOver) }, fmtRatio},
	{"hedged requests", func(f floorRow) float64 { return f.Hedged }, fmtShare},
	{"host busy", func(f floorRow) float64 { return (f.Echo.HostBusyPct + f.Target.HostBusyPct) / 2 }, fmtWholePct},
	{"host steal", floorRow.steal, fmtTenthPct},
	// The generator's own CPU in each target's rounds: near 100% its
	// queue, not the target, makes the tail (and a client that costs the
	// caller more CPU than the echo's shows here first).
	{"generator cpu, echo", func(f floorRow) float64 { return f.Echo.GenCPUPct }, fmtWholePct},
	{"generator cpu, target", func(f floorRow) float64 { return f.Target.GenCPUPct }, fmtWholePct},
}

// fmtWholePct prints a percentage to the unit: 87%.
func fmtWholePct(v float64) string { return fmt.Sprintf("%.0f%%", v) }

// fmtTenthPct prints a percentage to a tenth: 0.2%.
func fmtTenthPct(v float64) string { return fmt.Sprintf("%.1f%%", v) }

// steal is the share of the host's CPUs its hypervisor took while the
// row's floors and target ran, in percent: the most of any of them.
func (f floorRow) steal() float64 {
	s := max(f.Echo.HostStealPct, f.Target.HostStealPct)
	if f.Procs != nil {
		s = max(s, f.Procs.HostStealPct)
	}
	return s
}

// defaultMaxSteal is floor-median's --max-steal: on this project's VMs
// the hypervisor takes 0.0-0.1% of the CPUs in a quiet hour and 5-40% in
// a busy one, when the bare echo's own p99 grows tenfold; a run in
// between is left out too, as no longer the machine's floor.
const defaultMaxSteal = 1.0

// disturbed reports the steal of a run that any row of exceeds max.
func disturbed(rows []floorRow, max float64) (float64, bool) {
	worst := 0.0
	for _, f := range rows {
		worst = math.Max(worst, f.steal())
	}
	return worst, worst > max
}

// exitDisturbed is floor-median's exit status when every run it was
// given was disturbed: scripts/bench-floor.sh runs such a run again.
const exitDisturbed = 3

// floorProcsColumns follow floorMedianColumns when the runs have a floor
// over several echo processes (--echo-procs); "echo xN" names it.
var floorProcsColumns = []floorColumn{
	{"echo xN call p99", func(f floorRow) float64 { return f.Procs.CallP99 }, fmtLatency},
	{"echo xN call p99.9", func(f floorRow) float64 { return f.Procs.CallP999 }, fmtLatency},
	{"echo xN past cut-off", func(f floorRow) float64 { return f.ProcsFloor.EchoOver }, fmtShare},
	{"call p99 / echo xN", func(f floorRow) float64 { return f.ProcsFloor.CallP99Ratio }, fmtRatio},
	{"fail-open / echo xN past cut-off", func(f floorRow) float64 { return ratio(f.FailOpen, f.ProcsFloor.EchoOver) }, fmtRatio},
}

// floorColumns are the columns of runs' median table: floorProcsColumns
// too when their rows have a floor over several processes, with N named.
// Every row of every run must have the same floors (the same command).
func floorColumns(runs [][]floorRow) ([]floorColumn, error) {
	procs := func(f floorRow) int {
		if f.Procs == nil {
			return 1
		}
		return f.Procs.EchoProcs
	}
	n := procs(runs[0][0])
	work := echoWork(runs[0][0])
	for i, r := range runs {
		for _, f := range r {
			if procs(f) != n {
				return nil, fmt.Errorf("run %d has a floor over %d echo processes, run 0 over %d: not the same command", i, procs(f), n)
			}
			if w := echoWork(f); w != work {
				return nil, fmt.Errorf("run %d's floor %s, run 0's %s: not the same command", i, w, work)
			}
		}
	}
	cols := floorMedianColumns
	if n == 1 {
		return cols, nil
	}
	cols = slices.Clone(cols)
	for _, c := range floorProcsColumns {
		c.name = strings.ReplaceAll(c.name, "xN", fmt.Sprintf("x%d", n))
		cols = append(cols, c)
	}
	return cols, nil
}

// echoWork says what work a row's floor did: "did no work" for the
// bare echo, or what its server and caller spent (--echo-work,
// --echo-caller-work).
func echoWork(f floorRow) string {
	if f.Echo.EchoWorkUS == 0 && f.Echo.EchoCallerWorkUS == 0 {
		return "did no work"
	}
	return fmt.Sprintf("did work: %gus per request on the server, %gus per call in the caller", f.Echo.EchoWorkUS, f.Echo.EchoCallerWorkUS)
}

func fmtShare(v float64) string { return fmt.Sprintf("%.3f%%", 100*v) }

// floorMedians returns the table's columns and, per open loop, the
// median of every column over the runs, formatted; runs[i] are the rows
// of run i.
func floorMedians(runs [][]floorRow) ([]floorColumn, [][]string, error) {
	if len(runs) == 0 {
		return nil, nil, fmt.Errorf("no runs")
	}
	n := len(runs[0])
	for i, r := range runs {
		if len(r) != n || n == 0 {
			return nil, nil, fmt.Errorf("run %d has %d floor comparisons, run 0 has %d: not the same command", i, len(r), n)
		}
	}
	cols, err := floorColumns(runs)
	if err != nil {
		return nil, nil, err
	}
	var out [][]string
	for row := range n {
		var cells []string
		for _, c := range cols {
			var xs []float64
			for _, r := range runs {
				xs = append(xs, c.get(r[row]))
			}
			cells = append(cells, c.fmt(median(xs)))
		}
		out = append(out, cells)
	}
	return cols, out, nil
}

func runFloorMedian(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("fcapbench floor-median", flag.ContinueOnError)
	fs.SetOutput(stderr)
	maxSteal := fs.Float64("max-steal", defaultMaxSteal, "leave out a run in which the hypervisor took more than this percent of the host's CPUs (100: keep every run)")
	fs.Usage = func() {
		fmt.Fprint(stderr, "usage: fcapbench floor-median [--max-steal PCT] RESULTS.json...\n\nthe medians over --floor runs of one command (their --json files), as a markdown table;\nruns the host disturbed are left out and named (exit status 3 when all were)\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return 2
	}
	if *maxSteal < 0 {
		fmt.Fprintf(stderr, "fcapbench floor-median: --max-steal must be 0 or more, got %v\n", *maxSteal)
		return 2
	}
	var runs [][]floorRow
	var left []string
	for _, path := range fs.Args() {
		rs, err := readResults(path)
		if err != nil {
			fmt.Fprintf(stderr, "fcapbench floor-median: %v\n", err)
			return 1
		}
		rows := floorRows(rs)
		if steal, bad := disturbed(rows, *maxSteal); bad {
			left = append(left, fmt.Sprintf("%s (steal %.1f%%)", path, steal))
			continue
		}
		runs = append(runs, rows)
	}
	if len(runs) == 0 {
		fmt.Fprintf(stderr, "fcapbench floor-median: every run was disturbed: the hypervisor took more than %v%% of the host's CPUs in %s; run again when it is quiet, or raise --max-steal\n",
			*maxSteal, strings.Join(left, ", "))
		return exitDisturbed
	}
	cols, rows, err := floorMedians(runs)
	if err != nil {
		fmt.Fprintf(stderr, "fcapbench floor-median: %v\n", err)
		return 1
	}
	var head, rule []string
	for _, c := range cols {
		head, rule = append(head, c.name), append(rule, "---")
	}
	if len(runs) == 1 {
		fmt.Fprintf(stdout, "one run, no median")
	} else {
		fmt.Fprintf(stdout, "medians of %d runs", len(runs))
	}
	if w := echoWork(runs[0][0]); w != "did no work" {
		fmt.Fprintf(stdout, "; the floor (echo) %s", w)
	}
	if len(left) > 0 {
		fmt.Fprintf(stdout, "; left out, the host's hypervisor having taken more than %v%% of its CPUs: %s", *maxSteal, strings.Join(left, ", "))
	}
	fmt.Fprintf(stdout, "\n\n| %s |\n|%s|\n", strings.Join(head, " | "), strings.Join(rule, "|"))
	for _, r := range rows {
		fmt.Fprintf(stdout, "| %s |\n", strings.Join(r, " | "))
	}
	return 0
}

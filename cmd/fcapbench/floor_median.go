package main

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
)

// "fcapbench floor-median a.json b.json c.json": the medians over
// several --floor runs of the same command, as a markdown table, one row
// per open loop (by position: every file must hold the same sequence of
// runs, as the same command writes).

// floorRows pairs each open-loop target result in rs with the echo run
// just before it, as --floor writes them.
func floorRows(rs []*Result) []floorRow {
	var out []floorRow
	for i := 1; i < len(rs); i++ {
		if rs[i-1].Kind == "echo" && rs[i].Kind != "echo" && rs[i].Mode == "open" && rs[i-1].Mode == "open" {
			out = append(out, compareFloor(rs[i-1], rs[i]))
		}
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

// floorMedianColumns are the figures of the median table: a name and how
// to read it from a row.
var floorMedianColumns = []struct {
	name string
	get  func(f floorRow) float64
	fmt  func(float64) string
}{
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
	{"host busy", func(f floorRow) float64 { return (f.Echo.HostBusyPct + f.Target.HostBusyPct) / 2 }, func(v float64) string { return fmt.Sprintf("%.0f%%", v) }},
}

func fmtShare(v float64) string { return fmt.Sprintf("%.3f%%", 100*v) }

// floorMedians returns, per open loop, the median of every column over
// the runs, formatted; runs[i] are the rows of run i.
func floorMedians(runs [][]floorRow) ([][]string, error) {
	if len(runs) == 0 {
		return nil, fmt.Errorf("no runs")
	}
	n := len(runs[0])
	for i, r := range runs {
		if len(r) != n || n == 0 {
			return nil, fmt.Errorf("run %d has %d floor comparisons, run 0 has %d: not the same command", i, len(r), n)
		}
	}
	var out [][]string
	for row := range n {
		var cells []string
		for _, c := range floorMedianColumns {
			var xs []float64
			for _, r := range runs {
				xs = append(xs, c.get(r[row]))
			}
			cells = append(cells, c.fmt(median(xs)))
		}
		out = append(out, cells)
	}
	return out, nil
}

func runFloorMedian(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("fcapbench floor-median", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, "usage: fcapbench floor-median RESULTS.json...\n\nthe medians over --floor runs of one command (their --json files), as a markdown table\n")
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
	var runs [][]floorRow
	for _, path := range fs.Args() {
		rs, err := readResults(path)
		if err != nil {
			fmt.Fprintf(stderr, "fcapbench floor-median: %v\n", err)
			return 1
		}
		runs = append(runs, floorRows(rs))
	}
	rows, err := floorMedians(runs)
	if err != nil {
		fmt.Fprintf(stderr, "fcapbench floor-median: %v\n", err)
		return 1
	}
	var head, rule []string
	for _, c := range floorMedianColumns {
		head, rule = append(head, c.name), append(rule, "---")
	}
	fmt.Fprintf(stdout, "medians of %d runs\n\n| %s |\n|%s|\n", len(runs), strings.Join(head, " | "), strings.Join(rule, "|"))
	for _, r := range rows {
		fmt.Fprintf(stdout, "| %s |\n", strings.Join(r, " | "))
	}
	return 0
}

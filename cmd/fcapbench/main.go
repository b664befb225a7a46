// Command fcapbench measures fcap, and the standard Redis recipes beside
// it, with the same workload and the same measuring code.
//
//	fcapbench --addr 127.0.0.1:7700 --workload check --duration 10s
//
// It drives a target closed loop (--concurrency callers as fast as it
// answers) or open loop (--rate requests a second on a fixed schedule,
// latency measured from each request's scheduled start, corrected for
// coordinated omission), prints a live progress line every second and a
// summary, and writes the results as JSON (--json). --half-peak runs
// closed loop, then open loop at half the rate it reached: the latency
// figure that matters for capacity planning.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"runtime/trace"
	"time"
)

func main() {
	os.Exit(runMain(os.Args[1:], os.Stdout, os.Stderr))
}

type options struct {
	target, addr, jsonOut string
	w                     workload
	concurrency           int
	rate                  float64
	warmup, duration      time.Duration
	timeout               time.Duration
	halfPeak, quiet       bool
	conns                 int
	cpuProfile, traceOut  string
	seed                  uint64
}

func parse(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("fcapbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.target, "target", "fcap", "system under test: fcap, or null (answers at once: the generator's own floor)")
	fs.StringVar(&o.addr, "addr", "127.0.0.1:7700", "target address(es), comma-separated (fcap: any nodes' data-plane addresses)")
	fs.StringVar(&o.w.Kind, "workload", "check", "allow (single Allow calls), check (ad requests of --candidates campaigns) or mix (check plus records)")
	fs.IntVar(&o.w.Viewers, "viewers", 1_000_000, "viewer ids, Zipf-distributed")
	fs.IntVar(&o.w.Campaigns, "campaigns", 5000, "campaign ids")
	fs.IntVar(&o.w.Candidates, "candidates", 100, "campaigns per ad request")
	fs.Float64Var(&o.w.Zipf, "zipf", 1.1, "Zipf exponent s of viewer popularity (> 1)")
	fs.Float64Var(&o.w.ZipfV, "zipf-v", 1000, "Zipf offset v: P(viewer k) ~ (v+k)^-s. 1000 gives the busiest of 1M viewers 0.02% of requests (a heavy human); 1 gives it 9% (one bot)")
	fs.Float64Var(&o.w.RecordRatio, "record-ratio", 0.03, "mix: impressions recorded per ad request")
	fs.Int64Var(&o.w.Limit, "limit", 5, "the campaign cap's limit")
	fs.Int64Var(&o.w.Window, "window", 86_400_000, "the campaign cap's window, milliseconds")
	fs.IntVar(&o.concurrency, "concurrency", 64, "closed loop: concurrent callers; open loop: at least this many")
	fs.IntVar(&o.conns, "conns", 2, "fcap: client connections per node")
	fs.Float64Var(&o.rate, "rate", 0, "open loop: requests per second (0: closed loop)")
	fs.DurationVar(&o.warmup, "warmup", 2*time.Second, "excluded from the figures")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "measured time")
	fs.DurationVar(&o.timeout, "timeout", 50*time.Millisecond, "per-call deadline")
	fs.BoolVar(&o.halfPeak, "half-peak", false, "closed loop, then open loop at half the rate reached")
	fs.BoolVar(&o.quiet, "quiet", false, "no progress line")
	fs.StringVar(&o.jsonOut, "json", "", "write the results to this JSON file")
	fs.Uint64Var(&o.seed, "seed", 1, "random seed of the workload")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of fcapbench itself to this file")
	fs.StringVar(&o.traceOut, "trace", "", "write a Go execution trace of fcapbench itself to this file")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if err := o.w.validate(); err != nil {
		return nil, err
	}
	if o.concurrency < 1 || o.rate < 0 || o.duration <= 0 || o.warmup < 0 || o.timeout <= 0 {
		return nil, fmt.Errorf("need --concurrency >= 1, --rate >= 0, --duration > 0, --warmup >= 0, --timeout > 0")
	}
	switch o.target {
	case "fcap", "null":
	default:
		return nil, fmt.Errorf("unknown --target %q", o.target)
	}
	return o, nil
}

func runMain(args []string, stdout, stderr io.Writer) int {
	o, err := parse(args, stderr)
	if err != nil {
		if err != flag.ErrHelp {
			fmt.Fprintf(stderr, "fcapbench: %v\n", err)
		}
		return 2
	}
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			fmt.Fprintf(stderr, "fcapbench: %v\n", err)
			return 2
		}
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	if o.traceOut != "" {
		f, err := os.Create(o.traceOut)
		if err != nil {
			fmt.Fprintf(stderr, "fcapbench: %v\n", err)
			return 2
		}
		trace.Start(f)
		defer trace.Stop()
	}
	x := newIDs(&o.w)
	var tgt target = nullTarget{}
	if o.target == "fcap" {
		ft, err := newFcapTarget(o.addr, &o.w, x, o.timeout, o.conns)
		if err != nil {
			fmt.Fprintf(stderr, "fcapbench: %v\n", err)
			return 1
		}
		tgt = ft
	}
	defer tgt.Close()
	var progress io.Writer = stderr
	if o.quiet {
		progress = nil
	}
	base := run{target: tgt, w: &o.w, ids: x, concurrency: o.concurrency, rate: o.rate,
		warmup: o.warmup, duration: o.duration, timeout: o.timeout, seed: o.seed, progress: progress}
	var results []*Result
	res, err := base.exec()
	if err != nil {
		fmt.Fprintf(stderr, "fcapbench: %v\n", err)
		return 1
	}
	results = append(results, res)
	if o.halfPeak && o.rate == 0 {
		half := base
		half.rate = res.RequestsPS / 2
		res, err := half.exec()
		if err != nil {
			fmt.Fprintf(stderr, "fcapbench: %v\n", err)
			return 1
		}
		results = append(results, res)
	}
	printTable(stdout, results)
	for _, r := range results {
		if r.Mode == "open" && float64(r.Skipped) > 0.01*r.Rate*(r.Seconds+o.warmup.Seconds()) {
			fmt.Fprintf(stderr, "fcapbench: warning: the generator skipped %d scheduled requests (it shares the CPU with the target); the achieved rate is %.0f/s\n", r.Skipped, r.RequestsPS)
		}
	}
	if o.jsonOut != "" {
		b, _ := json.MarshalIndent(results, "", "  ")
		if err := os.WriteFile(o.jsonOut, append(b, '\n'), 0o644); err != nil {
			fmt.Fprintf(stderr, "fcapbench: %v\n", err)
			return 1
		}
	}
	return 0
}

func printTable(w io.Writer, results []*Result) {
	fmt.Fprintf(w, "%-8s %-6s %-6s %6s %10s %12s %13s %9s %9s %9s %9s %7s %7s %6s\n",
		"target", "work", "mode", "conc", "rate", "requests/s", "checks/s", "p50 us", "p99 us", "p999 us", "max us", "errors", "failed", "steal")
	for _, r := range results {
		rate := "-"
		if r.Rate > 0 {
			rate = fmt.Sprintf("%.0f", r.Rate)
		}
		fmt.Fprintf(w, "%-8s %-6s %-6s %6d %10s %12.0f %13.0f %9.1f %9.1f %9.1f %9.1f %7d %7d %5.1f%%\n",
			r.Target, r.Workload, r.Mode, r.Concurrency, rate, r.RequestsPS, r.ChecksPS, r.P50, r.P99, r.P999, r.Max, r.Errors, r.FailedOver, r.HostStealPct)
	}
}

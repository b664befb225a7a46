// Command fcapbench measures fcap, and the standard Redis recipes beside
// it, with the same workload and the same measuring code.
//
//	fcapbench --addr 127.0.0.1:7700 --workload check --duration 10s
//	fcapbench --target redis-sliding --addr 127.0.0.1:6379 --redis-check lua
//	fcapbench load --target fcap --addr 127.0.0.1:7700 --http 127.0.0.1:7780
//	fcapbench suite --sut fcap-1=fcap@127.0.0.1:7700 --sut redis=redis-sliding@127.0.0.1:6379 --out DIR
//	fcapbench report --in DIR/results.json --out DIR
//	fcapbench --addr 127.0.0.1:7700 --rate 2000 --timeout 5ms --floor
//	fcapbench echo-server --addr 127.0.0.1:7799
//
// With no subcommand it drives one target closed loop (--concurrency
// callers as fast as it answers) or open loop (--rate requests a second
// on a fixed schedule, latency measured from each request's scheduled
// start, corrected for coordinated omission), prints a live progress line
// every second and a summary, and writes the results as JSON (--json).
// --half-peak runs closed loop, then open loop at half the rate it
// reached: the latency figure that matters for capacity planning.
// --floor runs every open loop first against a bare echo server (the
// machine's floor: "echo-server", started by fcapbench unless
// --echo-addr names one) with the same load and pacing, and prints the
// target beside it: the ratio of the p99s and the share of calls past
// the client's cut-off (--floor-rounds alternates the two several times,
// so a machine busy with something else weighs on both alike).
// --echo-procs N, for a cluster of N nodes, adds a second floor in the
// same rounds: N echo processes, each call sent whole to the one its
// viewer hashes to, as the fcap client sends a check to its viewer's
// owner.
//
// "load" fills a target with the memory benchmark's data and reports
// bytes per key. "suite" runs every workload against several targets,
// then writes the JSON, PNG charts and a markdown report with the fcap /
// Redis ratios ("report" redraws those from a JSON file).
// scripts/bench.sh starts the servers and runs the suite.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"runtime/trace"
	"slices"
	"strings"
	"time"

	"github.com/fcap-io/fcap/client"
)

func main() {
	os.Exit(runMain(os.Args[1:], os.Stdout, os.Stderr))
}

func runMain(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		switch args[0] {
		case "suite":
			return runSuite(args[1:], stdout, stderr)
		case "load":
			return runLoad(args[1:], stdout, stderr)
		case "report":
			return runReport(args[1:], stdout, stderr)
		case "echo-server":
			return runEchoServer(args[1:], stdout, stderr)
		case "floor-median":
			return runFloorMedian(args[1:], stdout, stderr)
		}
	}
	return runOne(args, stdout, stderr)
}

type options struct {
	target, name, addr, jsonOut string
	w                           workload
	concurrency                 int
	rate                        float64
	warmup, duration            time.Duration
	timeout                     time.Duration
	halfPeak, quiet             bool
	floor, coarsePacer, phases  bool
	paceGrain                   time.Duration
	echoAddr, echoCPUs          string
	echoWork, echoCallerWork    time.Duration
	floorRounds, echoProcs      int
	conns                       int
	prepared                    bool
	redisCheck                  string
	prof                        profiles
	seed                        uint64
	tlsCA, tlsCert, tlsKey      string
	tokenFile                   string
}

// micros is d in microseconds.
func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// maxEchoProcs bounds --echo-procs: a floor for a cluster on one
// machine, not a fleet.
const maxEchoProcs = 64

// workloadFlags defines the flags that shape the load; every subcommand
// that drives a target shares them.
func workloadFlags(fs *flag.FlagSet, w *workload) {
	fs.IntVar(&w.Viewers, "viewers", 1_000_000, "viewer ids, Zipf-distributed")
	fs.IntVar(&w.Campaigns, "campaigns", 5000, "campaign ids")
	fs.IntVar(&w.Candidates, "candidates", 100, "campaigns per ad request")
	fs.Float64Var(&w.Zipf, "zipf", 1.1, "Zipf exponent s of viewer popularity (> 1)")
	fs.Float64Var(&w.ZipfV, "zipf-v", 1000, "Zipf offset v: P(viewer k) ~ (v+k)^-s. 1000 gives the busiest of 1M viewers 0.02% of requests (a heavy human); 1 gives it 9% (one bot)")
	fs.Float64Var(&w.RecordRatio, "record-ratio", 0.03, "mix: impressions recorded per ad request")
	fs.Int64Var(&w.Limit, "limit", 5, "the campaign cap's limit")
	fs.Int64Var(&w.Window, "window", 86_400_000, "the campaign cap's window, milliseconds")
	fs.StringVar(&w.Mode, "mode", "soft", "fcap: the campaign cap's consistency: soft (backups replicated asynchronously) or strict (a write is acknowledged once every backup applied it)")
}

func parse(args []string, stderr io.Writer) (*options, error) {
	o := &options{}
	fs := flag.NewFlagSet("fcapbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, "usage: fcapbench [flags]              drive one target (below)\n"+
			"       fcapbench load [flags]         bytes per key of a target loaded with 1M keys\n"+
			"       fcapbench suite [flags]        every workload against several targets, with the report\n"+
			"       fcapbench report [flags]       redraw the report from a results.json\n"+
			"       fcapbench echo-server [flags]  answer frames of fcap's sizes at once: the floor (--target echo)\n"+
			"       fcapbench floor-median FILE... medians over --floor runs (their --json files)\n\n")
		fs.PrintDefaults()
	}
	fs.StringVar(&o.target, "target", "fcap", "system under test: "+strings.Join(targetKinds(), ", ")+" (null answers at once: the generator's own floor; raw sends fcap nodes one prebuilt request with the echo's caller: the node's share of a call)")
	fs.StringVar(&o.name, "name", "", "the target's name in the results (default: --target)")
	fs.StringVar(&o.addr, "addr", "127.0.0.1:7700", "target address(es), comma-separated (fcap: any nodes' data-plane addresses; Redis Cluster: any nodes')")
	fs.StringVar(&o.w.Kind, "workload", "check", "allow (single Allow calls), check (ad requests of --candidates campaigns) or mix (check plus records)")
	workloadFlags(fs, &o.w)
	fs.IntVar(&o.concurrency, "concurrency", 64, "concurrent callers, closed and open loop (Redis: also its pool's connections)")
	fs.IntVar(&o.conns, "conns", 2, "fcap, echo: client connections per node")
	fs.BoolVar(&o.prepared, "prepared", false, "fcap, check and mix: each campaign's candidate prepared once (client.PrepareCandidate), every check of prepared candidates (CheckPreparedInto); false: CheckInto, the caps encoded at every check")
	fs.StringVar(&o.tlsCA, "tls-ca", "", "fcap: PEM CA certificates that verify the nodes: connect over TLS")
	fs.StringVar(&o.tlsCert, "tls-cert", "", "fcap: PEM client certificate, for nodes that require one")
	fs.StringVar(&o.tlsKey, "tls-key", "", "fcap: PEM private key of --tls-cert")
	fs.StringVar(&o.tokenFile, "token-file", "", "fcap: file holding the token to present (an adserver token)")
	fs.StringVar(&o.redisCheck, "redis-check", "pipeline", "Redis: how a check asks: pipeline (one pipeline of per-key reads) or lua (one call over all keys: EVALSHA for sliding, MGET for fixed)")
	fs.Float64Var(&o.rate, "rate", 0, "open loop: requests per second (0: closed loop)")
	fs.DurationVar(&o.warmup, "warmup", 2*time.Second, "excluded from the figures")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "measured time")
	fs.DurationVar(&o.timeout, "timeout", 50*time.Millisecond, "per-call deadline (open loop: a request queued longer is given up)")
	fs.BoolVar(&o.halfPeak, "half-peak", false, "closed loop, then open loop at half the rate reached")
	fs.BoolVar(&o.floor, "floor", false, "open loop: the same load against a bare echo server first, in the same run, and the target's figures beside it")
	fs.BoolVar(&o.coarsePacer, "coarse-pacer", false, "open loop: pace with Go's time.Sleep instead of a precise timer, as fcapbench did before (late by up to 1ms: to see the generator's own queue)")
	fs.BoolVar(&o.phases, "phases", false, "fcap: trace every measured call through the client (client.WithCallTrace) and print where the calls spent their time: each step's percentiles, and its mean in the calls at or past the call p99")
	fs.DurationVar(&o.paceGrain, "pace-grain", defaultPaceGrain, "open loop: with requests closer together than this, wake once per this span and release the ones due together (a precise wake costs 15-20us of CPU on a VM; the wait counts in the queue, not the call); 0: a wake per request")
	fs.IntVar(&o.floorRounds, "floor-rounds", 1, "--floor: alternate the echo and the target this many times, --duration split between the rounds (a busy machine then weighs on both alike)")
	fs.StringVar(&o.echoCPUs, "echo-cpus", "", "--floor: pin the echo server fcapbench starts to these CPUs (taskset -c list), where the target's servers run")
	fs.StringVar(&o.echoAddr, "echo-addr", "", "--floor: a running \"fcapbench echo-server\" (default: start one); with --echo-procs N, N of them, comma-separated")
	fs.DurationVar(&o.echoWork, "echo-work", 0, "--floor: the echo server fcapbench starts spends this long on the CPU for each request before answering (echo-server --work): with a node's handling time per request, the floor of a server doing fcap's work; 0: the bare floor")
	fs.DurationVar(&o.echoCallerWork, "echo-caller-work", 0, "--floor: each echo call spends this long on the CPU before it sends, as the client's encoding does; 0: none")
	fs.IntVar(&o.echoProcs, "echo-procs", 1, "--floor: for a target of N nodes, N echo processes as a second floor in the same rounds (1: the one-process echo alone), each call going whole to the process its viewer hashes to, as a check goes to its viewer's owner; the first also serves the one-process floor")
	fs.BoolVar(&o.quiet, "quiet", false, "no progress line")
	fs.StringVar(&o.jsonOut, "json", "", "write the results to this JSON file")
	fs.Uint64Var(&o.seed, "seed", 1, "random seed of the workload")
	o.prof.flags(fs)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if err := o.w.validate(); err != nil {
		return nil, err
	}
	if o.concurrency < 1 || o.rate < 0 || o.duration <= 0 || o.warmup < 0 || o.timeout <= 0 {
		return nil, fmt.Errorf("need --concurrency >= 1, --rate >= 0, --duration > 0, --warmup >= 0, --timeout > 0")
	}
	if !slices.Contains(targetKinds(), o.target) {
		return nil, fmt.Errorf("unknown --target %q (want one of %s)", o.target, strings.Join(targetKinds(), ", "))
	}
	if o.floor && o.rate == 0 && !o.halfPeak {
		return nil, errors.New("--floor compares open loops: give --rate or --half-peak")
	}
	if o.floorRounds < 1 || o.duration/time.Duration(max(o.floorRounds, 1)) < 100*time.Millisecond {
		return nil, errors.New("need --floor-rounds >= 1 and at least 100ms of --duration per round")
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"--echo-work", o.echoWork}, {"--echo-caller-work", o.echoCallerWork}} {
		if d.v < 0 || d.v > maxEchoWork {
			return nil, fmt.Errorf("need 0 <= %s <= %v, got %v", d.name, maxEchoWork, d.v)
		}
	}
	if o.echoWork > 0 && o.echoAddr != "" {
		return nil, errors.New("--echo-work is for the echo server fcapbench starts; start one given by --echo-addr with echo-server --work")
	}
	if o.echoProcs < 1 || o.echoProcs > maxEchoProcs {
		return nil, fmt.Errorf("need 1 <= --echo-procs <= %d, got %d", maxEchoProcs, o.echoProcs)
	}
	if n := len(strings.Split(o.echoAddr, ",")); o.echoAddr != "" && n != o.echoProcs {
		return nil, fmt.Errorf("--echo-addr names %d echo servers, --echo-procs asks for %d", n, o.echoProcs)
	}
	if o.floor && o.target == "echo" {
		return nil, errors.New("--floor compares a target with the echo: the target cannot be the echo itself")
	}
	if o.paceGrain < 0 || o.paceGrain > 10*time.Millisecond {
		return nil, fmt.Errorf("need 0 <= --pace-grain <= 10ms, got %v", o.paceGrain)
	}
	if o.redisCheck != "pipeline" && o.redisCheck != "lua" {
		return nil, fmt.Errorf("--redis-check must be pipeline or lua, got %q", o.redisCheck)
	}
	return o, nil
}

func runOne(args []string, stdout, stderr io.Writer) int {
	o, err := parse(args, stderr)
	if err != nil {
		if err != flag.ErrHelp {
			fmt.Fprintf(stderr, "fcapbench: %v\n", err)
		}
		return 2
	}
	stop, err := o.prof.start()
	if err != nil {
		fmt.Fprintf(stderr, "fcapbench: %v\n", err)
		return 2
	}
	defer stop()
	x := newIDs(&o.w)
	topts := targetOpts{timeout: o.timeout, conns: o.conns, prepared: o.prepared, pool: o.concurrency, redisCheck: o.redisCheck}
	if err := o.access(&topts); err != nil {
		fmt.Fprintf(stderr, "fcapbench: %v\n", err)
		return 2
	}
	tgt, err := newTarget(o.target, o.addr, &o.w, x, topts)
	if err != nil {
		fmt.Fprintf(stderr, "fcapbench: %v\n", err)
		return 1
	}
	defer tgt.Close()
	var progress io.Writer = stderr
	if o.quiet {
		progress = nil
	}
	var echo target
	var procs *echoTarget
	if o.floor {
		var addrs []string
		if o.echoAddr != "" {
			addrs = strings.Split(o.echoAddr, ",")
		}
		childErr := &lockedWriter{w: stderr}
		for len(addrs) < o.echoProcs {
			p, err := startEchoProcess(o.echoCPUs, o.echoWork, childErr)
			if err != nil {
				fmt.Fprintf(stderr, "fcapbench: %v\n", err)
				return 1
			}
			defer p.stop()
			addrs = append(addrs, p.addr)
		}
		// The floor's caller work is the floor's alone: a raw target
		// drives the node with the echo's caller too, and does none.
		fopts := topts
		fopts.callerWork = o.echoCallerWork
		if echo, err = newTarget("echo", addrs[0], &o.w, x, fopts); err != nil {
			fmt.Fprintf(stderr, "fcapbench: %v\n", err)
			return 1
		}
		if o.echoWork > 0 || o.echoCallerWork > 0 {
			echo.(*echoTarget).name = "echo+work"
		}
		defer echo.Close()
		if len(addrs) > 1 {
			if procs, err = newEchoProcsTarget(addrs, &o.w, x, fopts); err != nil {
				fmt.Fprintf(stderr, "fcapbench: %v\n", err)
				return 1
			}
			defer procs.Close()
		}
	}
	base := run{target: tgt, w: &o.w, ids: x, concurrency: o.concurrency, rate: o.rate, name: o.name,
		warmup: o.warmup, duration: o.duration, timeout: o.timeout, seed: o.seed, progress: progress, coarsePacer: o.coarsePacer,
		paceGrain: o.paceGrain, phases: o.phases}
	var results []*Result
	var floors []floorRow
	// exec runs r and, for an open loop with --floor, the echo first
	// with the same load.
	exec := func(r run) (*Result, error) {
		if echo == nil || r.rate == 0 {
			res, err := r.exec()
			if err == nil {
				results = append(results, res)
			}
			return res, err
		}
		floor, procsRes, res, err := execFloor(r, echo, procs, o.floorRounds)
		if err != nil {
			return nil, err
		}
		floor.EchoWorkUS, floor.EchoCallerWorkUS = micros(o.echoWork), micros(o.echoCallerWork)
		results = append(results, floor)
		if procsRes != nil {
			procsRes.EchoWorkUS, procsRes.EchoCallerWorkUS = floor.EchoWorkUS, floor.EchoCallerWorkUS
			results = append(results, procsRes)
		}
		results = append(results, res)
		floors = append(floors, compareFloors(floor, procsRes, res))
		return res, nil
	}
	res, err := exec(base)
	if err != nil {
		fmt.Fprintf(stderr, "fcapbench: %v\n", err)
		return 1
	}
	if o.halfPeak && o.rate == 0 {
		if share(res.FailedOver, res.Requests) > 0.01 {
			fmt.Fprintf(stderr, "fcapbench: warning: %.1f%% of the closed loop's checks failed open: its rate counts answers the client made up at its deadline, not what the target served (find the peak with a longer --timeout, then give --rate)\n",
				100*share(res.FailedOver, res.Requests))
		}
		half := base
		half.rate = res.RequestsPS / 2
		half.rateBasis = ownPeak
		if _, err := exec(half); err != nil {
			fmt.Fprintf(stderr, "fcapbench: %v\n", err)
			return 1
		}
	}
	printTable(stdout, results)
	printFloor(stdout, floors)
	printPhases(stdout, results)
	warnSkipped(stderr, results, o.warmup)
	if o.jsonOut != "" {
		if err := writeJSON(o.jsonOut, results); err != nil {
			fmt.Fprintf(stderr, "fcapbench: %v\n", err)
			return 1
		}
	}
	return 0
}

// warnSkipped says when the generator could not keep an open loop's
// schedule: the rate it measured is then not the rate asked for.
func warnSkipped(stderr io.Writer, results []*Result, warmup time.Duration) {
	for _, r := range results {
		if r.Mode == "open" && float64(r.Skipped) > 0.01*r.Rate*(r.Seconds+warmup.Seconds()) {
			fmt.Fprintf(stderr, "fcapbench: warning: %s: the generator skipped %d scheduled requests (it shares the CPU with the target); the achieved rate is %.0f/s\n", r.Label(), r.Skipped, r.RequestsPS)
		}
	}
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// profiles are fcapbench's own profiles, to see where the generator's
// time goes.
type profiles struct {
	cpu, trace string
}

func (p *profiles) flags(fs *flag.FlagSet) {
	fs.StringVar(&p.cpu, "cpuprofile", "", "write a CPU profile of fcapbench itself to this file")
	fs.StringVar(&p.trace, "trace", "", "write a Go execution trace of fcapbench itself to this file")
}

// start begins the profiles asked for; stop ends them and closes their
// files.
func (p *profiles) start() (stop func(), err error) {
	var stops []func()
	stop = func() {
		for _, f := range slices.Backward(stops) {
			f()
		}
	}
	if p.cpu != "" {
		f, err := os.Create(p.cpu)
		if err != nil {
			return stop, err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return stop, err
		}
		stops = append(stops, func() { pprof.StopCPUProfile(); f.Close() })
	}
	if p.trace != "" {
		f, err := os.Create(p.trace)
		if err != nil {
			stop()
			return func() {}, err
		}
		if err := trace.Start(f); err != nil {
			f.Close()
			stop()
			return func() {}, err
		}
		stops = append(stops, func() { trace.Stop(); f.Close() })
	}
	return stop, nil
}

func printTable(w io.Writer, results []*Result) {
	fmt.Fprintf(w, "%-28s %-6s %-6s %5s %8s %11s %12s %9s %9s %9s %9s %9s %9s %7s %7s %7s %6s %6s\n",
		"target", "work", "mode", "conc", "rate", "requests/s", "checks/s", "p50 us", "p99 us", "p999 us", "max us", "call p99", "queue p99", "errors", "expired", "failed", "gencpu", "steal")
	for _, r := range results {
		if r.Memory != nil {
			continue
		}
		rate := "-"
		if r.Rate > 0 {
			rate = fmt.Sprintf("%.0f", r.Rate)
		}
		queue := "-"
		if r.Mode == "open" {
			queue = fmt.Sprintf("%.1f", r.QueueP99)
		}
		fmt.Fprintf(w, "%-28s %-6s %-6s %5d %8s %11.0f %12.0f %9.1f %9.1f %9.1f %9.1f %9.1f %9s %7d %7d %7d %5.0f%% %5.1f%%\n",
			r.Label(), r.Workload, r.Mode, r.Concurrency, rate, r.RequestsPS, r.ChecksPS, r.P50, r.P99, r.P999, r.Max, r.CallP99, queue, r.Errors, r.Expired, r.FailedOver, r.GenCPUPct, r.HostStealPct)
	}
}

// access fills in how to reach a secured fcap cluster: TLS and a token.
func (o *options) access(t *targetOpts) error {
	if o.tlsCA != "" || o.tlsCert != "" || o.tlsKey != "" {
		cfg, err := client.LoadTLS(o.tlsCA, o.tlsCert, o.tlsKey)
		if err != nil {
			return err
		}
		t.tls = cfg
	}
	if o.tokenFile != "" {
		b, err := os.ReadFile(o.tokenFile)
		if err != nil {
			return fmt.Errorf("--token-file: %w", err)
		}
		t.token = strings.TrimSpace(string(b))
	}
	return nil
}

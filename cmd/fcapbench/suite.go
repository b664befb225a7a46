package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The suite: every workload against every system under test with the
// same generator, then the report. Order:
//
//  1. check, closed loop, against the null target: the generator's own
//     ceiling on this machine;
//  2. allow, closed loop;
//  3. check, closed loop (the peak);
//  4. check, open loop at half the peak of the first fcap target, for
//     every target: the same offered load for all;
//  5. check, open loop at half each Redis target's own peak, and each
//     fcap target at the rate of its Redis counterpart's best variant:
//     the same load where Redis is not saturated;
//  6. mix, closed loop;
//  7. memory loads.
//
// Redis targets run the check and mix workloads once per check variant
// (a pipeline of per-key reads, and one call over all keys).

// sut is a system under test: name=kind@addrs.
type sut struct {
	name, kind, addrs string
}

func parseSUT(s string) (sut, error) {
	name, rest, ok := strings.Cut(s, "=")
	kind, addrs, ok2 := strings.Cut(rest, "@")
	if !ok || !ok2 || name == "" || kind == "" || (addrs == "" && kind != "null") {
		return sut{}, fmt.Errorf("--sut %q: want name=kind@addr[,addr...]", s)
	}
	if !slices.Contains(targetKinds(), kind) {
		return sut{}, fmt.Errorf("--sut %q: unknown kind %q (want one of %s)", s, kind, strings.Join(targetKinds(), ", "))
	}
	return sut{name: name, kind: kind, addrs: addrs}, nil
}

// parseMem reads name=kind[/method]@addr[#http]: fcap-allow=fcap/allow@127.0.0.1:7700#127.0.0.1:7780.
func parseMem(s string, shape memLoad) (memLoad, error) {
	name, rest, ok := strings.Cut(s, "=")
	kind, where, ok2 := strings.Cut(rest, "@")
	if !ok || !ok2 || name == "" {
		return memLoad{}, fmt.Errorf("--mem %q: want name=kind[/method]@addr[#http]", s)
	}
	m := shape
	m.name = name
	m.kind, m.method, _ = strings.Cut(kind, "/")
	m.addrs, m.httpAddr, _ = strings.Cut(where, "#")
	if err := m.validate(); err != nil {
		return memLoad{}, fmt.Errorf("--mem %q: %w", s, err)
	}
	return m, nil
}

// suite runs the plan above.
type suite struct {
	suts        []sut
	mems        []memLoad
	w           workload // Kind is set per run
	workloads   []string // of allow, check, mix
	concurrency int
	conns       int
	warmup      time.Duration
	duration    time.Duration
	timeout     time.Duration
	openLoop    bool // steps 4 and 5
	ownHalf     bool // step 5
	null        bool // step 1
	seed        uint64
	serverPIDs  []int     // the servers' processes: their CPU is told from other work's
	maxOther    float64   // rerun a step when other work used more than this (% of a core); 0: never
	retries     int       // reruns left for the whole suite
	progress    io.Writer // progress lines; nil for none
	log         io.Writer // one line per run
	// dial connects to a target; newTarget unless a test replaces it.
	dial func(kind, addrs string, w *workload, x *ids, o targetOpts) (target, error)
}

// variants are the check variants a target runs for a workload.
func variants(kind, workload string) []string {
	switch {
	case workload == "allow":
	case kind == "redis-sliding" || kind == "redis-cluster-sliding":
		return []string{"pipeline", "lua"}
	case isRedisKind(kind): // fixed: one call is MGET
		return []string{"pipeline", "mget"}
	}
	return []string{""}
}

// step is one planned run.
type step struct {
	s        sut
	variant  string
	workload string
	rate     float64 // 0: closed loop
	basis    string
}

func (st step) String() string {
	label := st.s.name
	if st.variant != "" {
		label += " (" + st.variant + ")"
	}
	mode := "closed loop"
	if st.rate > 0 {
		mode = fmt.Sprintf("open loop at %.0f/s (%s)", st.rate, st.basis)
	}
	return fmt.Sprintf("%s, %s, %s", label, st.workload, mode)
}

// exec runs the suite. It goes on past a failed run and returns every
// result it has with the errors.
func (s *suite) exec(ctx context.Context) ([]*Result, []error) {
	if s.dial == nil {
		s.dial = newTarget
	}
	x := newIDs(&s.w)
	var results []*Result
	var errs []error
	has := func(w string) bool { return slices.Contains(s.workloads, w) }
	runAll := func(steps []step) {
		for _, st := range steps {
			if err := ctx.Err(); err != nil {
				errs = append(errs, err)
				return
			}
			fmt.Fprintf(s.log, "== %s\n", st)
			res, err := s.runStep(st, x)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", st, err))
				fmt.Fprintf(s.log, "   failed: %v\n", err)
			}
			if res != nil {
				results = append(results, res)
			}
		}
	}
	each := func(workload string, rate float64, basis string, keep func(sut) bool) []step {
		var steps []step
		for _, t := range s.suts {
			if !keep(t) {
				continue
			}
			for _, v := range variants(t.kind, workload) {
				steps = append(steps, step{s: t, variant: v, workload: workload, rate: rate, basis: basis})
			}
		}
		return steps
	}
	all := func(sut) bool { return true }
	if s.null && has("check") {
		runAll([]step{{s: sut{name: "null", kind: "null"}, workload: "check"}})
	}
	if has("allow") {
		runAll(each("allow", 0, "", all))
	}
	if has("check") {
		runAll(each("check", 0, "", all))
		if s.openLoop {
			s.openSteps(results, runAll, each)
		}
	}
	if has("mix") {
		runAll(each("mix", 0, "", all))
	}
	for i := range s.mems {
		m := &s.mems[i]
		fmt.Fprintf(s.log, "== %s: memory, loaded with %s\n", m.name, m.method)
		res, err := m.exec(ctx, s.progress)
		if err != nil {
			errs = append(errs, fmt.Errorf("memory %s: %w", m.name, err))
			fmt.Fprintf(s.log, "   failed: %v\n", err)
		}
		if res != nil {
			results = append(results, res)
		}
	}
	return results, errs
}

// openSteps runs the open-loop checks: every target at half of the
// first fcap target's peak, then each Redis target at half its own.
func (s *suite) openSteps(closed []*Result, runAll func([]step), each func(string, float64, string, func(sut) bool) []step) {
	peak := func(name, variant string) float64 {
		for _, r := range closed {
			if r.Target == name && r.Variant == variant && r.Workload == "check" && r.Mode == "closed" {
				return r.RequestsPS
			}
		}
		return 0
	}
	for _, t := range s.suts {
		if t.kind != "fcap" {
			continue
		}
		if p := peak(t.name, ""); p > 0 {
			basis := "half of " + t.name + "'s peak"
			runAll(each("check", p/2, basis, func(sut) bool { return true }))
		}
		break
	}
	if !s.ownHalf {
		return
	}
	var steps []step
	for _, t := range s.suts {
		if !isRedisKind(t.kind) {
			continue
		}
		for _, v := range variants(t.kind, "check") {
			if p := peak(t.name, v); p > 0 {
				steps = append(steps, step{s: t, variant: v, workload: "check", rate: p / 2, basis: ownPeak})
			}
		}
	}
	// And each fcap target at the rate its Redis counterpart ran at, half
	// of that Redis's best peak: the same offered load where Redis is not
	// saturated.
	for _, pr := range s.pairs() {
		best, bestV := 0.0, ""
		for _, v := range variants(pr[1].kind, "check") {
			if p := peak(pr[1].name, v); p > best {
				best, bestV = p, v
			}
		}
		if best > 0 {
			basis := "half of " + pr[1].name + " (" + bestV + ")'s peak"
			steps = append(steps, step{s: pr[0], workload: "check", rate: best / 2, basis: basis})
		}
	}
	runAll(steps)
}

// pairs matches each Redis sliding-window target with the fcap target it
// is compared with, as the report does: the first fcap with standalone
// Redis, the second (or the first) with Redis Cluster.
func (s *suite) pairs() [][2]sut {
	var fcaps []sut
	for _, t := range s.suts {
		if t.kind == "fcap" {
			fcaps = append(fcaps, t)
		}
	}
	if len(fcaps) == 0 {
		return nil
	}
	var out [][2]sut
	for i, kind := range []string{"redis-sliding", "redis-cluster-sliding"} {
		for _, t := range s.suts {
			if t.kind == kind {
				out = append(out, [2]sut{fcaps[min(i, len(fcaps)-1)], t})
				break
			}
		}
	}
	return out
}

// runStep connects, runs and closes.
func (s *suite) runStep(st step, x *ids) (*Result, error) {
	w := s.w
	w.Kind = st.workload
	check := "pipeline"
	if st.variant == "lua" || st.variant == "mget" {
		check = "lua"
	}
	tgt, err := s.dial(st.s.kind, st.s.addrs, &w, x, targetOpts{timeout: s.timeout, conns: s.conns, pool: s.concurrency, redisCheck: check})
	if err != nil {
		return nil, err
	}
	defer tgt.Close()
	r := run{target: tgt, w: &w, ids: x, concurrency: s.concurrency, rate: st.rate, rateBasis: st.basis,
		warmup: s.warmup, duration: s.duration, timeout: s.timeout, seed: s.seed, progress: s.progress, name: st.s.name,
		serverPIDs: s.serverPIDs, paceGrain: defaultPaceGrain}
	// On a shared machine, other work (a build, tests) lands in the
	// figures: rerun a step it disturbed, while the retry budget lasts,
	// and keep the quietest attempt.
	var best *Result
	for attempt := 1; ; attempt++ {
		res, err := r.exec()
		if res != nil {
			res.Kind, res.Attempts = st.s.kind, attempt
		}
		if err != nil {
			return res, err
		}
		if best == nil || res.OtherCPUPct < best.OtherCPUPct {
			best = res
		}
		if s.maxOther <= 0 || len(s.serverPIDs) == 0 || res.OtherCPUPct <= s.maxOther || s.retries <= 0 {
			return best, nil
		}
		s.retries--
		fmt.Fprintf(s.log, "   other work used %.0f%% of a core during the run: once more in 5s (%d reruns left)\n", res.OtherCPUPct, s.retries)
		time.Sleep(5 * time.Second)
	}
}

func runSuite(args []string, stdout, stderr io.Writer) int {
	s := &suite{}
	var shape memLoad
	var workloads, outDir, mdPath, command, setup string
	var quiet bool
	var prof profiles
	var specs, memSpecs []string
	fs := flag.NewFlagSet("fcapbench suite", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Func("sut", "a system under test, name=kind@addr[,addr...] (kind: "+strings.Join(targetKinds(), ", ")+"); repeat the flag, first fcap first", func(v string) error {
		specs = append(specs, v)
		return nil
	})
	fs.Func("mem", "a memory load, name=kind[/method]@addr[#http] (fcap/allow or fcap/record with the node's metrics address after #; redis-sliding; redis-fixed), on a server holding nothing else; repeatable", func(v string) error {
		memSpecs = append(memSpecs, v)
		return nil
	})
	workloadFlags(fs, &s.w)
	memFlags(fs, &shape)
	fs.StringVar(&workloads, "workloads", "allow,check,mix", "workloads to run")
	fs.IntVar(&s.concurrency, "concurrency", 64, "concurrent callers, every target (Redis: also its pool's connections)")
	fs.IntVar(&s.conns, "conns", 2, "fcap: client connections per node")
	fs.DurationVar(&s.warmup, "warmup", 2*time.Second, "per run, excluded from the figures")
	fs.DurationVar(&s.duration, "duration", 8*time.Second, "measured time per run")
	fs.DurationVar(&s.timeout, "timeout", 50*time.Millisecond, "per-call deadline (open loop: a request queued longer is given up)")
	fs.BoolVar(&s.openLoop, "open", true, "also run the check workload open loop at half of the first fcap target's peak")
	fs.BoolVar(&s.ownHalf, "own-half", true, "also run each Redis target open loop at half its own peak")
	fs.BoolVar(&s.null, "null", true, "measure the generator's own ceiling (the null target) first")
	fs.Uint64Var(&s.seed, "seed", 1, "random seed of the workload")
	fs.Func("server-pids", "comma-separated PIDs of the servers under test, so the report tells their CPU from other work on the machine", func(v string) error {
		for _, f := range strings.Split(v, ",") {
			pid, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || pid <= 0 {
				return fmt.Errorf("bad PID %q", f)
			}
			s.serverPIDs = append(s.serverPIDs, pid)
		}
		return nil
	})
	fs.Float64Var(&s.maxOther, "max-other", 25, "with --server-pids: rerun a step during which other work used more than this share of a core (%; 0: never)")
	fs.IntVar(&s.retries, "retries", 8, "reruns the whole suite may spend on disturbed steps")
	fs.StringVar(&outDir, "out", "", "directory for results.json, report.md and the PNG charts (required)")
	fs.StringVar(&mdPath, "md", "", "also append the report to this markdown file (docs/bench/BENCHMARKS.md)")
	fs.StringVar(&command, "command", "", "the command that ran the suite, for the report (default: this fcapbench command line)")
	fs.StringVar(&setup, "setup", "", "how the machine and servers were set up, for the report")
	fs.BoolVar(&quiet, "quiet", false, "no progress lines")
	prof.flags(fs)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	fail := func(err error) int {
		fmt.Fprintf(stderr, "fcapbench suite: %v\n", err)
		return 2
	}
	if outDir == "" {
		return fail(errors.New("--out is required"))
	}
	for _, v := range specs {
		t, err := parseSUT(v)
		if err != nil {
			return fail(err)
		}
		s.suts = append(s.suts, t)
	}
	shape.limit, shape.window, shape.concurrency, shape.timeout = s.w.Limit, s.w.Window, s.concurrency, time.Second
	for _, v := range memSpecs {
		m, err := parseMem(v, shape)
		if err != nil {
			return fail(err)
		}
		s.mems = append(s.mems, m)
	}
	for _, w := range strings.Split(workloads, ",") {
		if w != "allow" && w != "check" && w != "mix" {
			return fail(fmt.Errorf("--workloads: unknown workload %q", w))
		}
		s.workloads = append(s.workloads, w)
	}
	s.w.Kind = "check"
	if err := s.w.validate(); err != nil {
		return fail(err)
	}
	if s.concurrency < 1 || s.duration <= 0 || s.warmup < 0 || s.timeout <= 0 {
		return fail(errors.New("need --concurrency >= 1, --duration > 0, --warmup >= 0, --timeout > 0"))
	}
	if command == "" {
		command = "fcapbench suite " + strings.Join(args, " ")
	}
	s.log = stderr
	if !quiet {
		s.progress = stderr
	}
	stop, err := prof.start()
	if err != nil {
		return fail(err)
	}
	started := time.Now()
	results, errs := s.exec(context.Background())
	stop()
	rep := report{Results: results, Command: command, Setup: setup, Date: started, Duration: time.Since(started)}
	for _, e := range errs {
		rep.Errors = append(rep.Errors, e.Error())
	}
	if err := rep.write(outDir, mdPath, stdout); err != nil {
		fmt.Fprintf(stderr, "fcapbench suite: %v\n", err)
		return 1
	}
	if len(errs) > 0 {
		fmt.Fprintf(stderr, "fcapbench suite: %d runs failed\n", len(errs))
		return 1
	}
	return 0
}

func runReport(args []string, stdout, stderr io.Writer) int {
	var in, outDir, mdPath, command, setup string
	fs := flag.NewFlagSet("fcapbench report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&in, "in", "", "a results.json written by fcapbench (suite, load or a single run)")
	fs.StringVar(&outDir, "out", "", "directory for report.md and the charts (default: the JSON's)")
	fs.StringVar(&mdPath, "md", "", "also append the report to this markdown file")
	fs.StringVar(&command, "command", "", "the command that produced the results, for the report")
	fs.StringVar(&setup, "setup", "", "how the machine and servers were set up, for the report")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if in == "" {
		fmt.Fprintln(stderr, "fcapbench report: --in is required")
		return 2
	}
	if outDir == "" {
		outDir = filepath.Dir(in)
	}
	results, err := readResults(in)
	if err != nil {
		fmt.Fprintf(stderr, "fcapbench report: %v\n", err)
		return 1
	}
	st, _ := os.Stat(in)
	rep := report{Results: results, Command: command, Setup: setup, Date: st.ModTime()}
	if err := rep.write(outDir, mdPath, stdout); err != nil {
		fmt.Fprintf(stderr, "fcapbench report: %v\n", err)
		return 1
	}
	return 0
}

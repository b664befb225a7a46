package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// The floor: every open-loop figure of a target stands beside the same
// load, same pacing and same generator against a bare echo server
// measured in the same run. What the target adds over the echo is the
// target's; what the echo shows is the machine's (and this generator's).

// floorRow compares a target's open loop with the echo's at the same
// rate. Shares are fractions of the measured requests; a ratio is 0 when
// the echo's figure is 0.
type floorRow struct {
	Echo, Target *Result
	// Procs, when the floor ran over several echo processes as well
	// (--echo-procs), is that floor, measured in the same rounds; the
	// figures below compare the target with the one-process Echo, and
	// ProcsFloor with Procs.
	Procs      *Result
	ProcsFloor procsFloor
	// CallP99Ratio and CallP999Ratio compare the calls alone (a caller
	// taking the request to its answer); P99Ratio compares latencies
	// from the scheduled start, the generator's queue included.
	CallP99Ratio, CallP999Ratio, P99Ratio float64
	// EchoOver is the echo's share of round trips past the cut-off;
	// TargetOver the target's share of calls past it; FailOpen the
	// target's share answered by the failure policy (fcap's fail-opens);
	// Hedged the target's extra requests to a backup, per request.
	EchoOver, TargetOver, FailOpen, Hedged float64
}

// procsFloor are a target's figures against the floor over several echo
// processes (zero without one).
type procsFloor struct {
	CallP99Ratio, CallP999Ratio, P99Ratio float64
	EchoOver                              float64 // the floor's share of round trips past the cut-off
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func share(n int64, of int64) float64 {
	if of <= 0 {
		return 0
	}
	return float64(n) / float64(of)
}

// compareFloor computes a target's figures against the echo's.
func compareFloor(echo, tgt *Result) floorRow {
	return floorRow{
		Echo: echo, Target: tgt,
		CallP99Ratio:  ratio(tgt.CallP99, echo.CallP99),
		CallP999Ratio: ratio(tgt.CallP999, echo.CallP999),
		P99Ratio:      ratio(tgt.P99, echo.P99),
		EchoOver:      share(echo.OverCutoff, echo.Requests),
		TargetOver:    share(tgt.OverCutoff, tgt.Requests),
		FailOpen:      share(tgt.FailedOver, tgt.Requests),
		Hedged:        share(tgt.Hedges, tgt.Requests),
	}
}

// compareFloors computes a target's figures against the one-process
// echo and, when procs is not nil, against the echo over several
// processes too.
func compareFloors(echo, procs, tgt *Result) floorRow {
	f := compareFloor(echo, tgt)
	if procs != nil {
		f.Procs = procs
		f.ProcsFloor = procsFloor{
			CallP99Ratio:  ratio(tgt.CallP99, procs.CallP99),
			CallP999Ratio: ratio(tgt.CallP999, procs.CallP999),
			P99Ratio:      ratio(tgt.P99, procs.P99),
			EchoOver:      share(procs.OverCutoff, procs.Requests),
		}
	}
	return f
}

// printFloor prints each target beside its floor.
func printFloor(w io.Writer, rows []floorRow) {
	if len(rows) == 0 {
		return
	}
	server := "a bare echo server"
	if e := rows[0].Echo; e.EchoWorkUS > 0 || e.EchoCallerWorkUS > 0 {
		server = fmt.Sprintf("an echo server doing work (%gus per request; its caller %gus per call)", e.EchoWorkUS, e.EchoCallerWorkUS)
	}
	fmt.Fprintf(w, "\nfloor: the same load against %s in the same run (call: a caller taking the request to its answer; queue: the generator, scheduled start to a caller taking it)\n", server)
	fmt.Fprintf(w, "%-28s %8s %10s %10s %10s %10s %10s %10s %12s %10s\n",
		"target", "rate", "p50 us", "p99 us", "p999 us", "queue p99", "q p999", "cut-off", "past it", "fail-open")
	line := func(r *Result, failOpen string) {
		fmt.Fprintf(w, "%-28s %8.0f %10.1f %10.1f %10.1f %10.1f %10.1f %10s %11.3f%% %10s\n",
			r.Label(), r.Rate, r.CallP50, r.CallP99, r.CallP999, r.QueueP99, r.QueueP999,
			fmtLatency(r.CutoffUS), 100*share(r.OverCutoff, r.Requests), failOpen)
	}
	for _, f := range rows {
		line(f.Echo, "-")
		if f.Procs != nil {
			line(f.Procs, "-")
		}
		line(f.Target, fmt.Sprintf("%.3f%%", 100*f.FailOpen))
		rounds := ""
		if f.Target.Rounds > 1 {
			rounds = fmt.Sprintf(" (%d rounds interleaved)", f.Target.Rounds)
		}
		fmt.Fprintf(w, "  %s / %s: call p99 %s, call p99.9 %s, p99 from the schedule %s; past the cut-off %.3f%% (fail-open %.3f%%) vs the echo's %.3f%%; hedged %.3f%% of requests (%d, %d won by the backup)%s\n",
			f.Target.Label(), f.Echo.Label(), fmtRatio(f.CallP99Ratio), fmtRatio(f.CallP999Ratio), fmtRatio(f.P99Ratio),
			100*f.TargetOver, 100*f.FailOpen, 100*f.EchoOver, 100*f.Hedged, f.Target.Hedges, f.Target.HedgesWon, rounds)
		if p := f.ProcsFloor; f.Procs != nil {
			fmt.Fprintf(w, "  %s / %s (each call to its viewer's process, as a check to its owner): call p99 %s, call p99.9 %s, p99 from the schedule %s; past the cut-off %.3f%% (fail-open %.3f%%) vs its %.3f%%\n",
				f.Target.Label(), f.Procs.Label(), fmtRatio(p.CallP99Ratio), fmtRatio(p.CallP999Ratio), fmtRatio(p.P99Ratio),
				100*f.TargetOver, 100*f.FailOpen, 100*p.EchoOver)
		}
	}
}

// echoProcess is an "fcapbench echo-server" this run started.
type echoProcess struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	addr  string
}

// startEchoProcess starts this program as an echo server on a free
// loopback port and returns once it listens; with cpus (a taskset list,
// "1" or "2-3") it runs pinned to them, where the target's servers run,
// and with work it spends that long on each request (echo-server --work).
// The child exits when its stdin closes, so it never outlives this
// process, even one killed.
func startEchoProcess(cpus string, work time.Duration, stderr io.Writer) (*echoProcess, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("starting the echo server: %w", err)
	}
	args := []string{self, "echo-server", "--addr", "127.0.0.1:0", "--stdin-eof"}
	if work > 0 {
		args = append(args, "--work", work.String())
	}
	if cpus != "" {
		ts, err := exec.LookPath("taskset")
		if err != nil {
			return nil, fmt.Errorf("--echo-cpus needs taskset: %w", err)
		}
		args = append([]string{ts, "-c", cpus}, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), echoChildEnv+"=1")
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the echo server: %w", err)
	}
	p := &echoProcess{cmd: cmd, stdin: stdin}
	addr := make(chan string, 1)
	go func() { // ends when the child's stdout does
		sc := bufio.NewScanner(out)
		first := true
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "echo listening on "); ok && first {
				addr <- a
				first = false
			}
		}
		close(addr)
	}()
	select {
	case a, ok := <-addr:
		if ok {
			p.addr = a
			return p, nil
		}
		p.stop()
		return nil, errors.New("the echo server exited before listening")
	case <-time.After(10 * time.Second):
		p.stop()
		return nil, errors.New("the echo server did not listen within 10s")
	}
}

// stop ends the echo server (closing its stdin) and waits for it,
// killing it if it lingers.
func (p *echoProcess) stop() {
	p.stdin.Close()
	done := make(chan struct{})
	go func() { p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		p.cmd.Process.Kill()
		<-done
	}
}

// lockedWriter serialises writes to w: the echo processes' stderr, each
// copied by a goroutine of its own when w is not a file.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer // guarded by mu
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// echoChildEnv marks a process started as the echo server: a test
// binary, which is not fcapbench, runs main for it (see TestMain).
const echoChildEnv = "FCAPBENCH_ECHO_CHILD"

// mergeResults combines runs of one target under one load (the rounds of
// an interleaved floor run) into one result: counts added, latencies
// from the merged histograms, the machine's figures weighted by each
// run's measured time. Every part must come from exec (it keeps the
// histograms).
func mergeResults(parts []*Result) *Result {
	m := *parts[0]
	if len(parts) == 1 {
		return &m
	}
	h := &hists{total: newHist(), call: newHist(), queue: newHist()}
	var ph *phaseHists
	var sum Result
	for _, p := range parts {
		if p.ph != nil {
			if ph == nil {
				ph = newPhaseHists()
			}
			ph.merge(p.ph)
		}
		sum.Seconds += p.Seconds
		sum.Requests += p.Requests
		sum.Checks += p.Checks
		sum.Records += p.Records
		sum.Allowed += p.Allowed
		sum.Errors += p.Errors
		sum.FailedOver += p.FailedOver
		sum.Hedges += p.Hedges
		sum.HedgesWon += p.HedgesWon
		sum.Skipped += p.Skipped
		sum.PacerWakes += p.PacerWakes
		sum.Expired += p.Expired
		sum.OverCutoff += p.OverCutoff
		sum.HostBusyPct += p.HostBusyPct * p.Seconds
		sum.HostIdlePct += p.HostIdlePct * p.Seconds
		sum.HostStealPct += p.HostStealPct * p.Seconds
		sum.GenCPUPct += p.GenCPUPct * p.Seconds
		sum.ServerCPUPct += p.ServerCPUPct * p.Seconds
		sum.OtherCPUPct += p.OtherCPUPct * p.Seconds
		h.total.Merge(p.h.total)
		h.call.Merge(p.h.call)
		h.queue.Merge(p.h.queue)
	}
	m.Seconds, m.Requests, m.Checks, m.Records, m.Allowed = sum.Seconds, sum.Requests, sum.Checks, sum.Records, sum.Allowed
	m.Errors, m.FailedOver, m.Skipped, m.Expired, m.OverCutoff = sum.Errors, sum.FailedOver, sum.Skipped, sum.Expired, sum.OverCutoff
	m.Hedges, m.HedgesWon, m.PacerWakes = sum.Hedges, sum.HedgesWon, sum.PacerWakes
	if s := sum.Seconds; s > 0 {
		m.HostBusyPct, m.HostIdlePct, m.HostStealPct = sum.HostBusyPct/s, sum.HostIdlePct/s, sum.HostStealPct/s
		m.GenCPUPct, m.ServerCPUPct, m.OtherCPUPct = sum.GenCPUPct/s, sum.ServerCPUPct/s, sum.OtherCPUPct/s
		m.RequestsPS, m.ChecksPS = float64(m.Requests)/s, float64(m.Checks)/s
	}
	m.setLatencies(h)
	m.setPhases(ph)
	m.Rounds = len(parts)
	return &m
}

// execFloor runs r's open loop in rounds, each first against the echo,
// then against procs (the echo over several processes) unless it is nil,
// then against r's target; each gets the whole measured time, split
// evenly between the rounds (rounds 1: one after another, back to back).
// Later rounds warm up for at most a second: enough for the target's
// connections, idle during the echoes' turns.
func execFloor(r run, echo target, procs *echoTarget, rounds int) (floor, procsRes, res *Result, err error) {
	var eParts, pParts, tParts []*Result
	for i := range rounds {
		slice := r
		slice.duration = r.duration / time.Duration(rounds)
		if i > 0 {
			slice.warmup = min(r.warmup, time.Second)
		}
		e := slice
		e.target, e.name = echo, ""
		er, err := e.exec()
		if err != nil {
			return nil, nil, nil, fmt.Errorf("echo floor: %w", err)
		}
		eParts = append(eParts, er)
		if procs != nil {
			p := slice
			p.target, p.name = procs, ""
			pr, err := p.exec()
			if err != nil {
				return nil, nil, nil, fmt.Errorf("echo floor over several processes: %w", err)
			}
			pParts = append(pParts, pr)
		}
		tr, err := slice.exec()
		if err != nil {
			return nil, nil, nil, err
		}
		tParts = append(tParts, tr)
	}
	if procs != nil {
		procsRes = mergeResults(pParts)
		procsRes.EchoProcs = procs.procs()
	}
	return mergeResults(eParts), procsRes, mergeResults(tParts), nil
}

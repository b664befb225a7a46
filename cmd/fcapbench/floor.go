package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
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
	// CallP99Ratio and CallP999Ratio compare the calls alone (a caller
	// taking the request to its answer); P99Ratio compares latencies
	// from the scheduled start, the generator's queue included.
	CallP99Ratio, CallP999Ratio, P99Ratio float64
	// EchoOver is the echo's share of round trips past the cut-off;
	// TargetOver the target's share of calls past it; FailOpen the
	// target's share answered by the failure policy (fcap's fail-opens).
	EchoOver, TargetOver, FailOpen float64
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
	}
}

// printFloor prints each target beside its floor.
func printFloor(w io.Writer, rows []floorRow) {
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(w, "\nfloor: the same load against a bare echo server in the same run (call: a caller taking the request to its answer; queue: the generator, scheduled start to a caller taking it)\n")
	fmt.Fprintf(w, "%-28s %8s %10s %10s %10s %10s %10s %10s %12s %10s\n",
		"target", "rate", "p50 us", "p99 us", "p999 us", "queue p99", "q p999", "cut-off", "past it", "fail-open")
	line := func(r *Result, failOpen string) {
		fmt.Fprintf(w, "%-28s %8.0f %10.1f %10.1f %10.1f %10.1f %10.1f %10s %11.3f%% %10s\n",
			r.Label(), r.Rate, r.CallP50, r.CallP99, r.CallP999, r.QueueP99, r.QueueP999,
			fmtLatency(r.CutoffUS), 100*share(r.OverCutoff, r.Requests), failOpen)
	}
	for _, f := range rows {
		line(f.Echo, "-")
		line(f.Target, fmt.Sprintf("%.3f%%", 100*f.FailOpen))
		fmt.Fprintf(w, "  %s / echo: call p99 %s, call p99.9 %s, p99 from the schedule %s; past the cut-off %.3f%% (fail-open %.3f%%) vs the echo's %.3f%%\n",
			f.Target.Label(), fmtRatio(f.CallP99Ratio), fmtRatio(f.CallP999Ratio), fmtRatio(f.P99Ratio),
			100*f.TargetOver, 100*f.FailOpen, 100*f.EchoOver)
	}
}

// echoProcess is an "fcapbench echo-server" this run started.
type echoProcess struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	addr  string
}

// startEchoProcess starts this program as an echo server on a free
// loopback port and returns once it listens. The child exits when its
// stdin closes, so it never outlives this process, even one killed.
func startEchoProcess(stderr io.Writer) (*echoProcess, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("starting the echo server: %w", err)
	}
	cmd := exec.Command(self, "echo-server", "--addr", "127.0.0.1:0", "--stdin-eof")
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

// echoChildEnv marks a process started as the echo server: a test
// binary, which is not fcapbench, runs main for it (see TestMain).
const echoChildEnv = "FCAPBENCH_ECHO_CHILD"

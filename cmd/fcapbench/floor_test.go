package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fcap-io/fcap/proto"
)

// TestMain lets the test binary stand in for fcapbench when a test makes
// it start its own echo server (startEchoProcess runs os.Executable).
func TestMain(m *testing.M) {
	if os.Getenv(echoChildEnv) == "1" {
		os.Exit(runMain(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

func startEcho(t *testing.T) *echoServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := newEchoServer(ln, 0)
	t.Cleanup(func() { s.Close() })
	return s
}

func dialTest(t *testing.T, addr string) net.Conn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(30 * time.Second)) // a hung server fails the test, never hangs it
	return nc
}

func TestEchoServerAnswersWithTheSizeAsked(t *testing.T) {
	s := startEcho(t)
	nc := dialTest(t, s.Addr())
	// Two pipelined requests in one write: each answered in order, with
	// its own id, the answer type and the size it asked for.
	var req []byte
	req = appendEchoFrame(req, proto.TypeCheck, 7, 2500, 620)
	req = appendEchoFrame(req, proto.TypeAllow, 8, 90, 0)
	if _, err := nc.Write(req); err != nil {
		t.Fatal(err)
	}
	r := proto.NewReader(nc, 0)
	for _, want := range []struct {
		id   uint64
		typ  proto.Type
		size int
	}{{7, proto.TypeCheckResult, 620}, {8, proto.TypeAllowResult, 0}} {
		hdr, body, err := r.Next()
		if err != nil {
			t.Fatal(err)
		}
		if hdr.ID != want.id || hdr.Type != want.typ || hdr.Version != proto.Version || len(body) != want.size {
			t.Fatalf("answer %+v with %d bytes, want id %d, %s, %d bytes", hdr, len(body), want.id, want.typ, want.size)
		}
	}
}

func TestEchoServerClosesOnBadRequestsAndServesOthers(t *testing.T) {
	s := startEcho(t)
	for name, frame := range map[string][]byte{
		"body too short to name a size": appendEchoFrame(nil, proto.TypeCheck, 1, 2, -1),
		"answer over the frame limit":   appendEchoFrame(nil, proto.TypeCheck, 1, 8, maxEchoAnswer+1),
		"other protocol version": func() []byte {
			f := appendEchoFrame(nil, proto.TypeCheck, 1, 8, 8)
			f[4] = proto.Version + 1
			return f
		}(),
	} {
		t.Run(name, func(t *testing.T) {
			nc := dialTest(t, s.Addr())
			if _, err := nc.Write(frame); err != nil {
				t.Fatal(err)
			}
			if n, err := io.Copy(io.Discard, nc); err != nil || n != 0 {
				t.Fatalf("read %d bytes (%v), want the connection closed unanswered", n, err)
			}
		})
	}
	// The server still answers a good request on a new connection.
	nc := dialTest(t, s.Addr())
	if _, err := nc.Write(appendEchoFrame(nil, proto.TypeCheck, 3, 100, 50)); err != nil {
		t.Fatal(err)
	}
	if hdr, body, err := proto.NewReader(nc, 0).Next(); err != nil || hdr.ID != 3 || len(body) != 50 {
		t.Fatalf("after bad clients: %+v, %d bytes, %v", hdr, len(body), err)
	}
}

func TestEchoServerCloseTwice(t *testing.T) {
	s := startEcho(t)
	dialTest(t, s.Addr()) // a connection open while it closes
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestFcapFrameSizes(t *testing.T) {
	w := workload{Kind: "check", Viewers: 1000, Campaigns: 5000, Candidates: 100, Zipf: 1.1, ZipfV: 1000, Limit: 5, Window: 86_400_000, Mode: "soft"}
	sz, err := fcapFrameSizes(&w, newIDs(&w))
	if err != nil {
		t.Fatal(err)
	}
	// A Check carries every cap (scope, id, limit, window, mode: 32
	// bytes with these ids) and a 2-byte ref and 4-byte end per
	// candidate: about 3.8 KB for 100. Its answer: 4 bytes of verdict and
	// 2 of impressions left per candidate, plus a few header bytes.
	if sz.check < 3500 || sz.check > 4000 {
		t.Errorf("check body %d bytes, want about 3.8 KB", sz.check)
	}
	if extra := sz.checkResult - 6*w.Candidates; extra < 0 || extra > 40 {
		t.Errorf("check result body %d bytes, want 6 per candidate and a few more", sz.checkResult)
	}
	if sz.allow >= sz.check/50 || sz.allowResult > 40 {
		t.Errorf("allow %d and allow result %d bytes, want one cap's worth", sz.allow, sz.allowResult)
	}
	w.Candidates = 10
	small, err := fcapFrameSizes(&w, newIDs(&w))
	if err != nil {
		t.Fatal(err)
	}
	if small.check >= sz.check || small.checkResult >= sz.checkResult {
		t.Errorf("10 candidates %+v not smaller than 100 %+v", small, sz)
	}
}

func TestEchoTargetRoundTrips(t *testing.T) {
	s := startEcho(t)
	w := workload{Kind: "check", Viewers: 10, Campaigns: 50, Candidates: 20, Zipf: 1.1, ZipfV: 1, Limit: 5, Window: 1000}
	tgt, err := newTarget("echo", s.Addr(), &w, newIDs(&w), targetOpts{timeout: 10 * time.Second, conns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer tgt.Close()
	ctx := context.Background()
	for i := range 10 { // round robin over both connections, ids matched
		if n, err := tgt.Check(ctx, "v", make([]int, 20), 0); err != nil || n != 20 {
			t.Fatalf("check %d: %d, %v", i, n, err)
		}
		if ok, err := tgt.Allow(ctx, "v", 0, 0); err != nil || !ok {
			t.Fatalf("allow %d: %v, %v", i, ok, err)
		}
	}
	// A server gone: calls fail (the redial is refused), never hang.
	s.Close()
	for range 4 {
		if _, err := tgt.Check(ctx, "v", make([]int, 20), 0); err == nil {
			t.Fatal("check against a closed echo server succeeded")
		}
	}
	if err := tgt.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestEchoTargetGivesUpAtItsDeadline(t *testing.T) {
	// A server that reads and never answers: the call ends with its
	// context, as the fcap client's does.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { // ends when ln closes
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(io.Discard, nc); nc.Close() }()
		}
	}()
	w := workload{Kind: "allow", Viewers: 10, Campaigns: 5, Candidates: 1, Zipf: 1.1, ZipfV: 1, Limit: 5, Window: 1000}
	tgt, err := newTarget("echo", ln.Addr().String(), &w, newIDs(&w), targetOpts{timeout: time.Minute, conns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer tgt.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := tgt.Allow(ctx, "v", 0, 0); err == nil {
		t.Fatal("a call with an ended context succeeded")
	}
	ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := tgt.Allow(ctx, "v", 0, 0); !errors.Is(err, errEchoTimeout) && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("unanswered call: %v, want a timeout", err)
	}
}

func TestCompareFloor(t *testing.T) {
	echo := &Result{Target: "echo", Requests: 10_000, CallP99: 400, CallP999: 1000, P99: 500, OverCutoff: 5}
	fcap := &Result{Target: "fcap", Requests: 20_000, CallP99: 600, CallP999: 4000, P99: 800, OverCutoff: 40, FailedOver: 30, Hedges: 200, HedgesWon: 50}
	f := compareFloor(echo, fcap)
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"call p99 ratio", f.CallP99Ratio, 1.5},
		{"call p99.9 ratio", f.CallP999Ratio, 4},
		{"p99 ratio", f.P99Ratio, 1.6},
		{"echo past cut-off", f.EchoOver, 0.0005},
		{"fcap past cut-off", f.TargetOver, 0.002},
		{"fail-open", f.FailOpen, 0.0015},
		{"hedged", f.Hedged, 0.01},
	} {
		if diff := c.got - c.want; diff > 1e-12 || diff < -1e-12 {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	// An echo that measured nothing gives no ratio, not an infinity.
	if z := compareFloor(&Result{}, fcap); z.CallP99Ratio != 0 || z.EchoOver != 0 {
		t.Errorf("against an empty echo: %+v", z)
	}
	var b bytes.Buffer
	printFloor(&b, []floorRow{f})
	for _, want := range []string{"call p99 1.50x", "call p99.9 4.00x", "past the cut-off 0.200% (fail-open 0.150%) vs the echo's 0.050%", "hedged 1.000% of requests (200, 50 won by the backup)"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("floor table lacks %q:\n%s", want, b.String())
		}
	}
}

func TestCutoffOf(t *testing.T) {
	for _, c := range []struct{ timeout, want time.Duration }{
		{5 * time.Millisecond, 4500 * time.Microsecond}, // the client's default
		{20 * time.Millisecond, 18 * time.Millisecond},
		{time.Second, 995 * time.Millisecond}, // the margin stops at 5ms
	} {
		if got := cutoffOf(c.timeout); got != c.want {
			t.Errorf("cutoffOf(%v) = %v, want %v", c.timeout, got, c.want)
		}
	}
}

// stallTarget answers only when the call's context ends.
type stallTarget struct{ nullTarget }

func (stallTarget) Check(ctx context.Context, _ string, c []int, _ int64) (int, error) {
	<-ctx.Done()
	return 0, ctx.Err()
}

func TestRunCountsCallsPastTheCutoff(t *testing.T) {
	w := workload{Kind: "check", Viewers: 100, Campaigns: 20, Candidates: 5, Zipf: 1.1, ZipfV: 10, Limit: 5, Window: 1000}
	x := newIDs(&w)
	// Long enough that a machine stalling this process for a moment
	// (its slots are skipped) still leaves requests to count.
	r := run{target: stallTarget{}, w: &w, ids: x, concurrency: 16, rate: 200, warmup: 0, duration: time.Second, timeout: 20 * time.Millisecond, seed: 1}
	res, err := r.exec()
	if err != nil {
		t.Fatal(err)
	}
	// Every call lasted its whole deadline, past the 18ms cut-off.
	if res.Requests == 0 || res.OverCutoff != res.Requests || res.CutoffUS != 18_000 || res.CallP50 < 18_000 {
		t.Fatalf("stalled calls: %d requests, %d past the cut-off of %vus, call p50 %vus", res.Requests, res.OverCutoff, res.CutoffUS, res.CallP50)
	}
	r.target, r.timeout = nullTarget{}, time.Minute
	res, err = r.exec()
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests == 0 || res.OverCutoff != 0 || res.QueueP99 == 0 || res.CallP99 == 0 || res.CallP99 > res.P99 {
		t.Fatalf("null target: %+v", res)
	}
}

func TestPacerNeverWakesEarly(t *testing.T) {
	p := newPacer(false)
	defer p.Close()
	for _, d := range []time.Duration{-time.Millisecond, 0, 50 * time.Microsecond, 300 * time.Microsecond, 2 * time.Millisecond} {
		at := time.Now().Add(d)
		p.sleepUntil(at)
		if now := time.Now(); now.Before(at) {
			t.Errorf("sleepUntil(now%+v) returned %v early", d, at.Sub(now))
		}
	}
}

func TestFloorRunPrintsTargetBesideEcho(t *testing.T) {
	results, stdout := floorRun(t, "--rate", "500", "--timeout", "10s",
		"--viewers", "100", "--campaigns", "200", "--candidates", "100", "--duration", "200ms", "--warmup", "10ms")
	if results[0].Kind != "echo" || results[1].Kind != "null" || results[0].Rate != 500 || results[1].Rate != 500 || results[0].Requests == 0 {
		t.Fatalf("want the echo then the target at the same rate, got %+v", results)
	}
	if !strings.Contains(stdout, "floor:") || !strings.Contains(stdout, "null / echo: call p99") {
		t.Errorf("no floor comparison:\n%s", stdout)
	}
}

// A floor that does work (the echo process fcapbench starts, and its
// caller) is named so in the results, with its work.
func TestFloorRunWithWork(t *testing.T) {
	results, stdout := runTwo(t, "--target", "null", "--floor", "--rate", "500", "--timeout", "10s", "--echo-work", "3us", "--echo-caller-work", "2us",
		"--viewers", "100", "--campaigns", "200", "--candidates", "100", "--duration", "200ms", "--warmup", "10ms")
	e := results[0]
	if e.Target != "echo+work" || e.EchoWorkUS != 3 || e.EchoCallerWorkUS != 2 || e.Requests == 0 {
		t.Fatalf("want the working floor first, named and its work recorded, got %+v", e)
	}
	if results[1].EchoWorkUS != 0 || results[1].EchoCallerWorkUS != 0 {
		t.Errorf("the target's result carries the floor's work: %+v", results[1])
	}
	if !strings.Contains(stdout, "null / echo+work: call p99") {
		t.Errorf("no comparison with the working floor:\n%s", stdout)
	}
}

func TestFloorNeedsAnOpenLoop(t *testing.T) {
	for _, args := range [][]string{
		{"--target", "null", "--floor"},
		{"--target", "echo", "--floor", "--rate", "100"},
	} {
		var stdout, stderr bytes.Buffer
		if code := runMain(args, &stdout, &stderr); code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", args, code, stderr.String())
		}
	}
}

func TestFloorStartsItsOwnEchoProcess(t *testing.T) {
	p, err := startEchoProcess("", 0, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer p.stop()
	nc := dialTest(t, p.addr)
	if _, err := nc.Write(appendEchoFrame(nil, proto.TypeCheck, 42, 64, 33)); err != nil {
		t.Fatal(err)
	}
	if hdr, body, err := proto.NewReader(nc, 0).Next(); err != nil || hdr.ID != 42 || len(body) != 33 {
		t.Fatalf("echo process answered %+v, %d bytes, %v", hdr, len(body), err)
	}
	p.stop() // closing its stdin ends it
	if p.cmd.ProcessState == nil || !p.cmd.ProcessState.Exited() {
		t.Fatalf("echo process still running after stop: %v", p.cmd.ProcessState)
	}
}

// TestEchoWorkIsSpent: an echo process started with work spends it on
// every request before answering, and an echo call with caller work
// spends it before sending, so a round trip takes at least both. The
// bounds are lower ones (a busy machine only adds): 10 ms of work each,
// well past a bare loopback round trip.
func TestEchoWorkIsSpent(t *testing.T) {
	const work = maxEchoWork
	p, err := startEchoProcess("", work, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer p.stop()
	nc := dialTest(t, p.addr)
	// Two requests in one write: the second is answered after both
	// requests' work.
	req := appendEchoFrame(nil, proto.TypeCheck, 1, 64, 33)
	req = appendEchoFrame(req, proto.TypeCheck, 2, 64, 33)
	start := time.Now()
	if _, err := nc.Write(req); err != nil {
		t.Fatal(err)
	}
	r := proto.NewReader(nc, 0)
	for id := uint64(1); id <= 2; id++ {
		if hdr, _, err := r.Next(); err != nil || hdr.ID != id {
			t.Fatalf("answer %+v, %v; want id %d", hdr, err, id)
		}
	}
	if took := time.Since(start); took < 2*work {
		t.Errorf("two requests answered in %v, want at least twice the server's work, %v", took, 2*work)
	}

	w := workload{Kind: "check", Viewers: 10, Campaigns: 50, Candidates: 20, Zipf: 1.1, ZipfV: 1, Limit: 5, Window: 1000}
	tgt, err := newTarget("echo", p.addr, &w, newIDs(&w), targetOpts{timeout: 10 * time.Second, conns: 1, callerWork: work})
	if err != nil {
		t.Fatal(err)
	}
	defer tgt.Close()
	start = time.Now()
	if n, err := tgt.Check(context.Background(), "v", make([]int, 20), 0); err != nil || n != 20 {
		t.Fatalf("check: %d, %v", n, err)
	}
	if took := time.Since(start); took < 2*work {
		t.Errorf("a call with caller work answered in %v, want at least the caller's and the server's work, %v", took, 2*work)
	}
}

func TestMergeResultsAddsCountsAndMergesHistograms(t *testing.T) {
	part := func(secs float64, reqs, over, failed int64, busy float64, lat ...int64) *Result {
		h := &hists{total: newHist(), call: newHist(), queue: newHist()}
		for _, l := range lat {
			h.total.RecordValue(l + 10)
			h.call.RecordValue(l)
			h.queue.RecordValue(10)
		}
		r := &Result{Target: "fcap", Mode: "open", Rate: 100, Seconds: secs, Requests: reqs, Checks: 100 * reqs,
			OverCutoff: over, FailedOver: failed, HostBusyPct: busy}
		r.setLatencies(h)
		return r
	}
	// 100 fast calls in one round, 100 slow ones in the other: merged,
	// the median sits between them and the p99 is the slow round's.
	fast := make([]int64, 100)
	slow := make([]int64, 100)
	for i := range fast {
		fast[i], slow[i] = 100, 5000
	}
	m := mergeResults([]*Result{part(1, 100, 0, 0, 20, fast...), part(3, 100, 7, 5, 60, slow...)})
	if m.Rounds != 2 || m.Seconds != 4 || m.Requests != 200 || m.Checks != 20_000 || m.OverCutoff != 7 || m.FailedOver != 5 {
		t.Fatalf("merged counts %+v", m)
	}
	if m.RequestsPS != 50 || m.HostBusyPct != 50 { // 200/4s; (20*1 + 60*3)/4
		t.Errorf("merged rate %v/s, busy %v%%, want 50 and 50", m.RequestsPS, m.HostBusyPct)
	}
	if m.CallP50 != 100 || m.CallP99 < 4990 || m.CallP99 > 5010 || m.QueueP99 != 10 || m.P99 < 5000 {
		t.Errorf("merged latencies: call p50 %v p99 %v, queue p99 %v, p99 %v", m.CallP50, m.CallP99, m.QueueP99, m.P99)
	}
	if one := mergeResults([]*Result{part(1, 100, 0, 0, 20, fast...)}); one.Rounds != 0 || one.Requests != 100 {
		t.Errorf("one round: %+v", one)
	}
}

func TestFloorRoundsInterleave(t *testing.T) {
	results, _ := floorRun(t, "--floor-rounds", "3", "--rate", "500", "--timeout", "10s",
		"--viewers", "100", "--campaigns", "20", "--candidates", "5", "--duration", "300ms", "--warmup", "10ms")
	for _, r := range results {
		if r.Rounds != 3 || r.Seconds < 0.299 || r.Seconds > 0.301 {
			t.Errorf("%s: %d rounds over %vs, want 3 over 0.3s", r.Target, r.Rounds, r.Seconds)
		}
	}
}

// writeRun writes run i's results as a JSON file in dir, as fcapbench
// --json does, and returns its path.
func writeRun(t *testing.T, dir string, i int, rs []*Result) string {
	t.Helper()
	f := filepath.Join(dir, string(rune('a'+i))+".json")
	if err := writeJSON(f, rs); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestFloorMedian(t *testing.T) {
	dir := t.TempDir()
	var files []string
	// Three runs of one command: closed loop, then echo and fcap open.
	for i, p99 := range []float64{900, 600, 3000} {
		rs := []*Result{
			{Target: "fcap", Kind: "fcap", Mode: "closed", Requests: 1000},
			{Target: "echo", Kind: "echo", Mode: "open", Rate: 2000, Requests: 10_000, CallP99: 300, OverCutoff: int64(i + 1), GenCPUPct: 61 + float64(i)},
			{Target: "fcap", Kind: "fcap", Mode: "open", Rate: 2000, Requests: 10_000, CallP99: p99, FailedOver: 10 * int64(i+1), GenCPUPct: 87 - float64(i)},
		}
		files = append(files, writeRun(t, dir, i, rs))
	}
	var stdout, stderr bytes.Buffer
	if code := runMain(append([]string{"floor-median"}, files...), &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	// Medians: call p99 900us (ratio 3x), fail-open 0.2%, echo past
	// the cut-off 0.02%: fail-open 10x the echo's; the generator's core
	// 62% in the echo's rounds, 86% in fcap's.
	out := stdout.String()
	if strings.Count(out, "\n| 2000 |") != 1 {
		t.Fatalf("want one row at 2000/s:\n%s", out)
	}
	for _, want := range []string{"| 900us |", "| 3.00x |", "| 0.200% |", "| 0.020% |", "| 10x |", "| 62% | 86% |", "| generator cpu, echo | generator cpu, target |"} {
		if !strings.Contains(out, want) {
			t.Errorf("median table lacks %q:\n%s", want, out)
		}
	}
	// Files of different commands do not mix.
	if err := writeJSON(files[2], []*Result{{Kind: "echo", Mode: "open"}}); err != nil {
		t.Fatal(err)
	}
	if code := runMain(append([]string{"floor-median"}, files...), &stdout, &stderr); code != 1 {
		t.Errorf("mismatched runs: exit %d, want 1", code)
	}
}

// A floor that did work (--echo-work) says so in the medians, and runs
// of a floor with other work, or none, do not mix with it.
func TestFloorMedianNamesTheFloorsWork(t *testing.T) {
	dir := t.TempDir()
	run := func(i int, work, caller float64) string {
		name := "echo+work"
		if work == 0 && caller == 0 {
			name = "echo"
		}
		return writeRun(t, dir, i, []*Result{
			{Target: name, Kind: name, Mode: "open", Rate: 2000, Requests: 10_000, CallP99: 500, EchoWorkUS: work, EchoCallerWorkUS: caller},
			{Target: "fcap", Kind: "fcap", Mode: "open", Rate: 2000, Requests: 10_000, CallP99: 800},
		})
	}
	a, b := run(0, 13, 13), run(1, 13, 13)
	var stdout, stderr bytes.Buffer
	if code := runMain([]string{"floor-median", a, b}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if want := "the floor (echo) did work: 13us per request on the server, 13us per call in the caller"; !strings.Contains(stdout.String(), want) {
		t.Errorf("medians do not say %q:\n%s", want, stdout.String())
	}
	if !strings.Contains(stdout.String(), "| 1.60x |") {
		t.Errorf("want fcap's p99 over the working floor's, 1.60x:\n%s", stdout.String())
	}
	for _, work := range []float64{6, 0} {
		stdout.Reset()
		stderr.Reset()
		c := run(2, work, work)
		if code := runMain([]string{"floor-median", a, b, c}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "not the same command") {
			t.Errorf("floors of %gus and 13us of work mixed: exit %d, %s", work, code, stderr.String())
		}
	}
	// The bare floor's medians say nothing of work.
	stdout.Reset()
	if code := runMain([]string{"floor-median", run(3, 0, 0)}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if strings.Contains(stdout.String(), "work") {
		t.Errorf("a bare floor's medians speak of work:\n%s", stdout.String())
	}
}

// A run the host's hypervisor disturbed is left out of the medians and
// named; with every run disturbed, floor-median says so and exits 3,
// which scripts/bench-floor.sh takes as "run it again".
func TestFloorMedianLeavesOutDisturbedRuns(t *testing.T) {
	dir := t.TempDir()
	run := func(i int, p99, steal float64) string {
		return writeRun(t, dir, i, []*Result{
			{Target: "echo", Kind: "echo", Mode: "open", Rate: 2000, Requests: 10_000, CallP99: 300, HostStealPct: 0.1},
			{Target: "fcap", Kind: "fcap", Mode: "open", Rate: 2000, Requests: 10_000, CallP99: p99, HostStealPct: steal},
		})
	}
	// The disturbed run's p99 is the highest: kept, it would be the median
	// of four (between 600us and 9,000us: 4,800us).
	files := []string{run(0, 300, 0.1), run(1, 600, 0.4), run(2, 9000, 12.5), run(3, 450, 0.3)}
	median := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := runMain(append(append([]string{"floor-median"}, args...), files...), &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}
	code, out, errOut := median()
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"medians of 3 runs; left out", files[2] + " (steal 12.5%)", "| 450us | ", "| 1.50x |", "| host steal |", "| 0.3% |"} {
		if !strings.Contains(out, want) {
			t.Errorf("median table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, files[1]+" (") {
		t.Errorf("a run under the threshold was left out:\n%s", out)
	}
	// A higher threshold keeps it: the median of four.
	if code, out, errOut = median("--max-steal", "100"); code != 0 || !strings.Contains(out, "medians of 4 runs\n") || !strings.Contains(out, "| 525us |") {
		t.Errorf("--max-steal 100: exit %d (%s), want all four runs:\n%s", code, errOut, out)
	}
	// One clean run left: no median to speak of.
	all := files
	files = all[2:4]
	if code, out, errOut = median(); code != 0 || !strings.HasPrefix(out, "one run, no median; left out") || !strings.Contains(out, "| 450us |") {
		t.Errorf("one clean run: exit %d (%s):\n%s", code, errOut, out)
	}
	// Nothing but disturbed runs: no table, exit 3.
	files = all[2:3]
	if code, out, errOut = median(); code != exitDisturbed || out != "" || !strings.Contains(errOut, "every run was disturbed") {
		t.Errorf("only a disturbed run: exit %d, stdout %q, stderr %q; want exit %d and no table", code, out, errOut, exitDisturbed)
	}
	if code, _, _ = median("--max-steal", "-1"); code != 2 {
		t.Errorf("a negative --max-steal: exit %d, want 2", code)
	}
}

// floorRun runs fcapbench --target null --floor against an echo server
// of its own with args, and returns the two results it wrote: the echo's,
// then the target's, and what it printed.
func floorRun(t *testing.T, args ...string) ([]Result, string) {
	t.Helper()
	s := startEcho(t)
	return runTwo(t, append([]string{"--target", "null", "--floor", "--echo-addr", s.Addr()}, args...)...)
}

// runTwo runs fcapbench quietly with args and returns the two results it
// wrote to its --json file (a floor and its target) and what it printed.
func runTwo(t *testing.T, args ...string) ([]Result, string) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "r.json")
	var stdout, stderr bytes.Buffer
	if code := runMain(append(args, "--quiet", "--json", out), &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var results []Result
	b, err := os.ReadFile(out)
	if err != nil || json.Unmarshal(b, &results) != nil || len(results) != 2 {
		t.Fatalf("JSON %s (%v)", b, err)
	}
	return results, stdout.String()
}

// countingEcho is an echo server that records the body size of every
// request it answers.
type countingEcho struct {
	ln    net.Listener
	mu    sync.Mutex
	sizes []int // guarded by mu
}

func startCountingEcho(t *testing.T) *countingEcho {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &countingEcho{ln: ln}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() { // ends when ln closes
		defer wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() { // ends when the client closes or ln does
				defer wg.Done()
				defer nc.Close()
				go func() { <-t.Context().Done(); nc.Close() }()
				r := proto.NewReader(nc, 0)
				for {
					hdr, body, err := r.Next()
					if err != nil {
						return
					}
					n, err := echoAnswerSize(body)
					if err != nil {
						return
					}
					e.mu.Lock()
					e.sizes = append(e.sizes, len(body))
					e.mu.Unlock()
					if _, err := nc.Write(appendEchoFrame(nil, answerType(hdr.Type), hdr.ID, n, -1)); err != nil {
						return
					}
				}
			}()
		}
	}()
	return e
}

func (e *countingEcho) Addr() string { return e.ln.Addr().String() }

func (e *countingEcho) requests() []int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.sizes)
}

func TestEchoProcsTargetSendsEachCallToItsViewersProcess(t *testing.T) {
	var servers []*countingEcho
	var addrs []string
	for range 3 {
		s := startCountingEcho(t)
		servers, addrs = append(servers, s), append(addrs, s.Addr())
	}
	w := workload{Kind: "check", Viewers: 1000, Campaigns: 200, Candidates: 100, Zipf: 1.1, ZipfV: 1, Limit: 5, Window: 1000}
	x := newIDs(&w)
	sz, err := fcapFrameSizes(&w, x)
	if err != nil {
		t.Fatal(err)
	}
	tgt, err := newEchoProcsTarget(addrs, &w, x, targetOpts{timeout: 10 * time.Second, conns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer tgt.Close()
	if tgt.Name() != "echo-3procs" || tgt.procs() != 3 {
		t.Fatalf("name %q over %d processes", tgt.Name(), tgt.procs())
	}
	ctx := context.Background()
	// Each viewer's calls, several of them, reach one process only, with
	// the one-process echo's frame: one request per call, whole, as a
	// check goes to its viewer's owner.
	const viewers, repeat = 60, 3
	total := 0
	for v := range viewers {
		before := make([]int, len(servers))
		for i, s := range servers {
			before[i] = len(s.requests())
		}
		for range repeat {
			if n, err := tgt.Check(ctx, x.viewer(v), make([]int, w.Candidates), 0); err != nil || n != w.Candidates {
				t.Fatalf("check: %d, %v", n, err)
			}
		}
		total += repeat
		reached := 0
		for i, s := range servers {
			got := s.requests()[before[i]:]
			if len(got) == 0 {
				continue
			}
			reached++
			if len(got) != repeat {
				t.Fatalf("viewer %d: %d of its %d calls at process %d", v, len(got), repeat, i)
			}
			for _, n := range got {
				if n != sz.check {
					t.Fatalf("a request of %d bytes, want the one-process echo's %d", n, sz.check)
				}
			}
		}
		if reached != 1 {
			t.Fatalf("viewer %d reached %d processes, want 1", v, reached)
		}
	}
	// Every process serves its share of the viewers.
	sum := 0
	for i, s := range servers {
		n := len(s.requests())
		if n == 0 {
			t.Errorf("process %d got none of %d viewers' calls", i, viewers)
		}
		sum += n
	}
	if sum != total {
		t.Errorf("%d requests for %d calls", sum, total)
	}
	if _, err := newEchoProcsTarget(addrs[:1], &w, x, targetOpts{timeout: time.Second}); err == nil {
		t.Error("an echo over several processes with one address")
	}
}

func TestFloorOverSeveralEchoProcesses(t *testing.T) {
	var addrs []string
	for range 3 {
		addrs = append(addrs, startEcho(t).Addr())
	}
	out := filepath.Join(t.TempDir(), "r.json")
	args := []string{"--target", "null", "--floor", "--echo-procs", "3", "--echo-addr", strings.Join(addrs, ","), "--quiet", "--json", out,
		"--floor-rounds", "2", "--rate", "500", "--timeout", "10s", "--viewers", "100", "--campaigns", "200", "--candidates", "100",
		"--duration", "200ms", "--warmup", "10ms"}
	var stdout, stderr bytes.Buffer
	if code := runMain(args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	rs, err := readResults(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 3 || rs[0].Kind != "echo" || rs[0].EchoProcs != 0 || rs[1].Target != "echo-3procs" || rs[1].EchoProcs != 3 ||
		rs[2].Kind != "null" || rs[1].Requests == 0 || rs[1].Rounds != 2 || rs[1].Rate != 500 {
		t.Fatalf("want the echo, the echo over 3 processes, then the target: %+v", rs)
	}
	for _, want := range []string{"null / echo: call p99", "null / echo-3procs (each call to its viewer's process"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, stdout.String())
		}
	}
	if f := floorRows(rs); len(f) != 1 || f[0].Echo != rs[0] || f[0].Procs != rs[1] || f[0].Target != rs[2] {
		t.Errorf("floor rows %+v", f)
	}
	// The addresses must be as many as the processes asked for.
	for _, bad := range [][]string{
		{"--echo-procs", "2", "--echo-addr", addrs[0]},
		{"--echo-procs", "0"},
		{"--echo-procs", "65"},
	} {
		if code := runMain(append([]string{"--target", "null", "--floor", "--rate", "100"}, bad...), &stdout, &stderr); code != 2 {
			t.Errorf("%v: exit %d, want 2", bad, code)
		}
	}
}

func TestFloorStartsSeveralEchoProcesses(t *testing.T) {
	out := filepath.Join(t.TempDir(), "r.json")
	args := []string{"--target", "null", "--floor", "--echo-procs", "2", "--quiet", "--json", out,
		"--rate", "200", "--timeout", "10s", "--viewers", "100", "--campaigns", "20", "--candidates", "5", "--duration", "200ms", "--warmup", "10ms"}
	var stdout, stderr bytes.Buffer
	if code := runMain(args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	rs, err := readResults(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 3 || rs[1].EchoProcs != 2 || rs[1].Requests == 0 || rs[1].Errors != 0 {
		t.Fatalf("want a floor over the 2 processes it started: %+v", rs)
	}
}

func TestFloorMedianWithSeveralEchoProcesses(t *testing.T) {
	dir := t.TempDir()
	var files []string
	for i, p99 := range []float64{900, 600, 3000} {
		rs := []*Result{
			{Target: "echo", Kind: "echo", Mode: "open", Rate: 2000, Requests: 10_000, CallP99: 300, OverCutoff: int64(i + 1)},
			{Target: "echo-3procs", Kind: "echo-3procs", Mode: "open", Rate: 2000, Requests: 10_000, CallP99: 450, OverCutoff: 2 * int64(i+1), EchoProcs: 3},
			{Target: "fcap", Kind: "fcap", Mode: "open", Rate: 2000, Requests: 10_000, CallP99: p99, FailedOver: 10 * int64(i+1)},
		}
		files = append(files, writeRun(t, dir, i, rs))
	}
	var stdout, stderr bytes.Buffer
	if code := runMain(append([]string{"floor-median"}, files...), &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	// Medians: fcap call p99 900us, 3x the echo's 300us and 2x the
	// 3-process echo's 450us; fail-open 0.2%, 10x the echo's 0.02% past
	// the cut-off and 5x the 3-process echo's 0.04%.
	out := stdout.String()
	for _, want := range []string{"| echo x3 call p99 |", "| call p99 / echo x3 |", "| 3.00x |", "| 450us |", "| 0.040% |", "| 2.00x |", "| 5.00x |", "| 10x |"} {
		if !strings.Contains(out, want) {
			t.Errorf("median table lacks %q:\n%s", want, out)
		}
	}
	if strings.Count(out, "\n| 2000 |") != 1 {
		t.Fatalf("want one row at 2000/s:\n%s", out)
	}
	// A run without that floor does not mix with runs that have it.
	if err := writeJSON(files[2], []*Result{
		{Target: "echo", Kind: "echo", Mode: "open", Rate: 2000, Requests: 10},
		{Target: "fcap", Kind: "fcap", Mode: "open", Rate: 2000, Requests: 10},
	}); err != nil {
		t.Fatal(err)
	}
	stderr.Reset()
	if code := runMain(append([]string{"floor-median"}, files...), &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "not the same command") {
		t.Errorf("mixed floors: exit %d (%s), want 1", code, stderr.String())
	}
}

package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestNullTargetClosedAndOpenLoop(t *testing.T) {
	w := workload{Kind: "check", Viewers: 1000, Campaigns: 50, Candidates: 10, Zipf: 1.1, ZipfV: 10, Limit: 5, Window: 1000}
	x := newIDs(&w)
	closed := run{target: nullTarget{}, w: &w, ids: x, concurrency: 4, warmup: 50 * time.Millisecond, duration: time.Second, timeout: time.Second, seed: 1}
	res, err := closed.exec()
	if err != nil {
		t.Fatal(err)
	}
	if res.Mode != "closed" || res.Requests == 0 || res.Checks != 10*res.Requests || res.Allowed != res.Checks || res.Errors != 0 {
		t.Fatalf("closed loop result %+v", res)
	}
	open := closed
	open.rate = 100
	res, err = open.exec()
	if err != nil {
		t.Fatal(err)
	}
	// 100/s for 1s is 100 requests scheduled in the measured window: a
	// second, not a fraction of one, so a machine busy with other work
	// still completes some. The dispatcher may wake late and skip slots
	// (counted over the warm-up too): never more requests than that.
	if res.Mode != "open" || res.Requests > 105 || res.Requests+res.Skipped < 95 {
		t.Fatalf("open loop at 100/s for 1s completed %d requests (%d slots skipped), want about 100", res.Requests, res.Skipped)
	}
}

func TestMainWritesJSONAndTable(t *testing.T) {
	out := filepath.Join(t.TempDir(), "r.json")
	var stdout, stderr bytes.Buffer
	code := runMain([]string{"--target", "null", "--workload", "mix", "--viewers", "100", "--campaigns", "20", "--candidates", "5",
		"--duration", "100ms", "--warmup", "10ms", "--quiet", "--json", out}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	var results []Result
	b, err := os.ReadFile(out)
	if err != nil || json.Unmarshal(b, &results) != nil || len(results) != 1 || results[0].Requests == 0 {
		t.Fatalf("JSON %s (%v)", b, err)
	}
	if !strings.Contains(stdout.String(), "null                         mix") {
		t.Errorf("table:\n%s", stdout.String())
	}
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--workload", "dance"}, {"--target", "memcached"}, {"--candidates", "0"}, {"--zipf", "1"}, {"--rate", "-1"},
		{"--redis-check", "mget"}, {"--pace-grain", "-1us"}, {"--pace-grain", "1s"}, {"suite"}, {"suite", "--out", "x", "--sut", "nokind"}, {"suite", "--out", "x", "--sut", "a=memcached@h:1"},
		{"suite", "--out", "x", "--workloads", "dance"}, {"suite", "--out", "x", "--mem", "m=fcap/allow@127.0.0.1:1"},
		{"load", "--target", "memcached"}, {"load", "--method", "dance"}, {"report"},
		{"--floor", "--rate", "10", "--echo-work", "-1us"}, {"--floor", "--rate", "10", "--echo-work", "1s"},
		{"--floor", "--rate", "10", "--echo-caller-work", "-1us"}, {"--floor", "--rate", "10", "--echo-caller-work", "11ms"},
		{"--floor", "--rate", "10", "--echo-work", "20us", "--echo-addr", "127.0.0.1:1"},
		{"echo-server", "--work", "-1us"}, {"echo-server", "--work", "1s"},
	} {
		var stderr bytes.Buffer
		if code := runMain(args, &bytes.Buffer{}, &stderr); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
	}
}

// TestProcessCPU reads this process's own CPU time from /proc the way
// the suite reads the servers'.
func TestProcessCPU(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc: the servers' CPU is read only on Linux")
	}
	// Spin until the process has used 50ms of CPU, however long a busy
	// machine takes to give it that much.
	x := 0
	for deadline := time.Now().Add(time.Minute); selfCPU() < 50*time.Millisecond && time.Now().Before(deadline); x++ {
	}
	got := procsCPU([]int{os.Getpid(), 1 << 30}) // the second is no process: counts nothing
	if got < 20*time.Millisecond || got > selfCPU()+20*time.Millisecond {
		t.Errorf("procsCPU = %v after 50ms of CPU spinning; selfCPU %v (%d)", got, selfCPU(), x)
	}
	if c := readCPUTimes(); !c.ok || c.cpus < 1 {
		t.Errorf("readCPUTimes = %+v", c)
	}
}

// TestWakeAt: requests further apart than the grain each get their own
// wake, exactly at their time; closer ones wake the dispatcher once per
// grain; never before the request's time.
func TestWakeAt(t *testing.T) {
	t0 := time.Unix(1000, 0)
	for _, c := range []struct {
		interval, grain, late time.Duration
	}{
		{500 * time.Microsecond, 200 * time.Microsecond, 0},                     // 2,000/s
		{200 * time.Microsecond, 200 * time.Microsecond, 0},                     // 5,000/s
		{50 * time.Microsecond, 200 * time.Microsecond, 150 * time.Microsecond}, // 20,000/s
		{50 * time.Microsecond, 0, 0},                                           // --pace-grain 0
	} {
		if got := wakeAt(t0, c.interval, c.grain).Sub(t0); got != c.late {
			t.Errorf("interval %v grain %v: wakes %v after the request's time, want %v", c.interval, c.grain, got, c.late)
		}
	}
}

// TestOpenLoopWakesOncePerGrain: at 10,000/s the dispatcher sleeps at
// most once per --pace-grain (a precise wake per request took a third of
// the generator's core on the reference VM), and still releases every
// request (none skipped on a machine with the time to run them); at
// 1,000/s it sleeps for nearly every request. Counts, not times: a busy
// machine makes the dispatcher late, which only lowers the wakes.
func TestOpenLoopWakesOncePerGrain(t *testing.T) {
	w := workload{Kind: "check", Viewers: 1000, Campaigns: 50, Candidates: 10, Zipf: 1.1, ZipfV: 10, Limit: 5, Window: 1000}
	x := newIDs(&w)
	base := run{target: nullTarget{}, w: &w, ids: x, concurrency: 8, warmup: 100 * time.Millisecond, duration: time.Second,
		timeout: time.Second, seed: 1, paceGrain: time.Millisecond}
	fast := base
	fast.rate = 10_000
	res, err := fast.exec()
	if err != nil {
		t.Fatal(err)
	}
	// 1.1 s with a wake per millisecond is at most 1,100 (and a few at
	// the ends).
	if res.PacerWakes > 1_200 || res.PacerWakes == 0 {
		t.Errorf("10,000/s for 1.1s with --pace-grain 1ms: %d wakes, want 1 to 1,200 (one per request would be 11,000)", res.PacerWakes)
	}
	if res.Requests+res.Skipped < 9_500 {
		t.Errorf("10,000/s for 1s: %d requests and %d skipped, want about 10,000", res.Requests, res.Skipped)
	}
	slow := base
	slow.rate = 1_000
	if res, err = slow.exec(); err != nil {
		t.Fatal(err)
	}
	if res.PacerWakes < 200 || res.PacerWakes > 1_100 {
		// Every request at least 1ms apart gets its own wake unless the
		// dispatcher is already late for it (a busy machine): some hundreds.
		t.Errorf("1,000/s for 1.1s: %d wakes, want one per request not already late (200 to 1,100)", res.PacerWakes)
	}
}

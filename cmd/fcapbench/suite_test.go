package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// slowTarget is the null target with a fixed service time, standing in
// for a real system in the suite's tests.
type slowTarget struct {
	name    string
	variant string
	delay   time.Duration
}

func (s slowTarget) Name() string { return s.name }
func (s slowTarget) Allow(context.Context, string, int, int64) (bool, error) {
	time.Sleep(s.delay)
	return true, nil
}
func (s slowTarget) Check(_ context.Context, _ string, c []int, _ int64) (int, error) {
	time.Sleep(s.delay)
	return len(c), nil
}
func (s slowTarget) Record(context.Context, string, int, string, int64) error { return nil }
func (s slowTarget) Failed() int64                                            { return 0 }
func (s slowTarget) Close() error                                             { return nil }
func (s slowTarget) CheckVariant() string                                     { return s.variant }

// TestSuitePlan runs the whole suite against stand-ins: an "fcap" and a
// three times slower "redis-sliding", and checks every planned run is
// there, in order, with the open loop at half of fcap's peak for both.
func TestSuitePlan(t *testing.T) {
	s := &suite{
		suts:      []sut{{"fcap-1", "fcap", "a"}, {"redis", "redis-sliding", "b"}},
		w:         workload{Viewers: 1000, Campaigns: 50, Candidates: 10, Zipf: 1.1, ZipfV: 10, RecordRatio: 0.5, Limit: 5, Window: 1000},
		workloads: []string{"allow", "check", "mix"}, concurrency: 2, warmup: 20 * time.Millisecond, duration: 150 * time.Millisecond,
		timeout: time.Second, openLoop: true, ownHalf: true, null: true, seed: 1, log: io.Discard,
		dial: func(kind, _ string, _ *workload, _ *ids, o targetOpts) (target, error) {
			switch kind {
			case "null":
				return nullTarget{}, nil
			case "fcap":
				return slowTarget{name: "fcap", delay: time.Millisecond}, nil
			}
			return slowTarget{name: kind, variant: o.redisCheck, delay: 3 * time.Millisecond}, nil
		},
	}
	results, errs := s.exec(context.Background())
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	var got []string
	for _, r := range results {
		// Which Redis variant peaked higher is up to the machine.
		basis := strings.NewReplacer("(pipeline)'s", "(BEST)'s", "(lua)'s", "(BEST)'s").Replace(r.RateBasis)
		got = append(got, fmt.Sprintf("%s/%s/%s/%s", r.Label(), r.Workload, r.Mode, basis))
	}
	want := []string{
		"null/check/closed/",
		"fcap-1/allow/closed/", "redis/allow/closed/",
		"fcap-1/check/closed/", "redis (pipeline)/check/closed/", "redis (lua)/check/closed/",
		"fcap-1/check/open/half of fcap-1's peak", "redis (pipeline)/check/open/half of fcap-1's peak", "redis (lua)/check/open/half of fcap-1's peak",
		"redis (pipeline)/check/open/half of its own peak", "redis (lua)/check/open/half of its own peak",
		"fcap-1/check/open/half of redis (BEST)'s peak",
		"fcap-1/mix/closed/", "redis (pipeline)/mix/closed/", "redis (lua)/mix/closed/",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("runs:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	fcapPeak := results[3].RequestsPS
	for _, r := range results[6:9] {
		if r.Rate != fcapPeak/2 || r.Kind == "" {
			t.Errorf("%s open loop at %.0f/s, want half of fcap's peak %.0f", r.Label(), r.Rate, fcapPeak)
		}
	}
	if r := results[9]; r.Rate != results[4].RequestsPS/2 {
		t.Errorf("redis own half-peak rate %.0f, want %.0f", r.Rate, results[4].RequestsPS/2)
	}
	if r := results[11]; r.Rate != max(results[4].RequestsPS, results[5].RequestsPS)/2 {
		t.Errorf("fcap at Redis's rate: %.0f/s, want half of Redis's best peak", r.Rate)
	}
	if results[12].Records == 0 {
		t.Errorf("the mix recorded nothing: %+v", results[12])
	}
	rep := report{Results: results}
	rows := rep.goals()
	if len(rows) != 4 || !strings.HasPrefix(rows[0].Figure, "checks/s") || !strings.HasPrefix(rows[1].Figure, "single Allow") ||
		!strings.HasPrefix(rows[2].Figure, "p99") || !strings.Contains(rows[3].Figure, "Redis not saturated") {
		t.Errorf("goals %+v", rows)
	}
}

// TestSuiteCommand runs the suite subcommand end to end against null
// targets and checks what it leaves behind.
func TestSuiteCommand(t *testing.T) {
	dir := t.TempDir()
	md := filepath.Join(dir, "BENCH.md")
	out := filepath.Join(dir, "out")
	var stdout, stderr bytes.Buffer
	code := runMain([]string{"suite", "--sut", "a=null@", "--sut", "b=null@", "--viewers", "100", "--campaigns", "20", "--candidates", "5",
		"--warmup", "10ms", "--duration", "250ms", "--concurrency", "2", "--quiet", "--out", out, "--md", md, "--command", "scripts/bench.sh --quick"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	rs, err := readResults(filepath.Join(out, "results.json"))
	if err != nil || len(rs) != 7 { // null + 2 x (allow, check, mix)
		t.Fatalf("%d results, %v", len(rs), err)
	}
	b, _ := os.ReadFile(md)
	if !strings.Contains(string(b), "```sh\nscripts/bench.sh --quick\n```") || !strings.Contains(string(b), "](out/throughput.png)") {
		t.Errorf("markdown:\n%s", b)
	}
	if !strings.Contains(stdout.String(), "no fcap / Redis pair measured") {
		t.Errorf("summary:\n%s", stdout.String())
	}
}

func TestParseSpecs(t *testing.T) {
	s, err := parseSUT("fcap-3=fcap@127.0.0.1:1,127.0.0.1:2")
	if err != nil || s != (sut{"fcap-3", "fcap", "127.0.0.1:1,127.0.0.1:2"}) {
		t.Errorf("parseSUT = %+v, %v", s, err)
	}
	m, err := parseMem("fcap=fcap/record@127.0.0.1:1#127.0.0.1:2", memLoad{viewers: 1, campaigns: 1, imps: 1, concurrency: 1})
	if err != nil || m.kind != "fcap" || m.method != "record" || m.addrs != "127.0.0.1:1" || m.httpAddr != "127.0.0.1:2" {
		t.Errorf("parseMem = %+v, %v", m, err)
	}
	m, err = parseMem("r=redis-sliding@127.0.0.1:1", memLoad{viewers: 1, campaigns: 1, imps: 1, concurrency: 1})
	if err != nil || m.method != "zadd" {
		t.Errorf("parseMem = %+v, %v", m, err)
	}
	for _, bad := range []string{"x", "x=fcap", "=fcap@a", "x=dance@a", "x=fcap@"} {
		if _, err := parseSUT(bad); err == nil {
			t.Errorf("parseSUT(%q) accepted", bad)
		}
	}
	for _, bad := range []string{"x=fcap/allow@a", "x=fcap/dance@a#b", "x=null@a", "x"} {
		if _, err := parseMem(bad, memLoad{viewers: 1, campaigns: 1, imps: 1, concurrency: 1}); err == nil {
			t.Errorf("parseMem(%q) accepted", bad)
		}
	}
}

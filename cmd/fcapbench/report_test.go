package main

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fixedResults is a small suite's worth of results with round numbers.
func fixedResults() []*Result {
	pcts := func(base float64) map[string]float64 {
		m := map[string]float64{}
		for i, p := range curvePercentiles {
			m[fmtFloat(p, 3)] = base * float64(1+i)
		}
		return m
	}
	same := "half of fcap-1's peak"
	return []*Result{
		{Target: "null", Kind: "null", Workload: "check", Mode: "closed", Concurrency: 64, Candidates: 100, RequestsPS: 300_000, ChecksPS: 30_000_000, GenCPUPct: 100},
		{Target: "fcap-1", Kind: "fcap", Workload: "allow", Mode: "closed", Concurrency: 64, Candidates: 1, RequestsPS: 90_000, ChecksPS: 90_000, P99: 1500, Percentiles: pcts(10)},
		{Target: "redis-sliding", Kind: "redis-sliding", Workload: "allow", Mode: "closed", Concurrency: 64, Candidates: 1, RequestsPS: 45_000, ChecksPS: 45_000, P99: 4000, Percentiles: pcts(20)},
		{Target: "fcap-1", Kind: "fcap", Workload: "check", Mode: "closed", Concurrency: 64, Candidates: 100, RequestsPS: 30_000, ChecksPS: 3_000_000, P99: 7000, Percentiles: pcts(50)},
		{Target: "redis-sliding", Kind: "redis-sliding", Variant: "pipeline", Workload: "check", Mode: "closed", Concurrency: 64, Candidates: 100, RequestsPS: 6000, ChecksPS: 600_000, P99: 30_000, Percentiles: pcts(300)},
		{Target: "redis-sliding", Kind: "redis-sliding", Variant: "lua", Workload: "check", Mode: "closed", Concurrency: 64, Candidates: 100, RequestsPS: 12_000, ChecksPS: 1_200_000, P99: 20_000, Percentiles: pcts(200)},
		{Target: "fcap-1", Kind: "fcap", Workload: "check", Mode: "open", Rate: 15_000, RateBasis: same, Concurrency: 64, Candidates: 100, RequestsPS: 15_000, ChecksPS: 1_500_000, P99: 800, Percentiles: pcts(5)},
		{Target: "redis-sliding", Kind: "redis-sliding", Variant: "pipeline", Workload: "check", Mode: "open", Rate: 15_000, RateBasis: same, Concurrency: 64, Candidates: 100, RequestsPS: 6000, ChecksPS: 600_000, P99: 80_000, Expired: 9000, Requests: 9000, Percentiles: pcts(1000)},
		{Target: "redis-sliding", Kind: "redis-sliding", Variant: "lua", Workload: "check", Mode: "open", Rate: 15_000, RateBasis: same, Concurrency: 64, Candidates: 100, RequestsPS: 12_000, ChecksPS: 1_200_000, P99: 40_000, Percentiles: pcts(800)},
		{Target: "redis-sliding", Kind: "redis-sliding", Variant: "lua", Workload: "check", Mode: "open", Rate: 6000, RateBasis: "half of its own peak", Concurrency: 64, Candidates: 100, RequestsPS: 6000, ChecksPS: 600_000, P99: 900, Percentiles: pcts(8)},
		{Target: "fcap-1", Kind: "fcap", Workload: "check", Mode: "open", Rate: 6000, RateBasis: "half of redis-sliding (lua)'s peak", Concurrency: 64, Candidates: 100, RequestsPS: 6000, ChecksPS: 600_000, P99: 700, Percentiles: pcts(4)},
		{Target: "fcap", Kind: "fcap", Workload: "load", Mode: "memory", Seconds: 10, Memory: &MemResult{Method: "allow", Viewers: 200_000, Campaigns: 5, Impressions: 5, Keys: 1_000_000, ServerKeys: 1_000_000, Source: "go_memstats_heap_alloc_bytes", BytesPerKey: 60, RSSPerKey: 90, ForcedGC: true}},
		{Target: "fcap", Kind: "fcap", Workload: "load", Mode: "memory", Seconds: 3, Memory: &MemResult{Method: "record", Viewers: 200_000, Campaigns: 5, Impressions: 5, Keys: 1_000_000, ServerKeys: 1_000_000, Source: "go_memstats_heap_alloc_bytes", BytesPerKey: 160, RSSPerKey: 300}},
		{Target: "redis-sliding", Kind: "redis-sliding", Workload: "load", Mode: "memory", Seconds: 8, Memory: &MemResult{Method: "zadd", Viewers: 200_000, Campaigns: 5, Impressions: 5, Keys: 1_000_000, ServerKeys: 1_000_000, Source: "used_memory", BytesPerKey: 300, RSSPerKey: 310}},
	}
}

func TestGoals(t *testing.T) {
	rep := report{Results: fixedResults()}
	rows := rep.goals()
	want := []struct{ figure, fcap, redis, ratio, verdict string }{
		// 3M against the better Redis variant (lua, 1.2M): 2.5x < 3x.
		{"checks/s", "3M", "600k (pipeline), 1.2M (lua)", "5.00x vs pipeline; 2.50x vs lua", "**missed**"},
		{"single Allow", "90k", "45k", "2.00x", "**met**"},
		// 800us < 1ms and below both Redis variants at the same rate.
		{"p99 of a 100-candidate check, open loop at 15k/s (half of fcap-1's peak)", "800us", "80ms (pipeline, 50% expired), 40ms (lua)", "0.010x vs pipeline; 0.020x vs lua", "**met**"},
		{"open loop at 6k/s (half of redis-sliding (lua)'s peak, Redis not saturated)", "700us", "900us (lua)", "0.78x vs lua", "**met**"},
		{"counters only", "60.0 B", "300.0 B", "0.20x", "**met**"},
		{"with impression ids", "160.0 B", "300.0 B", "0.53x", "**missed**"},
	}
	if len(rows) != len(want) {
		t.Fatalf("%d goal rows, want %d: %+v", len(rows), len(want), rows)
	}
	for i, w := range want {
		g := rows[i]
		if !strings.Contains(g.Figure, w.figure) || g.Fcap != w.fcap || g.Redis != w.redis || g.Ratio != w.ratio || g.Verdict != w.verdict {
			t.Errorf("row %d = %+v\nwant %+v", i, g, w)
		}
	}
}

func TestMarkdownReport(t *testing.T) {
	rep := report{Results: fixedResults(), Command: "scripts/bench.sh", Setup: "Pinning: none.",
		Date: time.Date(2026, 11, 30, 21, 0, 0, 0, time.UTC), Duration: 9 * time.Minute, Errors: []string{"redis-fixed: refused"}}
	md := rep.markdown([]chartFile{{"Throughput", "throughput.png"}}, "docs/bench/x/")
	for _, want := range []string{
		"## Side by side with Redis, 2026-11-30\n",
		"Measured 2026-11-30 21:00 UTC in 9m0s with:\n\n```sh\nscripts/bench.sh\n```",
		"Pinning: none.",
		"reaches 300k requests/s = 30M checks/s",
		"| figure | goal | fcap | Redis | fcap / Redis | verdict |",
		"| single Allow calls/s, closed loop: fcap-1 vs redis-sliding | >= 1.5x | 90k | 45k | 2.00x | **met** |",
		"| redis-sliding (lua) | check | open (half of its own peak) | 64 | 6k | 6k | 600k | ",
		"| redis-sliding (pipeline) | check | open (half of fcap-1's peak) | 64 | 15k | 6k | 600k | 0us | 80ms | 0us | 0us | 0us | 0 | 9000 | ",
		"| fcap | Record (impression ids kept for idempotency) | 1000000 | 1000000 | 160.0 | 300.0 | `go_memstats_heap_alloc_bytes` (no GC forced: fcapd without --pprof) | 3.0s |",
		"| fcap | Allow (counters only) | 1000000 | 1000000 | 60.0 | 90.0 | `go_memstats_heap_alloc_bytes` after a forced GC | 10.0s |",
		"![Throughput](docs/bench/x/throughput.png)",
		"### Failed runs\n\n- redis-fixed: refused\n",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q:\n%s", want, md)
		}
	}
}

// TestReportWrite writes a whole report and appends it to a markdown
// file in another directory, with chart links relative to that file.
func TestReportWrite(t *testing.T) {
	root := t.TempDir()
	md := filepath.Join(root, "BENCHMARKS.md")
	os.WriteFile(md, []byte("# benchmarks\n"), 0o644)
	out := filepath.Join(root, "docs", "bench", "today")
	rep := report{Results: fixedResults(), Command: "x", Date: time.Now()}
	var stdout bytes.Buffer
	if err := rep.write(out, md, &stdout); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"results.json", "report.md", "throughput.png", "latency-allow-closed.png", "latency-check-closed.png",
		"latency-check-open.png", "latency-check-open-redis-rate.png", "memory.png"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	b, _ := os.ReadFile(md)
	if !strings.HasPrefix(string(b), "# benchmarks\n\n## Side by side with Redis") || !strings.Contains(string(b), "](docs/bench/today/throughput.png)") {
		t.Errorf("BENCHMARKS.md:\n%s", b)
	}
	rs, err := readResults(filepath.Join(out, "results.json"))
	if err != nil || len(rs) != len(fixedResults()) || rs[11].Memory == nil || rs[11].Memory.BytesPerKey != 60 {
		t.Errorf("results.json read back: %v, %d results", err, len(rs))
	}
	if !strings.Contains(stdout.String(), "2.00x -> met") {
		t.Errorf("summary:\n%s", stdout.String())
	}
}

func readPNG(t *testing.T, path string) image.Image {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// runOf returns the longest horizontal run of col in any row.
func runOf(img image.Image, col color.RGBA) int {
	b := img.Bounds()
	best := 0
	for y := b.Min.Y; y < b.Max.Y; y++ {
		n := 0
		for x := b.Min.X; x < b.Max.X; x++ {
			if color.RGBAModel.Convert(img.At(x, y)) == col {
				n++
				best = max(best, n)
			} else {
				n = 0
			}
		}
	}
	return best
}

func count(img image.Image, col color.RGBA) int {
	b := img.Bounds()
	n := 0
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			if color.RGBAModel.Convert(img.At(x, y)) == col {
				n++
			}
		}
	}
	return n
}

// TestBarsAreProportional draws two bars, one twice the other, on a
// scale from zero.
func TestBarsAreProportional(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bars.png")
	a, b := color.RGBA{10, 20, 200, 255}, color.RGBA{200, 20, 10, 255}
	err := drawBars(path, "Title", "subtitle", []barPanel{{title: "panel", bars: []bar{{label: "big", value: 2000, col: a}, {label: "small", value: 1000, col: b}}}})
	if err != nil {
		t.Fatal(err)
	}
	img := readPNG(t, path)
	if img.Bounds().Dx() != barWidth {
		t.Errorf("width %d", img.Bounds().Dx())
	}
	big, small := runOf(img, a), runOf(img, b)
	if small < 50 || big < 2*small-2 || big > 2*small+2 {
		t.Errorf("bar lengths %d and %d, want 2:1", big, small)
	}
	if count(img, ink) < 200 { // title, labels and values are drawn
		t.Errorf("only %d ink pixels: no text?", count(img, ink))
	}
}

// TestLatencyCurves draws two curves and checks each is there, the
// slower above the faster, and the goal line drawn.
func TestLatencyCurves(t *testing.T) {
	path := filepath.Join(t.TempDir(), "lat.png")
	fast, slow := color.RGBA{10, 20, 200, 255}, color.RGBA{200, 20, 10, 255}
	pts := func(base float64) [][2]float64 {
		var out [][2]float64
		for i, p := range curvePercentiles {
			out = append(out, [2]float64{p, base * float64(1+i)})
		}
		return out
	}
	err := drawLatency(path, "Title", "sub", []curve{{label: "fast", col: fast, pts: pts(10)}, {label: "slow", col: slow, pts: pts(1000)}}, 1000)
	if err != nil {
		t.Fatal(err)
	}
	img := readPNG(t, path)
	if count(img, fast) < 500 || count(img, slow) < 500 {
		t.Fatalf("curve pixels: fast %d, slow %d", count(img, fast), count(img, slow))
	}
	// At the p50 column the slow curve is higher (smaller y).
	x := latLeft + int(float64(latW-latRight-latLeft)*pctX(50)/pctX(latMaxPct))
	yOf := func(col color.RGBA) int {
		for y := latTop; y < latTop+latPlotH; y++ {
			for dx := -2; dx <= 2; dx++ {
				if color.RGBAModel.Convert(img.At(x+dx, y)) == col {
					return y
				}
			}
		}
		return -1
	}
	if yf, ys := yOf(fast), yOf(slow); yf < 0 || ys < 0 || ys >= yf {
		t.Errorf("at p50: fast curve at y=%d, slow at y=%d; want slow above", yf, ys)
	}
}

func TestWrapText(t *testing.T) {
	got := wrapText("open loop at 17k requests/s for every target", 20, 2)
	if len(got) != 2 || got[0] != "open loop at 17k" || got[1] != "requests/s for every" {
		t.Errorf("wrapText = %q", got)
	}
	if got := wrapText("short", 20, 2); len(got) != 1 || got[0] != "short" {
		t.Errorf("wrapText = %q", got)
	}
}

func TestFormats(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{fmtNum(950), "950"}, {fmtNum(1500), "1.5k"}, {fmtNum(62_400), "62.4k"}, {fmtNum(2_810_000), "2.81M"}, {fmtNum(0), "0"},
		{fmtLatency(250), "250us"}, {fmtLatency(1500), "1.5ms"}, {fmtLatency(2_000_000), "2s"}, {fmtLatency(15_230), "15.23ms"},
		{fmtPct(99.99), "99.99"}, {fmtPct(50), "50"}, {fmtRatio(5.889), "5.89x"}, {fmtRatio(0.0123), "0.012x"}, {fmtRatio(12.4), "12x"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

func TestParseMetrics(t *testing.T) {
	text := `# HELP go_memstats_heap_alloc_bytes Number of heap bytes allocated and currently in use.
# TYPE go_memstats_heap_alloc_bytes gauge
go_memstats_heap_alloc_bytes 6.291456e+07
process_resident_memory_bytes 1.2345678e+08
fcap_engine_keys 1e+06
fcap_node_requests_total{op="check"} 12
`
	v, err := promValues(strings.NewReader(text), "go_memstats_heap_alloc_bytes", "process_resident_memory_bytes", "fcap_engine_keys")
	if err != nil || v[0] != 62914560 || v[1] != 123456780 || v[2] != 1_000_000 {
		t.Errorf("promValues = %v, %v", v, err)
	}
	if _, err := promValues(strings.NewReader(text), "nope"); err == nil {
		t.Error("a missing metric is not an error")
	}
	info := "# Memory\r\nused_memory:1048576\r\nused_memory_human:1.00M\r\nused_memory_rss:2097152\r\n"
	if n, err := infoField(info, "used_memory"); err != nil || n != 1048576 {
		t.Errorf("used_memory = %d, %v", n, err)
	}
	if n, err := infoField(info, "used_memory_rss"); err != nil || n != 2097152 {
		t.Errorf("used_memory_rss = %d, %v", n, err)
	}
}

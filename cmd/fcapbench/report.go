package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// report turns results into results.json, PNG charts, a markdown section
// and the summary against the targets, each figure a ratio fcap /
// Redis measured in the same run.
type report struct {
	Results  []*Result
	Command  string
	Setup    string
	Date     time.Time
	Duration time.Duration // of the whole suite; 0 if unknown
	Errors   []string
}

func readResults(path string) ([]*Result, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rs []*Result
	if err := json.Unmarshal(b, &rs); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return rs, nil
}

// write leaves results.json, the charts and report.md in outDir, appends
// the report to mdPath when given (chart links relative to it), and
// prints the tables and the summary.
func (rep *report) write(outDir, mdPath string, stdout io.Writer) error {
	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return err
	}
	if err := writeJSON(filepath.Join(outDir, "results.json"), rep.Results); err != nil {
		return err
	}
	charts, err := rep.charts(outDir)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(outDir, "report.md"), []byte(rep.markdown(charts, "")), 0o644); err != nil {
		return err
	}
	if mdPath != "" {
		rel, err := filepath.Rel(filepath.Dir(mdPath), outDir)
		if err != nil {
			return err
		}
		f, err := os.OpenFile(mdPath, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		_, err = io.WriteString(f, "\n"+rep.markdown(charts, filepath.ToSlash(rel)+"/"))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	fmt.Fprintln(stdout)
	printTable(stdout, rep.Results)
	if slices.ContainsFunc(rep.Results, func(r *Result) bool { return r.Memory != nil }) {
		fmt.Fprintln(stdout)
		printMemTable(stdout, rep.Results)
	}
	fmt.Fprintln(stdout)
	fmt.Fprint(stdout, rep.goalsText())
	fmt.Fprintf(stdout, "\nreport: %s (charts and results.json beside it)\n", filepath.Join(outDir, "report.md"))
	return nil
}

// find returns the first result matching, or nil. basis "" matches any.
func (rep *report) find(target, workload, mode, variant, basis string) *Result {
	for _, r := range rep.Results {
		if r.Target == target && r.Workload == workload && r.Mode == mode && r.Variant == variant &&
			(basis == "" || r.RateBasis == basis) {
			return r
		}
	}
	return nil
}

// all returns every variant of a target's runs of a workload and mode.
func (rep *report) all(target, workload, mode, basis string) []*Result {
	var out []*Result
	for _, r := range rep.Results {
		if r.Target == target && r.Workload == workload && r.Mode == mode && (basis == "" || r.RateBasis == basis) {
			out = append(out, r)
		}
	}
	return out
}

// targetsOf lists the performance targets of a kind in order of first
// appearance.
func (rep *report) targetsOf(kinds ...string) []string {
	var out []string
	for _, r := range rep.Results {
		if r.Memory == nil && slices.Contains(kinds, r.Kind) && !slices.Contains(out, r.Target) {
			out = append(out, r.Target)
		}
	}
	return out
}

// ownPeak is how the suite names the rate of a Redis target run at half
// its own peak.
const ownPeak = "half of its own peak"

// sameRateBasis is how the suite names the rate every target is offered
// in the open loop: half of the first fcap target's peak.
func (rep *report) sameRateBasis() string {
	if f := rep.targetsOf("fcap"); len(f) > 0 {
		return "half of " + f[0] + "'s peak"
	}
	return ""
}

// goalRow is one line of the summary against the targets.
type goalRow struct {
	Figure, Goal, Fcap, Redis, Ratio, Verdict string
}

// pairs matches fcap targets with the Redis sliding-window targets they
// are compared with: the first fcap with standalone Redis, the second
// (or the first) with Redis Cluster.
func (rep *report) pairs() [][2]string {
	fc := rep.targetsOf("fcap")
	if len(fc) == 0 {
		return nil
	}
	var out [][2]string
	if r := rep.targetsOf("redis-sliding"); len(r) > 0 {
		out = append(out, [2]string{fc[0], r[0]})
	}
	if r := rep.targetsOf("redis-cluster-sliding"); len(r) > 0 {
		f := fc[0]
		if len(fc) > 1 {
			f = fc[1]
		}
		out = append(out, [2]string{f, r[0]})
	}
	return out
}

func verdict(met bool) string {
	if met {
		return "**met**"
	}
	return "**missed**"
}

// goals computes the summary rows.
func (rep *report) goals() []goalRow {
	var rows []goalRow
	basis := rep.sameRateBasis()
	for _, p := range rep.pairs() {
		f, rd := p[0], p[1]
		// Checks per second, 100-candidate ad requests, closed loop.
		if fr := rep.find(f, "check", "closed", "", ""); fr != nil {
			if rs := rep.all(rd, "check", "closed", ""); len(rs) > 0 {
				best := slices.MaxFunc(rs, func(a, b *Result) int { return cmpF(a.ChecksPS, b.ChecksPS) })
				var parts, ratios []string
				for _, r := range rs {
					parts = append(parts, fmtNum(r.ChecksPS)+" ("+r.Variant+")")
					ratios = append(ratios, fmtRatio(fr.ChecksPS/r.ChecksPS)+" vs "+r.Variant)
				}
				ratio := fr.ChecksPS / best.ChecksPS
				rows = append(rows, goalRow{
					Figure: fmt.Sprintf("checks/s, %d-candidate ad requests, closed loop: %s vs %s", fr.Candidates, f, rd),
					Goal:   ">= 3x", Fcap: fmtNum(fr.ChecksPS), Redis: strings.Join(parts, ", "),
					Ratio: strings.Join(ratios, "; "), Verdict: verdict(ratio >= 3),
				})
			}
		}
		// Single Allow calls per second.
		if fr, rr := rep.find(f, "allow", "closed", "", ""), rep.find(rd, "allow", "closed", "", ""); fr != nil && rr != nil {
			ratio := fr.RequestsPS / rr.RequestsPS
			rows = append(rows, goalRow{
				Figure: fmt.Sprintf("single Allow calls/s, closed loop: %s vs %s", f, rd),
				Goal:   ">= 1.5x", Fcap: fmtNum(fr.RequestsPS), Redis: fmtNum(rr.RequestsPS),
				Ratio: fmtRatio(ratio), Verdict: verdict(ratio >= 1.5),
			})
		}
		// p99 of a check at the same offered rate.
		if fr := rep.find(f, "check", "open", "", basis); fr != nil {
			if rs := rep.all(rd, "check", "open", basis); len(rs) > 0 {
				lowest := slices.MinFunc(rs, func(a, b *Result) int { return cmpF(a.P99, b.P99) })
				var parts, ratios []string
				for _, r := range rs {
					parts = append(parts, fmtLatency(r.P99)+" ("+r.Variant+expiredNote(r)+")")
					ratios = append(ratios, fmtRatio(fr.P99/r.P99)+" vs "+r.Variant)
				}
				rows = append(rows, goalRow{
					Figure: fmt.Sprintf("p99 of a %d-candidate check, open loop at %s/s (%s): %s vs %s", fr.Candidates, fmtNum(fr.Rate), basis, f, rd),
					Goal:   "< 1 ms and < Redis", Fcap: fmtLatency(fr.P99) + expiredNote(fr), Redis: strings.Join(parts, ", "),
					Ratio: strings.Join(ratios, "; "), Verdict: verdict(fr.P99 < 1000 && fr.P99 < lowest.P99),
				})
			}
		}
		// The same at the rate Redis sustains: half of its best peak.
		for _, fr := range rep.all(f, "check", "open", "") {
			v, ok := strings.CutPrefix(fr.RateBasis, "half of "+rd+" (")
			if !ok {
				continue
			}
			v = strings.TrimSuffix(v, ")'s peak")
			if rr := rep.find(rd, "check", "open", v, ownPeak); rr != nil {
				rows = append(rows, goalRow{
					Figure: fmt.Sprintf("p99 of a %d-candidate check, open loop at %s/s (%s, Redis not saturated): %s vs %s", fr.Candidates, fmtNum(fr.Rate), fr.RateBasis, f, rd),
					Goal:   "< 1 ms and < Redis", Fcap: fmtLatency(fr.P99) + expiredNote(fr), Redis: fmtLatency(rr.P99) + " (" + v + expiredNote(rr) + ")",
					Ratio: fmtRatio(fr.P99/rr.P99) + " vs " + v, Verdict: verdict(fr.P99 < 1000 && fr.P99 < rr.P99),
				})
			}
		}
	}
	// Memory per key: fcap (each way it was loaded) against Redis's ZSET.
	var redisMem *Result
	for _, r := range rep.Results {
		if r.Memory != nil && r.Kind == "redis-sliding" {
			redisMem = r
			break
		}
	}
	for _, r := range rep.Results {
		if r.Memory == nil || r.Kind != "fcap" || redisMem == nil {
			continue
		}
		ratio := r.Memory.BytesPerKey / redisMem.Memory.BytesPerKey
		how := "counters only (Allow)"
		if r.Memory.Method == "record" {
			how = "with impression ids (Record)"
		}
		rows = append(rows, goalRow{
			Figure: fmt.Sprintf("bytes per key, %s keys x %d impressions, %s: %s heap vs %s used_memory", fmtNum(float64(r.Memory.Keys)), r.Memory.Impressions, how, r.Target, redisMem.Target),
			Goal:   "<= 0.5x", Fcap: fmtFloat(r.Memory.BytesPerKey, 1) + " B", Redis: fmtFloat(redisMem.Memory.BytesPerKey, 1) + " B",
			Ratio: fmtRatio(ratio), Verdict: verdict(ratio <= 0.5),
		})
	}
	return rows
}

func cmpF(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func fmtRatio(r float64) string {
	switch {
	case r >= 10:
		return fmtFloat(r, 0) + "x"
	case r >= 0.1:
		return fmtFloat(r, 2) + "x"
	}
	return fmtFloat(r, 3) + "x"
}

// expiredNote says what share of an open loop's requests expired in the
// queue (the target was behind), if any.
func expiredNote(r *Result) string {
	if r.Expired == 0 {
		return ""
	}
	return fmt.Sprintf(", %s expired", pct(float64(r.Expired), float64(r.Expired+r.Requests)))
}

func pct(part, whole float64) string {
	if whole == 0 {
		return "0%"
	}
	v := 100 * part / whole
	if v < 1 {
		return fmtFloat(v, 2) + "%"
	}
	return fmtFloat(v, 0) + "%"
}

// goalsText is the summary for a terminal.
func (rep *report) goalsText() string {
	rows := rep.goals()
	if len(rows) == 0 {
		return "no fcap / Redis pair measured: no ratios\n"
	}
	var b strings.Builder
	b.WriteString("Against the targets (fcap / Redis, measured in this run):\n")
	for _, g := range rows {
		fmt.Fprintf(&b, "- %s\n    goal %s: fcap %s, Redis %s: %s -> %s\n", g.Figure, g.Goal, g.Fcap, g.Redis, g.Ratio, strings.Trim(g.Verdict, "*"))
	}
	return b.String()
}

// markdown is the report section; chart links are prefixed with prefix.
func (rep *report) markdown(charts []chartFile, prefix string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Side by side with Redis, %s\n\n", rep.Date.UTC().Format("2006-01-02"))
	fmt.Fprintf(&b, "Measured %s", rep.Date.UTC().Format("2006-01-02 15:04 MST"))
	if rep.Duration > 0 {
		fmt.Fprintf(&b, " in %s", rep.Duration.Round(time.Second))
	}
	b.WriteString(" with:\n\n```sh\n" + rep.Command + "\n```\n\n")
	if rep.Setup != "" {
		b.WriteString(rep.Setup + "\n\n")
	}
	if n := rep.find("null", "check", "closed", "", ""); n != nil {
		fmt.Fprintf(&b, "The generator alone (the null target, answering at once) reaches %s requests/s = %s checks/s here, using %.0f%% of a core: the ceiling of every figure below.\n\n",
			fmtNum(n.RequestsPS), fmtNum(n.ChecksPS), n.GenCPUPct)
	}
	if rows := rep.goals(); len(rows) > 0 {
		b.WriteString("### Against the targets\n\nEach ratio is fcap / Redis, both measured in this run on this machine.\n\n")
		b.WriteString("| figure | goal | fcap | Redis | fcap / Redis | verdict |\n|---|---|---|---|---|---|\n")
		for _, g := range rows {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", g.Figure, g.Goal, g.Fcap, g.Redis, g.Ratio, g.Verdict)
		}
		b.WriteString("\n")
	}
	b.WriteString("### Every run\n\n")
	b.WriteString("Latency is per request (one Allow, or one check of all its candidates), from its scheduled start in the open loop. " +
		"*expired*: open-loop requests that waited in the generator's queue past the call deadline because the target was behind, given up unsent (their wait counts in the percentiles). " +
		"*queue p99*: open loop, the p99 of the wait between a request's scheduled start and a caller taking it: the generator's own lateness, or every caller busy (the rest is the call). " +
		"*gen CPU*, *server CPU*: the generator's and the servers' CPU, 100% = one core; *other CPU*: what everything else on the machine used meanwhile (a step it disturbed by more than a quarter of a core is rerun, up to a budget). " +
		"*steal*: CPU time the hypervisor took.\n\n")
	b.WriteString("| target | workload | mode | callers | rate/s | requests/s | checks/s | p50 | p99 | p99.9 | max | queue p99 | errors | expired | fail-open | gen CPU | server CPU | other CPU | steal |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rep.Results {
		if r.Memory != nil {
			continue
		}
		mode, rate, queue := r.Mode, "-", "-"
		if r.Mode == "open" {
			rate, queue = fmtNum(r.Rate), fmtLatency(r.QueueP99)
			if r.RateBasis != "" {
				mode += " (" + r.RateBasis + ")"
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %d | %d | %d | %.0f%% | %s | %s | %.1f%% |\n",
			r.Label(), r.Workload, mode, r.Concurrency, rate, fmtNum(r.RequestsPS), fmtNum(r.ChecksPS),
			fmtLatency(r.P50), fmtLatency(r.P99), fmtLatency(r.P999), fmtLatency(r.Max), queue,
			r.Errors, r.Expired, r.FailedOver, r.GenCPUPct, pctOrDash(r.ServerCPUPct, r), pctOrDash(r.OtherCPUPct, r)+attemptsNote(r), r.HostStealPct)
	}
	b.WriteString("\n")
	var mem []*Result
	for _, r := range rep.Results {
		if r.Memory != nil {
			mem = append(mem, r)
		}
	}
	if len(mem) > 0 {
		m0 := mem[0].Memory
		fmt.Fprintf(&b, "### Memory: %s viewers x %d campaigns = %s keys, %d impressions each\n\n", fmtNum(float64(m0.Viewers)), m0.Campaigns, fmtNum(float64(m0.Keys)), m0.Impressions)
		b.WriteString("Each target starts empty; bytes per key is what the server's memory grew by, over the keys loaded. " +
			"fcap: the node's Go heap (`go_memstats_heap_alloc_bytes`) and RSS from its `/metrics`; Redis: `INFO memory` `used_memory` and `used_memory_rss`.\n\n")
		b.WriteString("| target | loaded with | keys | keys on the server | bytes/key | RSS bytes/key | measured as | load time |\n|---|---|---|---|---|---|---|---|\n")
		for _, r := range mem {
			m := r.Memory
			src := "`" + m.Source + "`"
			if r.Kind == "fcap" {
				if m.ForcedGC {
					src += " after a forced GC"
				} else {
					src += " (no GC forced: fcapd without --pprof)"
				}
			}
			fmt.Fprintf(&b, "| %s | %s | %d | %d | %.1f | %.1f | %s | %.1fs |\n", r.Target, methodText(m.Method), m.Keys, m.ServerKeys, m.BytesPerKey, m.RSSPerKey, src, r.Seconds)
		}
		b.WriteString("\n")
	}
	if len(charts) > 0 {
		b.WriteString("### Charts\n\n")
		for _, c := range charts {
			fmt.Fprintf(&b, "![%s](%s%s)\n\n", c.title, prefix, c.file)
		}
	}
	if len(rep.Errors) > 0 {
		b.WriteString("### Failed runs\n\n")
		for _, e := range rep.Errors {
			b.WriteString("- " + e + "\n")
		}
		b.WriteString("\n")
	}
	return b.String()
}

// memShape describes the memory load, for a chart's subtitle.
func (rep *report) memShape() string {
	for _, r := range rep.Results {
		if m := r.Memory; m != nil {
			return fmt.Sprintf("%s keys (%s viewers x %d campaigns), %d impressions each, cap %d a day, sliding window (fixed: one counter)",
				fmtNum(float64(m.Keys)), fmtNum(float64(m.Viewers)), m.Campaigns, m.Impressions, m.Impressions)
		}
	}
	return ""
}

// pctOrDash prints a server-side CPU share, or "-" when the run did not
// know the servers' PIDs.
func pctOrDash(v float64, r *Result) string {
	if r.ServerCPUPct == 0 && r.OtherCPUPct == 0 {
		return "-"
	}
	return fmtFloat(v, 0) + "%"
}

// attemptsNote says which attempt a rerun step's figures come from.
func attemptsNote(r *Result) string {
	if r.Attempts > 1 {
		return fmt.Sprintf(" (best of %d runs)", r.Attempts)
	}
	return ""
}

func methodText(m string) string {
	switch m {
	case "allow":
		return "Allow (counters only)"
	case "record":
		return "Record (impression ids kept for idempotency)"
	case "zadd":
		return "ZADD impression id + PEXPIRE (the recipe's record)"
	case "incr":
		return "INCR + PEXPIRE (the fixed recipe)"
	}
	return m
}

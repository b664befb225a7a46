package chaos

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/test/cluster"
)

// check prints every invariant with its figure and fails the test on
// those broken (see knownFailures for the short run's exceptions).
func (h *harness) check(l *ledger, lag *lagMeter, windows []window, st client.Stats) {
	t := h.t
	if !h.unsettled {
		h.settle()
	}
	l.mu.Lock()
	defer l.mu.Unlock()

	// 1. No error reaches the ad server.
	t.Logf("calls: %d (%d checks, %d Allow), %d ticks skipped (every worker busy); impressions reported with Record: %d (refused by the client's queue: %d; acknowledged %d, retried %d, dropped %d)",
		l.calls, l.checks, l.records, l.skipped, l.reported, l.refused, st.RecordsAcked, st.RecordRetries, st.RecordsDropped)
	t.Logf("invariant errors returned: %d (want 0) %v", l.errors, l.errs)
	if l.errors != 0 {
		t.Errorf("%d calls returned an error", l.errors)
	}

	// 2. Every call returns by its deadline.
	l.mu.Unlock()
	p99, top := l.latencies()
	l.mu.Lock()
	t.Logf("calls past deadline+%v: %d; latency p99 %v, max %v, deadline %v", lateSlack, len(l.late), p99, top, *deadline)
	lp99, ltop, lateTimers := lag.stats()
	t.Logf("timer lag of the test process (4 probes, 5 ms timers): p99 %v, max %v; %d wake-ups over %v late: %s", lp99, ltop, len(lateTimers), lateSlack, tally(windows, lateTimers))
	t.Logf("garbage collection in the test process (client, proxies, harness): %s", lag.gc())
	// A call can return only once its goroutine runs: a late call whose
	// overrun is within the wake-up lag the probe saw around it waited
	// for a CPU (2 shared vCPUs, three race-built nodes and this
	// process's proxies), not for the client. One late beyond that is the
	// client's fault, and fails the run.
	var starved, unexplained []time.Time
	var worstExcess time.Duration
	for _, lc := range l.late {
		over := lc.took - *deadline
		lag := lag.worstAround(lc.start, lc.start.Add(lc.took))
		if over <= lag+lateSlack {
			starved = append(starved, lc.start)
			continue
		}
		unexplained = append(unexplained, lc.start)
		worstExcess = max(worstExcess, over-lag)
	}
	t.Logf("invariant calls past deadline+%v beyond the process's own wake-up lag: %d (want 0; worst %v beyond it); %d more within it (the machine starved, not the client): %s",
		lateSlack, len(unexplained), worstExcess, len(starved), tally(windows, starved))
	if len(unexplained) != 0 {
		h.violated("deadline", "%d calls returned more than %v after their %v deadline plus the wake-up lag around them (max latency %v): %s; by call: %v", len(unexplained), lateSlack, *deadline, top, tally(windows, unexplained), l.lateBy)
	}

	// 3. Fail-open only while a fault is in force.
	outside := 0
	var outAt []string
	for _, at := range l.failOpen {
		in := false
		for _, w := range windows {
			if !at.Before(w.from) && !at.After(w.to) {
				in = true
				break
			}
		}
		if !in {
			outside++
			if len(outAt) < 10 {
				note := ""
				if d, ok := h.rings.before(at); ok {
					note = fmt.Sprintf(" (the client's ring changed %v before)", d.Round(time.Millisecond))
				}
				outAt = append(outAt, "+"+h.since(at)+note)
			}
		}
	}
	t.Logf("invariant fail-open calls outside fault windows: %d (want 0); during faults %d; fail-closed calls %d; checks answered by a backup %d",
		outside, len(l.failOpen)-outside, l.failShut, l.stale)
	if outside != 0 {
		h.violated("fail-open", "%d calls failed open while no fault was in force, at %v (all: %s)", outside, outAt, tally(windows, l.failOpen))
	}

	// 4. Strict caps never exceeded; soft overshoot reported.
	strictOver, softOver, strictKeys := 0, 0, 0
	for k, n := range l.acked {
		switch {
		case k.cap.Mode == fcap.Strict:
			strictKeys++
			if n > int(k.cap.Limit) {
				strictOver += n - int(k.cap.Limit)
				h.violated("strict-over", "strict cap exceeded: %s %v granted %d times, limit %d", k.viewer, k.cap, n, k.cap.Limit)
			}
		case k.cap.Scope == "campaign":
			softOver += max(n-int(k.cap.Limit), 0)
		}
	}
	t.Logf("invariant strict grants over limit: %d (want 0) over %d strict keys; soft campaign overshoot: %d impressions", strictOver, strictKeys, softOver)

	// 5. Nothing acknowledged is lost: read every counter back. An
	// impression handed to Record counts as acknowledged once Flush
	// returned with none dropped; a dropped one may or may not count.
	t.Logf("invariant impressions the client gave up on (Record, after %d attempts each): %d (want 0); refused at the queue: %d (want 0)",
		client.DefaultConfig().RecordAttempts, st.RecordsDropped, l.refused)
	if st.RecordsDropped != 0 || l.refused != 0 {
		h.violated("record-dropped", "the client dropped %d impressions and refused %d: the cluster never counted them", st.RecordsDropped, l.refused)
	}
	reported := func(k key) (sure, maybe int) {
		if st.RecordsDropped != 0 {
			return 0, l.queued[k]
		}
		return l.queued[k], 0
	}
	got, rc := h.readBack(l)
	var lost [2]int // soft, strict
	extra, keys := 0, 0
	var lostKeys [2][]string
	for k, n := range got {
		keys++
		sure, maybe := reported(k)
		if a := l.acked[k] + sure; n < a && !(k.cap.Limit < fcap.MaxLimit && n >= int(k.cap.Limit)) {
			m := k.cap.Mode
			lost[m] += a - n
			var at []string
			for _, x := range l.ackedAt[k] {
				at = append(at, "+"+h.since(x))
			}
			if len(lostKeys[m]) < 10 {
				lostKeys[m] = append(lostKeys[m], fmt.Sprintf("\n\t%s (%s) %v: acked %d counted %d, acked at %v, during: %s",
					k.viewer, owners(rc, k.viewer), k.cap, a, n, at, tally(windows, l.ackedAt[k])))
			}
		}
		if most := l.acked[k] + l.unknown[k] + sure + maybe; k.cap.Limit == fcap.MaxLimit && n > most {
			extra += n - most
		}
	}
	for m := range lostKeys {
		sort.Strings(lostKeys[m])
	}
	t.Logf("invariant acknowledged impressions lost: strict %d (want 0), soft %d (want 0: one fault at a time, R=%d) over %d counters; counted more than acknowledged+unknown: %d",
		lost[fcap.Strict], lost[fcap.Soft], *replicas, keys, extra)
	if lost[fcap.Strict] != 0 {
		h.violated("strict-loss", "%d acknowledged strict impressions lost: %v", lost[fcap.Strict], lostKeys[fcap.Strict])
	}
	if lost[fcap.Soft] != 0 {
		h.violated("soft-loss", "%d acknowledged soft impressions lost: %v", lost[fcap.Soft], lostKeys[fcap.Soft])
	}
	if d := h.direct.Load(); d != 0 {
		t.Logf("note: %d connections bypassed the proxies (address not routed)", d)
	}
}

// readBack counts every counter the ledger touched, through a client
// that reaches the nodes directly with a generous deadline.
func (h *harness) readBack(l *ledger) (map[key]int, *client.Client) {
	t := h.t
	c := cluster.NewClient(t, h.seeds())
	per := map[string][]fcap.Cap{}
	for _, m := range []map[key]int{l.acked, l.unknown, l.queued} {
		for k := range m {
			per[k.viewer] = append(per[k.viewer], k.cap)
		}
	}
	out := map[key]int{}
	for v, caps := range per {
		seen := map[fcap.Cap]bool{}
		var cands []fcap.Candidate
		for _, c := range caps {
			if !seen[c] {
				seen[c] = true
				cands = append(cands, fcap.Candidate{Caps: []fcap.Cap{c}})
			}
		}
		var res *client.CheckResult
		cluster.Eventually(t, 30*time.Second, func() bool {
			var err error
			res, err = c.Check(context.Background(), v, cands)
			if err != nil {
				return false
			}
			for _, vd := range res.Verdicts {
				if vd.Failed() || vd.Stale {
					return false
				}
			}
			return true
		}, "the cluster does not answer for %s", v)
		for i, cd := range cands {
			out[key{v, cd.Caps[0]}] = int(cd.Caps[0].Limit - res.Verdicts[i].Remaining)
		}
	}
	return out, c
}

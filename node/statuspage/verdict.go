package statuspage

import (
	"fmt"
	"strings"
	"time"
)

// The verdict: one line at the top of the page, "healthy", or
// "degraded: " and what is wrong, most serious first, from what the
// page shows (each item is also red in its row):
//
//   - a member that did not answer ("n2 unreachable");
//   - a failed member: vanished without a drain, not forgotten ("n4
//     failed");
//   - a member joined to none of its seeds ("n1 joined no cluster");
//   - fewer members than replicas (R): partitions lack copies;
//   - partitions syncing: owned, not received yet, their requests
//     refused (summed over the members);
//   - partitions under-replicated: a backup does not hold them yet
//     (summed over their primaries);
//   - members without a strict majority: strict caps fail closed on them;
//   - partitions claimed without any holder's copy (strict caps refused
//     on them);
//   - a member that answered more than errorShare of its ad servers'
//     requests with an error over the last minute;
//   - a member whose p99 handling time over the last minute is past
//     p99Limit;
//   - a member whose counter state is at memoryWarn of its --memory-limit
//     or past it (past it, new counters are refused).
//
// fcapctl status judges the cluster by the same membership, replication
// and strict-authority rules.
const (
	// errorShare is the share of a member's recent requests answered
	// with an error past which the verdict names it.
	errorShare = 0.01
	// p99Limit is the handling time on the node past which a member's
	// p99 degrades the verdict: a fifth of the client's default 5 ms
	// deadline, which also covers the network and the ad server. It is a
	// bound of the latency histogram, so "past it" is exact.
	p99Limit = time.Millisecond
	// memoryWarn is the share of the memory limit past which a member's
	// memory is flagged.
	memoryWarn = 0.9
)

// judge sets the page's verdict from its members, and the thresholds
// the note under the table states.
func (d *pageData) judge() {
	d.ErrorLimit, d.P99Limit, d.MemoryWarn = percent(errorShare), p99Limit.String(), fmt.Sprintf("%.0f%%", 100*memoryWarn)
	var (
		problems                      []string
		unreachable, failed, joinless []string
		noStrict, slow, erring        []string
		memory                        []string
		syncing, underRepl, claimed   uint64
	)
	for _, m := range d.Members {
		switch {
		case m.Failed:
			failed = append(failed, m.Name)
			continue
		case !m.Reachable:
			unreachable = append(unreachable, m.Name)
			continue
		}
		if m.JoinError != "" {
			joinless = append(joinless, m.Name)
		}
		syncing += m.Syncing
		underRepl += m.UnderRepl
		claimed += m.Claimed
		if m.NoStrict {
			noStrict = append(noStrict, m.Name)
		}
		if m.ErrorsBad {
			erring = append(erring, fmt.Sprintf("%s errors on %s", m.ErrorShare, m.Name))
		}
		if m.P99Bad {
			slow = append(slow, m.Name)
		}
		if m.MemoryBad {
			memory = append(memory, m.MemoryNote)
		}
	}
	for _, n := range unreachable {
		problems = append(problems, n+" unreachable")
	}
	for _, n := range failed {
		problems = append(problems, n+" failed")
	}
	for _, n := range joinless {
		problems = append(problems, n+" joined no cluster")
	}
	if n := d.RingMembers; n > 0 && n < d.Replicas {
		problems = append(problems, fmt.Sprintf("%s for R=%d: partitions have %d %s", plural(n, "member"), d.Replicas, n, pluralWord(n, "copy", "copies")))
	}
	if syncing > 0 {
		problems = append(problems, plural(int(syncing), "partition")+" syncing")
	}
	if underRepl > 0 {
		problems = append(problems, plural(int(underRepl), "partition")+" under-replicated")
	}
	if len(noStrict) > 0 {
		problems = append(problems, "strict caps refused on "+strings.Join(noStrict, ", ")+" (no majority)")
	}
	if claimed > 0 {
		problems = append(problems, plural(int(claimed), "partition")+" claimed without a holder's copy")
	}
	problems = append(problems, erring...)
	if len(slow) > 0 {
		problems = append(problems, "p99 over "+p99Limit.String()+" on "+strings.Join(slow, ", "))
	}
	problems = append(problems, memory...)
	d.Healthy = len(problems) == 0
	d.Verdict = "healthy"
	if !d.Healthy {
		d.Verdict = "degraded: " + strings.Join(problems, "; ")
	}
}

// plural writes "1 partition", "3 partitions".
func plural(n int, word string) string {
	return fmt.Sprintf("%d %s", n, pluralWord(n, word, word+"s"))
}

func pluralWord(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

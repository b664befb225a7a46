package statuspage

import (
	"fmt"
	"time"

	"github.com/fcap-io/fcap/proto"
)

// serving is a member's row of build, memory and recent serving figures,
// as its Status reports them. A node that predates them (no Version)
// shows only its memory.
type serving struct {
	Version string // its build, "v1.2.0"
	Uptime  string // how long it has run, "3h12m"
	// Memory is its counter state against its --memory-limit: "1.2 GiB
	// of 4.0 GiB, 30%"; MemoryBad past memoryWarn of the limit, and
	// MemoryNote what the verdict says of it.
	Memory     string
	MemoryBad  bool
	MemoryNote string
	// P99 bounds the 99th percentile of its ad servers' requests'
	// handling time over Window: "≤ 250µs" (a bucket's bound), "> 5ms";
	// P99Bad past p99Limit.
	P99    string
	P99Bad bool
	// Errors counts those requests answered with an error over Window:
	// "3 of 1200 (0.25%)"; ErrorShare the percentage, ErrorsBad past
	// errorShare.
	Errors     string
	ErrorShare string
	ErrorsBad  bool
	// Window is the span the recent figures cover: "last 1m05s".
	Window string
}

// noServing is the row of a member that did not answer.
var noServing = serving{Version: "-", Uptime: "-", Memory: "-", P99: "-", Errors: "-", Window: "no figures"}

// fill sets the figures of the member name from its status.
func (s *serving) fill(name string, st *proto.Status) {
	*s = noServing
	s.Memory = humanBytes(st.Bytes)
	if st.MemoryLimit > 0 {
		share := float64(st.Bytes) / float64(st.MemoryLimit)
		s.Memory = fmt.Sprintf("%s of %s, %.0f%%", humanBytes(st.Bytes), humanBytes(st.MemoryLimit), 100*share)
		switch {
		case st.Bytes >= st.MemoryLimit:
			s.MemoryBad, s.MemoryNote = true, name+" over its memory limit (new counters refused)"
		case share >= memoryWarn:
			s.MemoryBad, s.MemoryNote = true, fmt.Sprintf("%s memory at %.0f%% of its limit", name, 100*share)
		}
	} else if st.Version != "" {
		s.Memory += ", no limit"
	}
	if st.Version == "" {
		return // a node that predates the figures below
	}
	s.Version = st.Version
	s.Uptime = humanDuration(time.Duration(st.UptimeMillis) * time.Millisecond)
	if st.RecentMillis == 0 {
		return // its sampler has not started
	}
	s.Window = "last " + humanDuration(time.Duration(st.RecentMillis)*time.Millisecond)
	s.Errors = fmt.Sprintf("%d of %d", st.RecentErrors, st.RecentRequests)
	if st.RecentRequests == 0 {
		return
	}
	share := float64(st.RecentErrors) / float64(st.RecentRequests)
	s.ErrorShare, s.ErrorsBad = percent(share), share > errorShare
	if st.RecentErrors > 0 {
		s.Errors += " (" + s.ErrorShare + ")"
	}
	p99 := time.Duration(st.P99Nanos)
	s.P99, s.P99Bad = "≤ "+p99.String(), p99 > p99Limit
	if st.P99Over {
		s.P99, s.P99Bad = "> "+p99.String(), true
	}
}

// percent writes a share as a percentage, with two decimals under 1%
// ("0.25%") and one above ("2.0%").
func percent(share float64) string {
	if share < 0.01 {
		return fmt.Sprintf("%.2f%%", 100*share)
	}
	return fmt.Sprintf("%.1f%%", 100*share)
}

// humanDuration writes a duration in its two largest units: "42s",
// "12m05s", "3h12m", "2d03h".
func humanDuration(d time.Duration) string {
	d = max(d, 0).Truncate(time.Second)
	switch {
	case d < time.Minute:
		return d.String()
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d/time.Minute), int(d%time.Minute/time.Second))
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d/time.Hour), int(d%time.Hour/time.Minute))
	}
	return fmt.Sprintf("%dd%02dh", int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour))
}

package metrics

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// The node's recent serving figures, for its Status and so the status
// page: how many requests of ad servers it answered over about the last
// minute, how many with an error, and the 99th percentile of their
// handling time. A sampler (RunRecent) snapshots the cumulative counts
// every RecentStep and keeps the snapshots of the last RecentWindow; the
// figures are the change from the oldest one kept to the moment they are
// asked for. Requests pay nothing for it: the counts are those Observe
// keeps anyway, read back from the latency histograms and the request
// counters.

const (
	// RecentStep is how often the sampler snapshots the counts.
	RecentStep = 10 * time.Second
	// RecentWindow is how far back the figures reach: they cover between
	// RecentWindow and RecentWindow+RecentStep once the node has run
	// that long, and the time since the sampler started before.
	RecentWindow = time.Minute
)

// servingOps are the requests of ad servers (the client's calls), whose
// latency and errors the recent figures count; peer traffic, pings,
// topology and operator requests are left out.
var servingOps = [...]Op{OpCheck, OpAllow, OpRecord, OpReserve, OpRelease, OpIdentity, OpUndo, OpErase, OpVoid}

// errorOutcomes are the answers the recent figures count as errors.
// NotOwner is routing (the client refreshes its ring and retries) and
// UnknownReservation an answer about the reservation, not a failure.
var errorOutcomes = [...]Outcome{OutcomeBadRequest, OutcomeCapacity, OutcomeError, OutcomeDeadline}

// latencyBounds are the upper bounds of fcap_node_request_duration_seconds'
// buckets, in seconds.
var latencyBounds = [...]float64{1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 5e-3}

// Recent is the node's recent serving figures.
type Recent struct {
	// Span is the time they cover; 0 before the sampler started.
	Span time.Duration
	// Requests counts the requests of ad servers answered over Span, and
	// Errors those answered with an error.
	Requests, Errors uint64
	// P99 is the upper bound of the latency bucket holding the 99th
	// percentile of their handling time: the p99 is at most P99. 0
	// without requests. P99Over says it is past the largest bound, which
	// P99 then holds.
	P99     time.Duration
	P99Over bool
}

// snapshot is the cumulative counts at one moment.
type snapshot struct {
	at       time.Time
	buckets  [len(latencyBounds) + 1]uint64 // observations per bucket, not cumulative; the last past every bound
	requests uint64
	errors   uint64
}

// sampler keeps the snapshots the recent figures are measured from.
type sampler struct {
	mu    sync.Mutex
	snaps []snapshot // guarded by mu; oldest first, spanning at most RecentWindow
}

// snapshot reads the cumulative counts now.
func (m *Set) snapshot(now time.Time) snapshot {
	s := snapshot{at: now}
	var pb dto.Metric
	for _, op := range servingOps {
		for oc := range NumOutcomes {
			s.requests += m.requests[op][oc].Load()
		}
		for _, oc := range errorOutcomes {
			s.errors += m.requests[op][oc].Load()
		}
		h, ok := m.Latency[op].(prometheus.Metric)
		if !ok {
			continue
		}
		pb.Reset()
		if err := h.Write(&pb); err != nil || pb.Histogram == nil {
			continue
		}
		var below uint64
		for i, b := range pb.Histogram.GetBucket() {
			if i >= len(latencyBounds) {
				break
			}
			c := b.GetCumulativeCount()
			s.buckets[i] += c - min(below, c)
			below = max(below, c)
		}
		total := pb.Histogram.GetSampleCount()
		s.buckets[len(latencyBounds)] += total - min(below, total)
	}
	return s
}

// SampleRecent records a snapshot of the counts at now, dropping those
// more than RecentWindow older.
func (m *Set) SampleRecent(now time.Time) {
	s := m.snapshot(now)
	r := &m.recent
	r.mu.Lock()
	defer r.mu.Unlock()
	r.snaps = append(r.snaps, s)
	drop := 0
	for drop < len(r.snaps)-1 && now.Sub(r.snaps[drop].at) > RecentWindow {
		drop++
	}
	r.snaps = append(r.snaps[:0], r.snaps[drop:]...)
}

// Recent returns the figures from the oldest snapshot kept to now.
func (m *Set) Recent(now time.Time) Recent {
	r := &m.recent
	r.mu.Lock()
	if len(r.snaps) == 0 {
		r.mu.Unlock()
		return Recent{}
	}
	base := r.snaps[0]
	r.mu.Unlock()
	cur := m.snapshot(now)
	out := Recent{Span: max(now.Sub(base.at), 0)}
	out.Requests = cur.requests - min(base.requests, cur.requests)
	out.Errors = cur.errors - min(base.errors, cur.errors)
	var delta [len(latencyBounds) + 1]uint64
	var total uint64
	for i := range delta {
		delta[i] = cur.buckets[i] - min(base.buckets[i], cur.buckets[i])
		total += delta[i]
	}
	if total == 0 {
		return out
	}
	// The smallest bound with at least 99% of the observations at or
	// below it.
	rank := uint64(math.Ceil(0.99 * float64(total)))
	var seen uint64
	for i, n := range delta[:len(latencyBounds)] {
		seen += n
		if seen >= rank {
			out.P99 = boundDuration(latencyBounds[i])
			return out
		}
	}
	out.P99, out.P99Over = boundDuration(latencyBounds[len(latencyBounds)-1]), true
	return out
}

// boundDuration turns a bound in seconds into a Duration, rounded to the
// nanosecond (2.5e-6 is not exact in binary).
func boundDuration(s float64) time.Duration {
	return time.Duration(math.Round(s * float64(time.Second)))
}

// RunRecent samples the counts every RecentStep until ctx ends, the first
// time at once.
func (m *Set) RunRecent(ctx context.Context) {
	m.SampleRecent(time.Now())
	t := time.NewTicker(RecentStep)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			m.SampleRecent(now)
		}
	}
}

// Uptime is the time since the collectors were made, when the node
// started.
func (m *Set) Uptime() time.Duration { return time.Since(m.started) }

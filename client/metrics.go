package client

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fcap-io/fcap/proto"
)

type opKind uint8

const (
	opCheck opKind = iota
	opAllow
	opReserve
	opRelease
	opLink
	opUnlink
	opResolve
	opErase
	opVoid
	numOps
)

var opNames = [numOps]string{"check", "allow", "reserve", "release", "link", "unlink", "resolve", "erase", "void"}

type outcome uint8

const (
	outcomeOK outcome = iota
	outcomeFailed
	outcomeBadRequest
	outcomeError
	numOutcomes
)

var outcomeNames = [numOutcomes]string{"ok", "failed_over", "bad_request", "error"}

func outcomeOf(err error) outcome {
	switch {
	case err == nil:
		return outcomeOK
	case errors.Is(err, proto.ErrBadRequest):
		return outcomeBadRequest
	}
	return outcomeError
}

// metricsRegisterer is the Registerer the client's metrics go to:
// Config.Registerer with the namespace and constant labels applied, or
// nil.
func metricsRegisterer(cfg Config) prometheus.Registerer {
	reg := cfg.Registerer
	if reg == nil {
		return nil
	}
	if len(cfg.MetricsLabels) > 0 {
		reg = prometheus.WrapRegistererWith(cfg.MetricsLabels, reg)
	}
	if cfg.MetricsNamespace != "" {
		reg = prometheus.WrapRegistererWithPrefix(cfg.MetricsNamespace+"_", reg)
	}
	return reg
}

// metrics are the client's collectors, for the ad server's own registry.
type metrics struct {
	calls             [numOps][numOutcomes]prometheus.Counter
	latency           [numOps]prometheus.Observer
	failOpen          prometheus.Counter
	failClosed        prometheus.Counter
	notOwnerRefreshes prometheus.Counter
	backupReads       prometheus.Counter
	backupWrites      prometheus.Counter
	hedgesSent        prometheus.Counter
	hedgesWon         prometheus.Counter
	hedgesCancelled   prometheus.Counter
	hedgeDelay        prometheus.Gauge
	topologyChanges   prometheus.Counter
	refreshErrors     prometheus.Counter
	dialErrors        prometheus.Counter
	recordQueued      prometheus.Counter
	recordSent        prometheus.Counter
	recordRetries     prometheus.Counter
	recordDropped     *prometheus.CounterVec
	recordQueue       prometheus.Gauge
	resolveMisses     prometheus.Counter
	resolveFailures   prometheus.Counter
	lateGrants        prometheus.Counter
	undos             *prometheus.CounterVec
}

// nodeGauges read the client's connection state when metrics are
// gathered: whether a node ever answered, the members that own
// partitions, and those of them with a connection up.
type nodeGauges struct {
	reached, active, connected func() float64
}

func newMetrics(reg prometheus.Registerer, g nodeGauges) (*metrics, error) {
	m := &metrics{}
	calls := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fcap_client_calls_total",
		Help: "Calls by operation and outcome: ok, failed_over (answered by the failure policy), bad_request, error.",
	}, []string{"op", "outcome"})
	latency := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "fcap_client_call_duration_seconds",
		Help:    "Call latency seen by the ad server, failures included.",
		Buckets: []float64{5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2e-3, 5e-3, 1e-2, 5e-2},
	}, []string{"op"})
	for op := range numOps {
		m.latency[op] = latency.WithLabelValues(opNames[op])
		for oc := range numOutcomes {
			m.calls[op][oc] = calls.WithLabelValues(opNames[op], outcomeNames[oc])
		}
	}
	verdicts := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fcap_client_policy_verdicts_total",
		Help: "Verdicts decided by the failure policy because the cluster did not answer in time: fail_open or fail_closed.",
	}, []string{"policy"})
	m.failOpen = verdicts.WithLabelValues("fail_open")
	m.failClosed = verdicts.WithLabelValues("fail_closed")
	m.notOwnerRefreshes = prometheus.NewCounter(prometheus.CounterOpts{Name: "fcap_client_not_owner_refreshes_total", Help: "Topology refreshes forced by a NotOwner answer."})
	m.backupReads = prometheus.NewCounter(prometheus.CounterOpts{Name: "fcap_client_backup_reads_total", Help: "Checks answered by a backup owner because the owner did not answer in time (soft caps)."})
	m.backupWrites = prometheus.NewCounter(prometheus.CounterOpts{Name: "fcap_client_backup_writes_total", Help: "Soft Allows and impressions taken by a backup owner because the owner could not be reached; the owner merges them in when it can."})
	m.hedgesSent = prometheus.NewCounter(prometheus.CounterOpts{Name: "fcap_client_hedges_sent_total", Help: "Soft checks also sent to a backup owner because the owner had not answered after the hedge delay (within the hedge budget)."})
	m.hedgesWon = prometheus.NewCounter(prometheus.CounterOpts{Name: "fcap_client_hedges_won_total", Help: "Hedged checks the backup owner answered first (their verdicts are marked stale)."})
	m.hedgesCancelled = prometheus.NewCounter(prometheus.CounterOpts{Name: "fcap_client_hedges_cancelled_total", Help: "Hedged checks the owner answered first: the backup's request was wasted."})
	m.hedgeDelay = prometheus.NewGauge(prometheus.GaugeOpts{Name: "fcap_client_hedge_delay_seconds", Help: "The hedge delay last learnt (the 99th percentile of an owner's recent check latencies, bounded)."})
	m.topologyChanges = prometheus.NewCounter(prometheus.CounterOpts{Name: "fcap_client_topology_changes_total", Help: "New topologies installed."})
	m.refreshErrors = prometheus.NewCounter(prometheus.CounterOpts{Name: "fcap_client_topology_refresh_errors_total", Help: "Topology refreshes where no node answered."})
	m.dialErrors = prometheus.NewCounter(prometheus.CounterOpts{Name: "fcap_client_dial_errors_total", Help: "Failed connection attempts."})
	m.recordQueued = prometheus.NewCounter(prometheus.CounterOpts{Name: "fcap_client_records_queued_total", Help: "Impressions accepted by Record."})
	m.recordSent = prometheus.NewCounter(prometheus.CounterOpts{Name: "fcap_client_records_acknowledged_total", Help: "Impressions acknowledged by their owner (recorded, duplicate or stale)."})
	m.recordRetries = prometheus.NewCounter(prometheus.CounterOpts{Name: "fcap_client_record_retries_total", Help: "Impression send attempts retried after a failure."})
	m.recordDropped = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fcap_client_records_dropped_total", Help: "Impressions given up: queue_full, attempts (retries exhausted), invalid (refused as a bad request: by Record itself, which then returns the error, or by the owner), future_time (its time ahead of the owner's clock by more than it accepts), closed."}, []string{"reason"})
	m.resolveMisses = prometheus.NewCounter(prometheus.CounterOpts{Name: "fcap_client_resolve_misses_total", Help: "Device-keyed calls whose device was not in the resolution cache (one more round trip)."})
	m.resolveFailures = prometheus.NewCounter(prometheus.CounterOpts{Name: "fcap_client_resolve_failures_total", Help: "Devices that could not be resolved (their owners unreachable): counted as their own viewer."})
	m.lateGrants = prometheus.NewCounter(prometheus.CounterOpts{Name: "fcap_client_late_grants_total", Help: "Allow and Reserve answers that granted but arrived after the call had given up and decided by policy: slots the cluster counts for ads the caller never showed (a strict grant the node could see would be late is taken back before it answers)."})
	m.undos = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fcap_client_undos_total", Help: "Late strict grants the client tried to give back to their owner, by result: returned (the slot is free again), gone (the owner held nothing to take back: forgotten, or the ring changed), failed (no answer within the attempts), dropped (the give-back queue was full)."}, []string{"result"})
	for _, r := range undoResults {
		m.undos.WithLabelValues(r)
	}
	m.recordQueue = prometheus.NewGauge(prometheus.GaugeOpts{Name: "fcap_client_record_queue", Help: "Impressions queued or in flight."})
	// Every reason exported from the start at 0, so rates and alerts see
	// a series before the first drop.
	for _, reason := range []string{"queue_full", "attempts", "invalid", "closed"} {
		m.recordDropped.WithLabelValues(reason)
	}
	reached := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fcap_client_cluster_reached", Help: "1 once a node has answered the client with the topology, 0 until then: while 0 every call is decided by the failure policy and returns ErrUnavailable (a wrong seed, the node's HTTP port, TLS not set, ...). Alert on it staying 0."}, g.reached)
	active := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fcap_client_active_nodes", Help: "Members of the client's topology that own partitions."}, g.active)
	connected := prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fcap_client_connected_nodes", Help: "Members owning partitions to which the client has a connection up (an fcap node answered on it); below fcap_client_active_nodes, calls for those members' viewers go to backups or fail over."}, g.connected)
	if reg != nil {
		var done []prometheus.Collector
		for _, c := range []prometheus.Collector{reached, active, connected, calls, latency, verdicts, m.notOwnerRefreshes, m.backupReads, m.backupWrites, m.hedgesSent, m.hedgesWon, m.hedgesCancelled, m.hedgeDelay, m.topologyChanges, m.refreshErrors, m.dialErrors,
			m.recordQueued, m.recordSent, m.recordRetries, m.recordDropped, m.recordQueue, m.resolveMisses, m.resolveFailures, m.lateGrants, m.undos} {
			if err := reg.Register(c); err != nil {
				// Leave the registry as it was, so a corrected config can
				// register.
				for _, d := range done {
					reg.Unregister(d)
				}
				return nil, fmt.Errorf("%w: metrics: %w (another client on this Registerer? give each its own Config.MetricsLabels or MetricsNamespace)", ErrBadConfig, err)
			}
			done = append(done, c)
		}
	}
	return m, nil
}

func (m *metrics) observe(op opKind, oc outcome, start time.Time) {
	m.calls[op][oc].Inc()
	m.latency[op].Observe(time.Since(start).Seconds())
}

// late counts an answer that arrived for a call which had already given
// up, when it granted something, and returns what the owner needs to
// take a strict grant back (see giveBack): ok false when there is
// nothing to give back.
func (m *metrics) late(hdr proto.Header, body []byte) (g giveBack, ok bool) {
	var granted bool
	switch hdr.Type {
	case proto.TypeAllowResult:
		var r proto.AllowResult
		granted = proto.Decode(body, &r) == nil && r.Verdict.Allowed
		g.grant = r.Grant
	case proto.TypeReserveResult:
		var r proto.ReserveResult
		granted = proto.Decode(body, &r) == nil && r.Verdict.Allowed
		g.reservation = r.ID
	}
	if granted {
		m.lateGrants.Inc()
	}
	return g, granted && (g.grant != 0 || g.reservation != 0)
}

func (m *metrics) failVerdicts(vs []Verdict) {
	for _, v := range vs {
		if v.FailOpen {
			m.failOpen.Inc()
		} else if v.FailClosed {
			m.failClosed.Inc()
		}
	}
}

package node

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/fcap-io/fcap/internal/buildinfo"
	"github.com/fcap-io/fcap/proto"
	"github.com/fcap-io/fcap/ring"
)

// opKind names a request type in metrics.
type opKind uint8

const (
	opPing opKind = iota
	opTopology
	opCheck
	opAllow
	opRecord
	opReserve
	opRelease
	opReplicate
	opStatus
	opDrain
	opUnknown
	opGossipKey
	opHello
	opDenied
	opVerify
	opIdentity
	opUndo
	numOps
)

var opNames = [numOps]string{"ping", "topology", "check", "allow", "record", "reserve", "release", "replicate", "status", "drain", "unknown", "gossip_key", "hello", "denied", "verify", "identity", "undo"}

// outcome classifies a response in metrics.
type outcome uint8

const (
	outcomeOK outcome = iota
	outcomeBadRequest
	outcomeNotOwner
	outcomeCapacity
	outcomeUnknownReservation
	outcomeError
	outcomeDeadline
	numOutcomes
)

// outcomeApart marks a request answered apart from its connection's
// reader (pending.go), which observes it when it completes.
const outcomeApart = numOutcomes

var outcomeNames = [numOutcomes]string{"ok", "bad_request", "not_owner", "capacity", "unknown_reservation", "error", "deadline_exceeded"}

func outcomeOf(c proto.Code) outcome {
	switch c {
	case proto.CodeBadRequest, proto.CodeUnsupported, proto.CodeFutureTime:
		return outcomeBadRequest
	case proto.CodeNotOwner:
		return outcomeNotOwner
	case proto.CodeCapacity:
		return outcomeCapacity
	case proto.CodeUnknownReservation:
		return outcomeUnknownReservation
	case proto.CodeDeadlineExceeded:
		return outcomeDeadline
	}
	return outcomeError
}

// metrics are the node's collectors, registered on the Registerer its
// Config names. Counters are resolved once, so a request costs an atomic
// add and a histogram observation, not a label lookup.
type metrics struct {
	requests        [numOps][numOutcomes]prometheus.Counter
	latency         [numOps]prometheus.Observer
	conns           prometheus.Gauge
	pendingConns    prometheus.Gauge
	refusedConns    prometheus.Counter
	evictedConns    prometheus.Counter
	handshakeClosed prometheus.Counter
	badFrames       prometheus.Counter
	tlsFailures     prometheus.Counter
	authFailures    prometheus.Counter
	writeErrors     prometheus.Counter
	idleClosed      prometheus.Counter
	notOwner        prometheus.Counter
	backupReads     prometheus.Counter
	// standInWrites counts soft writes taken as a backup owner for an
	// owner the client could not reach (handlers.go standsIn).
	standInWrites prometheus.Counter
	ringChanges   prometheus.Counter

	transfers          prometheus.Counter
	replicatedBytes    prometheus.Counter
	replicationErrors  prometheus.Counter
	replicationRefused prometheus.Counter
	strictFailures     prometheus.Counter
	syncingRefusals    prometheus.Counter
	claimed            prometheus.Counter
	lateRefusals       prometheus.Counter
	strictRevoked      prometheus.Counter
	undos              *prometheus.CounterVec

	time *timeMetrics // times refused and clamped (timetrust.go)
	http *httpMetrics // requests to the HTTP address (httpmetrics.go)
}

func newMetrics(reg prometheus.Registerer, n *Node) (*metrics, error) {
	m := &metrics{}
	if err := buildinfo.Register(reg); err != nil {
		return nil, err
	}
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fcap_node_requests_total",
		Help: "Data-plane requests answered, by operation and outcome. A Check of any number of candidates is one request.",
	}, []string{"op", "outcome"})
	latency := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "fcap_node_request_duration_seconds",
		Help:    "Time to handle one data-plane request on the node (decode, engine, encode), by operation.",
		Buckets: []float64{1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 5e-3},
	}, []string{"op"})
	for op := range numOps {
		m.latency[op] = latency.WithLabelValues(opNames[op])
		for oc := range numOutcomes {
			m.requests[op][oc] = requests.WithLabelValues(opNames[op], outcomeNames[oc])
		}
	}
	m.conns = prometheus.NewGauge(prometheus.GaugeOpts{Name: "fcap_node_connections", Help: "Open data-plane connections holding a place under MaxConns (authenticated or not)."})
	m.pendingConns = prometheus.NewGauge(prometheus.GaugeOpts{Name: "fcap_node_connections_pending", Help: "Data-plane connections that have not authenticated yet (no Hello with tokens, no complete first request without), at most MaxPendingConns."})
	m.evictedConns = prometheus.NewCounter(prometheus.CounterOpts{Name: "fcap_node_connections_evicted_total", Help: "Connections that had not authenticated, closed (told overloaded) to make room for a newer one at MaxPendingConns or MaxConns."})
	m.handshakeClosed = prometheus.NewCounter(prometheus.CounterOpts{Name: "fcap_node_handshake_closed_total", Help: "Connections closed because they did not authenticate within HandshakeTimeout (no Hello with tokens; a first request begun and its header not completed without)."})
	m.refusedConns = prometheus.NewCounter(prometheus.CounterOpts{Name: "fcap_node_connections_refused_total", Help: "Connections closed at accept because of MaxConns or shutdown."})
	m.tlsFailures = prometheus.NewCounter(prometheus.CounterOpts{Name: "fcap_node_tls_handshake_failures_total", Help: "Data-plane connections closed because their TLS handshake failed (plaintext, no or a bad client certificate)."})
	m.authFailures = prometheus.NewCounter(prometheus.CounterOpts{Name: "fcap_node_auth_failures_total", Help: "Requests refused for an unknown token, no token, or a role that may not send them."})
	m.badFrames = prometheus.NewCounter(prometheus.CounterOpts{Name: "fcap_node_bad_frames_total", Help: "Connections closed for a frame length over MaxFrame or under the header size."})
	m.writeErrors = prometheus.NewCounter(prometheus.CounterOpts{Name: "fcap_node_write_errors_total", Help: "Connections closed because a response could not be written (peer gone or not reading)."})
	m.idleClosed = prometheus.NewCounter(prometheus.CounterOpts{Name: "fcap_node_idle_closed_total", Help: "Connections closed because no complete request arrived within IdleTimeout (idle clients and slowloris writers)."})
	m.notOwner = prometheus.NewCounter(prometheus.CounterOpts{Name: "fcap_node_not_owner_total", Help: "Requests and record items refused because this node is not the viewer's owner."})
	m.standInWrites = prometheus.NewCounter(prometheus.CounterOpts{Name: "fcap_node_standin_writes_total", Help: "Soft impressions taken as a backup owner because the client could not reach the owner; replicated to the owner, whose copy merges them in."})
	m.backupReads = prometheus.NewCounter(prometheus.CounterOpts{Name: "fcap_node_backup_reads_total", Help: "Checks answered as a backup owner because the client could not reach the owner (answers marked stale)."})
	m.ringChanges = prometheus.NewCounter(prometheus.CounterOpts{Name: "fcap_ring_changes_total", Help: "Ring changes applied (a new epoch)."})
	m.transfers = prometheus.NewCounter(prometheus.CounterOpts{Name: "fcap_partition_transfers_total", Help: "Whole partitions sent to a new owner (join, drain, re-replication)."})
	m.replicatedBytes = prometheus.NewCounter(prometheus.CounterOpts{Name: "fcap_replication_bytes_total", Help: "Bytes of viewer state sent to peers."})
	m.replicationErrors = prometheus.NewCounter(prometheus.CounterOpts{Name: "fcap_replication_errors_total", Help: "Failed sends to a peer (retried with backoff)."})
	m.replicationRefused = prometheus.NewCounter(prometheus.CounterOpts{Name: "fcap_replication_refused_total", Help: "Viewer states a peer refused because it is their primary (this node's ring was behind)."})
	m.strictFailures = prometheus.NewCounter(prometheus.CounterOpts{Name: "fcap_strict_replication_failures_total", Help: "Strict writes answered with an error because a backup did not acknowledge them in time."})
	m.syncingRefusals = prometheus.NewCounter(prometheus.CounterOpts{Name: "fcap_syncing_refusals_total", Help: "Requests refused because their partition has not arrived yet."})
	m.claimed = prometheus.NewCounter(prometheus.CounterOpts{Name: "fcap_partitions_claimed_total", Help: "Partitions served without their hand-over after SyncTimeout (a sender failed mid-way; counts may miss its last writes)."})
	m.lateRefusals = prometheus.NewCounter(prometheus.CounterOpts{Name: "fcap_deadline_refusals_total", Help: "Requests not started because the budget the client gave them ran out before their turn (they waited behind others)."})
	m.strictRevoked = prometheus.NewCounter(prometheus.CounterOpts{Name: "fcap_strict_revoked_total", Help: "Strict grants (Allow, Reserve) taken back because the backups did not acknowledge them in time or the answer would have reached the client after its deadline."})
	m.undos = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fcap_strict_undos_total", Help: "Undo requests by result: undone (a strict grant whose answer reached the client after it gave up was taken back) or unknown (nothing to take back: already undone, soft, forgotten, or not this node's)."}, []string{"result"})
	for _, c := range []prometheus.Collector{m.lateRefusals, m.strictRevoked, m.undos, m.claimed, requests, latency, m.conns, m.pendingConns, m.refusedConns, m.evictedConns, m.handshakeClosed, m.badFrames, m.tlsFailures, m.authFailures, m.writeErrors, m.idleClosed, m.notOwner, m.backupReads, m.standInWrites, m.ringChanges,
		m.transfers, m.replicatedBytes, m.replicationErrors, m.replicationRefused, m.strictFailures, m.syncingRefusals, &stateCollector{n: n}} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	var err error
	if m.http, err = newHTTPMetrics(reg); err != nil {
		return nil, err
	}
	if m.time, err = newTimeMetrics(reg, n.engine); err != nil {
		return nil, err
	}
	return m, nil
}

func (m *metrics) observe(op opKind, oc outcome, d time.Duration) {
	m.requests[op][oc].Inc()
	m.latency[op].Observe(d.Seconds())
}

// stateCollector reports the engine and ring state at scrape time.
type stateCollector struct{ n *Node }

var (
	descViewers     = prometheus.NewDesc("fcap_engine_viewers", "Viewers held in memory.", nil, nil)
	descKeys        = prometheus.NewDesc("fcap_engine_keys", "Counters held in memory.", nil, nil)
	descBytes       = prometheus.NewDesc("fcap_engine_bytes", "Estimated bytes of counter state.", nil, nil)
	descBytesPerKey = prometheus.NewDesc("fcap_engine_bytes_per_key", "Estimated bytes of state per counter.", nil, nil)
	descLimit       = prometheus.NewDesc("fcap_engine_memory_limit_bytes", "The engine's memory limit (0: none).", nil, nil)
	descOverLimit   = prometheus.NewDesc("fcap_engine_over_memory_limit", "1 while new counters are refused for memory.", nil, nil)
	descRefused     = prometheus.NewDesc("fcap_engine_refused_total", "Requests refused by the memory limit.", nil, nil)
	descImpressions = prometheus.NewDesc("fcap_engine_impressions", "Impressions held (sliding counters' timestamps, fixed and bucketed counters' counts), as of the sweeper's last full pass.", nil, nil)
	descReservLive  = prometheus.NewDesc("fcap_engine_reservations", "Reservations held (not yet confirmed, released or expired), as of the sweeper's last full pass.", nil, nil)
	descMembers     = prometheus.NewDesc("fcap_ring_members", "Ring members by state.", []string{"state"}, nil)
	descOwned       = prometheus.NewDesc("fcap_ring_partitions_owned", "Partitions this node owns, by rank (primary, backup).", []string{"rank"}, nil)
	descReplQueue   = prometheus.NewDesc("fcap_replication_queue", "Changed viewers not yet sent to a replica.", nil, nil)
	descReplLag     = prometheus.NewDesc("fcap_replication_lag_seconds", "Age of the oldest change not yet sent to a replica.", nil, nil)
	descHanding     = prometheus.NewDesc("fcap_partitions_handing_over", "Whole-partition transfers this node is sending.", nil, nil)
	descUnderRepl   = prometheus.NewDesc("fcap_partitions_under_replicated", "Partitions this node is primary of whose other owners do not all hold them yet.", nil, nil)
	descSyncing     = prometheus.NewDesc("fcap_partitions_syncing", "Partitions this node owns but has not received yet; their requests are refused until they arrive.", nil, nil)
	descState       = prometheus.NewDesc("fcap_node_state", "1 for this node's ring state (joining, active, leaving).", []string{"state"}, nil)
	descEpoch       = prometheus.NewDesc("fcap_ring_epoch_info", "1, labelled with the epoch of the ring this node routes by (hex): nodes that disagree for long have split views.", []string{"epoch"}, nil)
)

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descViewers, descKeys, descBytes, descBytesPerKey, descLimit, descOverLimit, descRefused, descImpressions, descReservLive, descMembers, descOwned,
		descReplQueue, descReplLag, descHanding, descUnderRepl, descSyncing, descState, descEpoch} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.n.engine.Stats()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	gauge(descViewers, float64(st.Viewers))
	gauge(descKeys, float64(st.Keys))
	gauge(descImpressions, float64(st.Impressions))
	gauge(descReservLive, float64(st.Reservations))
	gauge(descBytes, float64(st.Bytes))
	perKey := 0.0
	if st.Keys > 0 {
		perKey = float64(st.Bytes) / float64(st.Keys)
	}
	gauge(descBytesPerKey, perKey)
	gauge(descLimit, float64(st.MemoryLimit))
	over := 0.0
	if st.OverLimit {
		over = 1
	}
	gauge(descOverLimit, over)
	ch <- prometheus.MustNewConstMetric(descRefused, prometheus.CounterValue, float64(st.Refused))

	v := c.n.view.Load()
	gauge(descEpoch, 1, fmt.Sprintf("%016x", v.ring.Epoch()))
	states := map[ring.State]int{}
	for _, m := range v.ring.Members() {
		states[m.State]++
	}
	for _, s := range []ring.State{ring.Joining, ring.Active, ring.Leaving} {
		gauge(descMembers, float64(states[s]), s.String())
	}
	var primary, backup int
	if v.in {
		for p := range v.ring.Partitions() {
			switch rank := v.ring.Rank(p, c.n.cfg.Name); {
			case rank == 0:
				primary++
			case rank > 0:
				backup++
			}
		}
	}
	gauge(descOwned, float64(primary), "primary")
	gauge(descOwned, float64(backup), "backup")
	q, lag := c.n.repl.Queued()
	gauge(descReplQueue, float64(q))
	gauge(descReplLag, lag.Seconds())
	gauge(descHanding, float64(c.n.repl.Handing()))
	gauge(descUnderRepl, float64(c.n.repl.UnderReplicated()))
	gauge(descSyncing, float64(c.n.repl.SyncingCount(v.ring)))
	self := c.n.members.Self().State
	for _, s := range []ring.State{ring.Joining, ring.Active, ring.Leaving} {
		v := 0.0
		if s == self {
			v = 1
		}
		gauge(descState, v, s.String())
	}
}

// answered sums the requests counters (for Status; not on the hot path).
func (m *metrics) answered() uint64 {
	var sum float64
	var d dto.Metric
	for op := range numOps {
		for oc := range numOutcomes {
			if m.requests[op][oc].Write(&d) == nil && d.Counter != nil {
				sum += d.Counter.GetValue()
			}
		}
	}
	return uint64(sum)
}

// counterValue reads a counter (for the status page).
func counterValue(c prometheus.Counter) float64 {
	var d dto.Metric
	if c.Write(&d) != nil || d.Counter == nil {
		return 0
	}
	return d.Counter.GetValue()
}

// Package metrics holds a node's collectors: request counts and latency
// by operation and outcome, connection, replication and time-trust
// counters, and the engine and ring state read at scrape time.
package metrics

import (
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fcap-io/fcap/node/buildinfo"
	"github.com/fcap-io/fcap/node/engine"
	"github.com/fcap-io/fcap/proto"
	"github.com/fcap-io/fcap/ring"
)

// Op names a request type in metrics.
type Op uint8

const (
	OpPing Op = iota
	OpTopology
	OpCheck
	OpAllow
	OpRecord
	OpReserve
	OpRelease
	OpReplicate
	OpStatus
	OpDrain
	OpUnknown
	OpGossipKey
	OpHello
	OpDenied
	OpVerify
	OpIdentity
	OpUndo
	OpErase
	OpVoid
	OpForget
	OpRetireRegion
	NumOps
)

var opNames = [NumOps]string{"ping", "topology", "check", "allow", "record", "reserve", "release", "replicate", "status", "drain", "unknown", "gossip_key", "hello", "denied", "verify", "identity", "undo", "erase", "void", "forget", "retire_region"}

// Outcome classifies a response in metrics.
type Outcome uint8

const (
	OutcomeOK Outcome = iota
	OutcomeBadRequest
	OutcomeNotOwner
	OutcomeCapacity
	OutcomeUnknownReservation
	OutcomeError
	OutcomeDeadline
	NumOutcomes
)

// OutcomeApart marks a request answered apart from its connection's
// reader (pending.go), which observes it when it completes.
const OutcomeApart = NumOutcomes

var outcomeNames = [NumOutcomes]string{"ok", "bad_request", "not_owner", "capacity", "unknown_reservation", "error", "deadline_exceeded"}

func OutcomeOf(c proto.Code) Outcome {
	switch c {
	case proto.CodeBadRequest, proto.CodeUnsupported, proto.CodeFutureTime:
		return OutcomeBadRequest
	case proto.CodeNotOwner:
		return OutcomeNotOwner
	case proto.CodeCapacity:
		return OutcomeCapacity
	case proto.CodeUnknownReservation:
		return OutcomeUnknownReservation
	case proto.CodeDeadlineExceeded:
		return OutcomeDeadline
	}
	return OutcomeError
}

// Set is the node's collectors, registered on the Registerer its Config
// names. Counters are resolved once, so a request costs an atomic add and
// a histogram observation, not a label lookup. The counts the node reads
// back (Answered, the status page's) are kept in atomics of its own.
type Set struct {
	requests        [NumOps][NumOutcomes]paddedCount
	Latency         [NumOps]prometheus.Observer
	Conns           prometheus.Gauge
	PendingConns    prometheus.Gauge
	RefusedConns    prometheus.Counter
	EvictedConns    prometheus.Counter
	HandshakeClosed prometheus.Counter
	BadFrames       prometheus.Counter
	TLSFailures     prometheus.Counter
	AuthFailures    prometheus.Counter
	WriteErrors     prometheus.Counter
	IdleClosed      prometheus.Counter
	NotOwner        prometheus.Counter
	BackupReads     *Count
	// StandInWrites counts soft writes taken as a backup owner for an
	// owner the client could not reach (the handler's standsIn).
	StandInWrites prometheus.Counter
	RingChanges   prometheus.Counter

	Transfers          prometheus.Counter
	ReplicatedBytes    prometheus.Counter
	ReplicationErrors  prometheus.Counter
	ReplicationRefused prometheus.Counter
	StrictFailures     *Count
	SyncingRefusals    *Count
	Claimed            prometheus.Counter
	// Anti-entropy (replication.Config.AntiEntropyInterval).
	AntiEntropyRounds   prometheus.Counter
	DifferingPartitions prometheus.Counter
	RepairedViewers     prometheus.Counter
	LateRefusals        prometheus.Counter
	StrictRevoked       prometheus.Counter
	// StrictRefused counts strict writes refused before the engine, by
	// reason: no_quorum (no majority of the member set confirms this
	// node's ring), no_holder (the partition was claimed without any
	// holder's copy).
	StrictRefused *prometheus.CounterVec
	// Reacquired counts the times this node's quorum lapsed while others
	// routed without it, so it took its partitions' current copies again.
	Reacquired prometheus.Counter
	Undos      *prometheus.CounterVec
	Erased     prometheus.Counter
	Voided     *prometheus.CounterVec

	Time *Time // times refused and clamped (time.go)
	HTTP *HTTP // requests to the HTTP address (http.go)

	started time.Time // when New made them: the node's start (Uptime)
	recent  sampler   // the recent serving figures (recent.go)
}

// Count is a counter the node reads back: an atomic, exported to
// Prometheus by a CounterFunc.
type Count struct{ v atomic.Uint64 }

// Inc adds one.
func (c *Count) Inc() { c.v.Add(1) }

// Add adds n.
func (c *Count) Add(n uint64) { c.v.Add(n) }

// Value returns the count.
func (c *Count) Value() uint64 { return c.v.Load() }

// paddedCount is a request count on a cache line of its own: requests of
// different kinds, on different cores, do not contend.
type paddedCount struct {
	atomic.Uint64
	_ [56]byte
}

// Engine is the cap engine as the collectors read it at scrape time
// (*engine.Engine is one).
type Engine interface {
	// Stats is the engine's state: viewers, counters, bytes, the memory
	// limit.
	Stats() engine.Stats
	// HighWater is the engine's "now": the newest time it was given.
	HighWater() int64
}

// New returns the node's collectors, registered on reg; src and eng are
// read at scrape time. routes are the HTTP address's routes (any other
// path counts as "other").
func New(reg prometheus.Registerer, eng Engine, src Source, routes []string) (*Set, error) {
	m := &Set{started: time.Now()}
	if err := buildinfo.Register(reg); err != nil {
		return nil, err
	}
	latency := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "fcap_node_request_duration_seconds",
		Help:    "Time to handle one data-plane request on the node (decode, engine, encode), by operation.",
		Buckets: slices.Clone(latencyBounds[:]),
	}, []string{"op"})
	for op := range NumOps {
		m.Latency[op] = latency.WithLabelValues(opNames[op])
	}
	m.Conns = prometheus.NewGauge(prometheus.GaugeOpts{Name: "fcap_node_connections", Help: "Open data-plane connections holding a place under MaxConns (authenticated or not)."})
	m.PendingConns = prometheus.NewGauge(prometheus.GaugeOpts{Name: "fcap_node_connections_pending", Help: "Data-plane connections that have not authenticated yet (no Hello with tokens, no complete first request without), at most MaxPendingConns."})
	m.EvictedConns = prometheus.NewCounter(prometheus.CounterOpts{Name: "fcap_node_connections_evicted_total", Help: "Connections that had not authenticated, closed (told overloaded) to make room for a newer one at MaxPendingConns or MaxConns."})
	m.HandshakeClosed = prometheus.NewCounter(prometheus.CounterOpts{Name: "fcap_node_handshake_closed_total", Help: "Connections closed because they did not authenticate within HandshakeTimeout (no Hello with tokens; a first request begun and its header not completed without)."})
	m.RefusedConns = prometheus.NewCounter(prometheus.CounterOpts{Name: "fcap_node_connections_refused_total", Help: "Connections closed at accept because of MaxConns or shutdown."})
	m.TLSFailures = prometheus.NewCounter(prometheus.CounterOpts{Name: "fcap_node_tls_handshake_failures_total", Help: "Data-plane connections closed because their TLS handshake failed (plaintext, no or a bad client certificate)."})
	m.AuthFailures = prometheus.NewCounter(prometheus.CounterOpts{Name: "fcap_node_auth_failures_total", Help: "Requests refused for an unknown token, no token, or a role that may not send them."})
	m.BadFrames = prometheus.NewCounter(prometheus.CounterOpts{Name: "fcap_node_bad_frames_total", Help: "Connections closed for a frame length over MaxFrame or under the header size."})
	m.WriteErrors = prometheus.NewCounter(prometheus.CounterOpts{Name: "fcap_node_write_errors_total", Help: "Connections closed because a response could not be written (peer gone or not reading)."})
	m.IdleClosed = prometheus.NewCounter(prometheus.CounterOpts{Name: "fcap_node_idle_closed_total", Help: "Connections closed because no complete request arrived within IdleTimeout (idle clients and slowloris writers)."})
	m.NotOwner = prometheus.NewCounter(prometheus.CounterOpts{Name: "fcap_node_not_owner_total", Help: "Requests and record items refused because this node is not the viewer's owner."})
	m.StandInWrites = prometheus.NewCounter(prometheus.CounterOpts{Name: "fcap_node_standin_writes_total", Help: "Soft impressions taken as a backup owner because the client could not reach the owner; replicated to the owner, whose copy merges them in."})
	m.BackupReads, m.StrictFailures, m.SyncingRefusals = &Count{}, &Count{}, &Count{}
	m.RingChanges = prometheus.NewCounter(prometheus.CounterOpts{Name: "fcap_ring_changes_total", Help: "Ring changes applied (a new epoch)."})
	m.Transfers = prometheus.NewCounter(prometheus.CounterOpts{Name: "fcap_partition_transfers_total", Help: "Whole partitions sent to a new owner (join, drain, re-replication)."})
	m.ReplicatedBytes = prometheus.NewCounter(prometheus.CounterOpts{Name: "fcap_replication_bytes_total", Help: "Bytes of viewer state sent to peers."})
	m.ReplicationErrors = prometheus.NewCounter(prometheus.CounterOpts{Name: "fcap_replication_errors_total", Help: "Failed sends to a peer (retried with backoff)."})
	m.ReplicationRefused = prometheus.NewCounter(prometheus.CounterOpts{Name: "fcap_replication_refused_total", Help: "Viewer states a peer refused because it is their primary (this node's ring was behind)."})
	m.Claimed = prometheus.NewCounter(prometheus.CounterOpts{Name: "fcap_partitions_claimed_total", Help: "Partitions served without their hand-over after SyncTimeout (a sender failed mid-way; counts may miss its last writes)."})
	m.AntiEntropyRounds = prometheus.NewCounter(prometheus.CounterOpts{Name: "fcap_antientropy_rounds_total", Help: "Anti-entropy rounds run: this node compared its copies of the partitions it is primary of with each backup's."})
	m.DifferingPartitions = prometheus.NewCounter(prometheus.CounterOpts{Name: "fcap_antientropy_differing_partitions_total", Help: "Partitions whose copy differed from a backup's when anti-entropy compared them (each time found)."})
	m.RepairedViewers = prometheus.NewCounter(prometheus.CounterOpts{Name: "fcap_antientropy_repaired_viewers_total", Help: "Viewers whose copies differed between this node and a backup, merged both ways by anti-entropy."})
	m.LateRefusals = prometheus.NewCounter(prometheus.CounterOpts{Name: "fcap_deadline_refusals_total", Help: "Requests not started because the budget the client gave them ran out before their turn (they waited behind others)."})
	m.StrictRevoked = prometheus.NewCounter(prometheus.CounterOpts{Name: "fcap_strict_revoked_total", Help: "Strict grants (Allow, Reserve) taken back because the backups did not acknowledge them in time or the answer would have reached the client after its deadline."})
	m.StrictRefused = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fcap_strict_refused_total", Help: "Strict writes (Allow, Reserve, Record items with a strict cap) refused and failed closed before the engine, by reason: no_quorum (this node does not hold a majority of the cluster's member set: a partition, or failed members not forgotten), no_holder (the viewer's partition was claimed without any holder's copy), share_spent (with peer regions: refused by the engine because this region's share of a strict cap is spent while its limit is not; a unit is asked of the peer regions)."}, []string{"reason"})
	for _, r := range []string{"no_quorum", "no_holder", "share_spent"} {
		m.StrictRefused.WithLabelValues(r)
	}
	m.Reacquired = prometheus.NewCounter(prometheus.CounterOpts{Name: "fcap_quorum_reacquired_total", Help: "Times this node's strict majority lapsed while other members routed without it (a partition, a pause): it took its partitions' current copies from their owners again before granting strict writes."})
	m.Undos = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fcap_strict_undos_total", Help: "Undo requests by result: undone (a strict grant whose answer reached the client after it gave up was taken back) or unknown (nothing to take back: already undone, soft, forgotten, or not this node's)."}, []string{"result"})
	m.Erased = prometheus.NewCounter(prometheus.CounterOpts{Name: "fcap_erased_viewers_total", Help: "Viewers erased (privacy requests) on this node as their owner, acknowledged by every backup."})
	m.Voided = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fcap_voided_impressions_total", Help: "Impressions voided (invalid-traffic refunds) on this node as their owner, by whether it had counted them (counted=false: an id it never recorded, now barred from counting); a repeated Void is not counted again."}, []string{"counted"})
	for _, c := range []prometheus.Collector{m.LateRefusals, m.StrictRevoked, m.StrictRefused, m.Reacquired, m.Undos, m.Erased, m.Voided, m.Claimed, requestsCollector{m}, latency, m.Conns, m.PendingConns, m.RefusedConns, m.EvictedConns, m.HandshakeClosed, m.BadFrames, m.TLSFailures, m.AuthFailures, m.WriteErrors, m.IdleClosed, m.NotOwner, m.StandInWrites, m.RingChanges,
		m.Transfers, m.ReplicatedBytes, m.ReplicationErrors, m.ReplicationRefused, m.AntiEntropyRounds, m.DifferingPartitions, m.RepairedViewers, &stateCollector{src: src, eng: eng},
		countFunc(m.BackupReads, "fcap_node_backup_reads_total", "Checks answered as a backup owner because the client could not reach the owner (answers marked stale)."),
		countFunc(m.StrictFailures, "fcap_strict_replication_failures_total", "Strict writes answered with an error because a backup did not acknowledge them in time."),
		countFunc(m.SyncingRefusals, "fcap_syncing_refusals_total", "Requests refused because their partition has not arrived yet.")} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	var err error
	if m.HTTP, err = newHTTP(reg, routes); err != nil {
		return nil, err
	}
	if m.Time, err = newTime(reg, eng); err != nil {
		return nil, err
	}
	return m, nil
}

// Observe counts one request answered, and its latency.
func (m *Set) Observe(op Op, oc Outcome, d time.Duration) {
	m.requests[op][oc].Add(1)
	m.Latency[op].Observe(d.Seconds())
}

// Source is the node state the collectors read at scrape time.
type Source interface {
	// Name is the node's member name.
	Name() string
	// View is the ring the node routes by, and whether it is a member.
	View() (r *ring.Ring, member bool)
	// SelfState is the node's own state in gossip.
	SelfState() ring.State
	// Replication describes replication's backlog.
	Replication() Replication
	// Authority describes whether the node may grant strict writes.
	Authority() Authority
}

// Authority is the node's standing for strict writes as the metrics
// report it (node/quorum, node/gossip's failed members).
type Authority struct {
	Holds     bool // a majority of the member set confirmed this node's ring within the lease
	Members   int  // the member set: ring members plus failed ones
	Confirmed int  // members (itself included) that confirmed this node's ring within the lease
	Failed    int  // members that vanished without leaving and were not forgotten
	Claimed   int  // partitions claimed without any holder's copy (strict caps refused on them)
}

// Replication is replication's backlog as the metrics report it.
type Replication struct {
	Queue           int           // changed viewers not yet sent
	Lag             time.Duration // age of the oldest of them
	Handing         int           // whole-partition transfers being sent
	UnderReplicated int           // partitions this node is primary of not held by every owner
	Syncing         int           // partitions this node owns but does not hold
}

// stateCollector reports the engine and ring state at scrape time.
type stateCollector struct {
	src Source
	eng Engine
}

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
	descAuthority   = prometheus.NewDesc("fcap_strict_authority", "1 while this node holds a majority of the cluster's member set (its ring confirmed by a majority within the lease) and may grant strict writes; 0 while strict caps fail closed on it.", nil, nil)
	descMemberSet   = prometheus.NewDesc("fcap_quorum_members", "The member set a strict majority is counted against: ring members plus failed members not yet forgotten.", nil, nil)
	descConfirmed   = prometheus.NewDesc("fcap_quorum_confirmed", "Members (this node included) that confirmed this node's ring within the lease.", nil, nil)
	descFailed      = prometheus.NewDesc("fcap_members_failed", "Members that vanished without leaving (killed, cut off, paused) and were not forgotten (fcapctl forget).", nil, nil)
	descClaimed     = prometheus.NewDesc("fcap_partitions_claimed", "Partitions this node claimed without any holder's copy: soft caps only, strict caps fail closed on them until a holder's copy arrives or an operator forgets the missing members.", nil, nil)
	descEpoch       = prometheus.NewDesc("fcap_ring_epoch_info", "1, labelled with the epoch of the ring this node routes by (hex): nodes that disagree for long have split views.", []string{"epoch"}, nil)
)

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descViewers, descKeys, descBytes, descBytesPerKey, descLimit, descOverLimit, descRefused, descImpressions, descReservLive, descMembers, descOwned,
		descReplQueue, descReplLag, descHanding, descUnderRepl, descSyncing, descState, descEpoch,
		descAuthority, descMemberSet, descConfirmed, descFailed, descClaimed} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.eng.Stats()
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

	r, in := c.src.View()
	gauge(descEpoch, 1, fmt.Sprintf("%016x", r.Epoch()))
	states := map[ring.State]int{}
	for _, m := range r.Members() {
		states[m.State]++
	}
	for _, s := range []ring.State{ring.Joining, ring.Active, ring.Leaving} {
		gauge(descMembers, float64(states[s]), s.String())
	}
	var primary, backup int
	if in {
		name := c.src.Name()
		for p := range r.Partitions() {
			switch rank := r.Rank(p, name); {
			case rank == 0:
				primary++
			case rank > 0:
				backup++
			}
		}
	}
	gauge(descOwned, float64(primary), "primary")
	gauge(descOwned, float64(backup), "backup")
	rs := c.src.Replication()
	gauge(descReplQueue, float64(rs.Queue))
	gauge(descReplLag, rs.Lag.Seconds())
	gauge(descHanding, float64(rs.Handing))
	gauge(descUnderRepl, float64(rs.UnderReplicated))
	gauge(descSyncing, float64(rs.Syncing))
	au := c.src.Authority()
	holds := 0.0
	if au.Holds {
		holds = 1
	}
	gauge(descAuthority, holds)
	gauge(descMemberSet, float64(au.Members))
	gauge(descConfirmed, float64(au.Confirmed))
	gauge(descFailed, float64(au.Failed))
	gauge(descClaimed, float64(au.Claimed))
	self := c.src.SelfState()
	for _, s := range []ring.State{ring.Joining, ring.Active, ring.Leaving} {
		v := 0.0
		if s == self {
			v = 1
		}
		gauge(descState, v, s.String())
	}
}

// Answered counts the requests answered (for Status).
func (m *Set) Answered() uint64 {
	var sum uint64
	for op := range NumOps {
		for oc := range NumOutcomes {
			sum += m.requests[op][oc].Load()
		}
	}
	return sum
}

// requestsCollector exports the request counts.
type requestsCollector struct{ m *Set }

var descRequests = prometheus.NewDesc("fcap_node_requests_total", "Data-plane requests answered, by operation and outcome. A Check of any number of candidates is one request.", []string{"op", "outcome"}, nil)

func (c requestsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descRequests }

func (c requestsCollector) Collect(ch chan<- prometheus.Metric) {
	for op := range NumOps {
		for oc := range NumOutcomes {
			ch <- prometheus.MustNewConstMetric(descRequests, prometheus.CounterValue, float64(c.m.requests[op][oc].Load()), opNames[op], outcomeNames[oc])
		}
	}
}

// countFunc exports a Count.
func countFunc(c *Count, name, help string) prometheus.Collector {
	return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(c.Value()) })
}

package node

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

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
	opUnknown
	numOps
)

var opNames = [numOps]string{"ping", "topology", "check", "allow", "record", "reserve", "release", "unknown"}

// outcome classifies a response in metrics.
type outcome uint8

const (
	outcomeOK outcome = iota
	outcomeBadRequest
	outcomeNotOwner
	outcomeCapacity
	outcomeUnknownReservation
	outcomeError
	numOutcomes
)

var outcomeNames = [numOutcomes]string{"ok", "bad_request", "not_owner", "capacity", "unknown_reservation", "error"}

func outcomeOf(c proto.Code) outcome {
	switch c {
	case proto.CodeBadRequest, proto.CodeUnsupported:
		return outcomeBadRequest
	case proto.CodeNotOwner:
		return outcomeNotOwner
	case proto.CodeCapacity:
		return outcomeCapacity
	case proto.CodeUnknownReservation:
		return outcomeUnknownReservation
	}
	return outcomeError
}

// metrics are the node's collectors, registered on the Registerer its
// Config names. Counters are resolved once, so a request costs an atomic
// add and a histogram observation, not a label lookup.
type metrics struct {
	requests     [numOps][numOutcomes]prometheus.Counter
	latency      [numOps]prometheus.Observer
	conns        prometheus.Gauge
	refusedConns prometheus.Counter
	badFrames    prometheus.Counter
	writeErrors  prometheus.Counter
	notOwner     prometheus.Counter
	backupReads  prometheus.Counter
	ringChanges  prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, n *Node) (*metrics, error) {
	m := &metrics{}
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
	m.conns = prometheus.NewGauge(prometheus.GaugeOpts{Name: "fcap_node_connections", Help: "Open data-plane connections."})
	m.refusedConns = prometheus.NewCounter(prometheus.CounterOpts{Name: "fcap_node_connections_refused_total", Help: "Connections closed at accept because of MaxConns or shutdown."})
	m.badFrames = prometheus.NewCounter(prometheus.CounterOpts{Name: "fcap_node_bad_frames_total", Help: "Connections closed for a frame length over MaxFrame or under the header size."})
	m.writeErrors = prometheus.NewCounter(prometheus.CounterOpts{Name: "fcap_node_write_errors_total", Help: "Connections closed because a response could not be written (peer gone or not reading)."})
	m.notOwner = prometheus.NewCounter(prometheus.CounterOpts{Name: "fcap_node_not_owner_total", Help: "Requests and record items refused because this node is not the viewer's owner."})
	m.backupReads = prometheus.NewCounter(prometheus.CounterOpts{Name: "fcap_node_backup_reads_total", Help: "Checks answered as a backup owner because the client could not reach the owner (answers marked stale)."})
	m.ringChanges = prometheus.NewCounter(prometheus.CounterOpts{Name: "fcap_ring_changes_total", Help: "New ring snapshots swapped in."})
	for _, c := range []prometheus.Collector{requests, latency, m.conns, m.refusedConns, m.badFrames, m.writeErrors, m.notOwner, m.backupReads, m.ringChanges, &stateCollector{n: n}} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
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
	descMembers     = prometheus.NewDesc("fcap_ring_members", "Ring members by state.", []string{"state"}, nil)
	descOwned       = prometheus.NewDesc("fcap_ring_partitions_owned", "Partitions this node owns, by rank (primary, backup).", []string{"rank"}, nil)
)

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descViewers, descKeys, descBytes, descBytesPerKey, descLimit, descOverLimit, descRefused, descMembers, descOwned} {
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
}

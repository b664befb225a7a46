package ingest

import (
	"fmt"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fcap-io/fcap"
)

// metrics are the ingester's collectors, registered on Config.Registerer.
type metrics struct {
	records     *prometheus.CounterVec // by topic
	impressions *prometheus.CounterVec // by result: recorded, duplicate, stale
	bad         *prometheus.CounterVec // by reason
	deadLetters *prometheus.CounterVec // by result: produced, failed
	commits     *prometheus.CounterVec // by result: ok, failed
	lag         *prometheus.GaugeVec   // by topic, partition
	inFlight    prometheus.Gauge
	batch       prometheus.Histogram
	delay       prometheus.Histogram
	fetchErrors prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		records: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fcap_ingest_records_total",
			Help: "Kafka records consumed and accounted for (their impressions acknowledged, or the record dead-lettered), by topic."}, []string{"topic"}),
		impressions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fcap_ingest_impressions_total",
			Help: "Impressions acknowledged by the cluster, by result: recorded, duplicate (a replay: counted once), stale (older than its longest window)."}, []string{"result"}),
		bad: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fcap_ingest_bad_records_total",
			Help: "Records that could not be recorded, by reason: undecodable, invalid, future_time. They never stop their partition."}, []string{"reason"}),
		deadLetters: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fcap_ingest_dead_letters_total",
			Help: "Dead letters produced (produced), or attempts that failed and were retried (failed)."}, []string{"result"}),
		commits: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fcap_ingest_commits_total",
			Help: "Offset commits, by result: ok, failed."}, []string{"result"}),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "fcap_ingest_lag_records",
			Help: "Per partition this ingester owns: the high watermark minus the committed offset (records not yet accounted for)."}, []string{"topic", "partition"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{Name: "fcap_ingest_in_flight_records",
			Help: "Records polled and not yet accounted for (at most poll records plus workers times batch records)."}),
		batch: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "fcap_ingest_batch_seconds",
			Help:    "Time to get a batch's impressions acknowledged by the cluster.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16)}),
		delay: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "fcap_ingest_delay_seconds",
			Help:    "From a record's Kafka timestamp (its produce time) to the acknowledgement of its impressions.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 18)}),
		fetchErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "fcap_ingest_fetch_errors_total",
			Help: "Errors polling Kafka (the client retries them)."}),
	}
	for _, r := range []string{"recorded", "duplicate", "stale"} {
		m.impressions.WithLabelValues(r)
	}
	for _, r := range reasons {
		m.bad.WithLabelValues(r)
	}
	for _, r := range []string{"produced", "failed"} {
		m.deadLetters.WithLabelValues(r)
	}
	for _, r := range []string{"ok", "failed"} {
		m.commits.WithLabelValues(r)
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.records, m.impressions, m.bad, m.deadLetters, m.commits, m.lag, m.inFlight, m.batch, m.delay, m.fetchErrors} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("ingest metrics: %w", err)
		}
	}
	return m, nil
}

func (m *metrics) status(s fcap.RecordStatus) prometheus.Counter {
	return m.impressions.WithLabelValues(s.String())
}

func partLabel(p int32) string { return strconv.FormatInt(int64(p), 10) }

package region

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the links' collectors, labelled by peer region.
type metrics struct {
	shipped, overflow, received *prometheus.CounterVec
	differing, digests          *prometheus.CounterVec
}

// linkMetrics are one link's counters.
type linkMetrics struct {
	shipped, overflow prometheus.Counter
	differing         prometheus.Counter
	digests           map[string]prometheus.Counter // by outcome
}

func newMetrics(reg prometheus.Registerer, links []*Link) (*metrics, error) {
	m := &metrics{
		shipped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fcap_region_shipped_viewers_total",
			Help: "Viewer states a peer region's owners acknowledged merging, by peer region."}, []string{"region"}),
		overflow: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fcap_region_overflow_total",
			Help: "Changes not queued for a peer region because its queue was full; each starts (or repeats) a digest catch-up of the partitions this node is primary of."}, []string{"region"}),
		received: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fcap_region_received_viewers_total",
			Help: "Viewer states merged from another region's nodes, by sending region."}, []string{"region"}),
	}
	m.differing = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fcap_region_catchup_differing_viewers_total",
		Help: "Viewers a digest catch-up found differing from (or missing in) the peer region's lane of this region, and queued again, by peer region."}, []string{"region"})
	m.digests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fcap_region_digest_rounds_total",
		Help: "Partitions a digest catch-up compared with a peer region, by peer region and outcome: agreed, differed, reshipped (not comparable: queued whole), skipped (not comparable, periodic), failed (peer not reached)."}, []string{"region", "outcome"})
	cs := []prometheus.Collector{m.shipped, m.overflow, m.received, m.differing, m.digests}
	for _, l := range links {
		labels := prometheus.Labels{"region": l.peer.Name}
		cs = append(cs,
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fcap_region_link_up", ConstLabels: labels,
				Help: "1 when the last shipping round or topology refresh reached the peer region, else 0."},
				func() float64 {
					if l.up.Load() {
						return 1
					}
					return 0
				}),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fcap_region_retired_since_seconds", ConstLabels: labels,
				Help: "When an operator retired the peer region (fcapctl region retire), Unix seconds by the node's clock; 0: not retired. A retired region's link no longer runs."},
				func() float64 {
					if !l.retired.Load() {
						return 0
					}
					return float64(l.retiredAt.Load()) / 1000
				}),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fcap_region_queue_viewers", ConstLabels: labels,
				Help: "Changed viewers waiting to be shipped to the peer region."},
				func() float64 { return float64(l.q.len()) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fcap_region_lag_seconds", ConstLabels: labels,
				Help: "Age of the oldest change not yet acknowledged by the peer region (0: none waits)."},
				func() float64 { return l.lag().Seconds() }),
		)
	}
	if reg != nil {
		for _, c := range cs {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

func (m *metrics) of(region string) linkMetrics {
	lm := linkMetrics{shipped: m.shipped.WithLabelValues(region), overflow: m.overflow.WithLabelValues(region),
		differing: m.differing.WithLabelValues(region), digests: map[string]prometheus.Counter{}}
	for _, o := range []string{outcomeAgreed, outcomeDiffered, outcomeReshipped, outcomeSkipped, outcomeFailed} {
		lm.digests[o] = m.digests.WithLabelValues(region, o)
	}
	return lm
}

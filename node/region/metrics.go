package region

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the links' collectors, labelled by peer region.
type metrics struct {
	shipped, overflow, received *prometheus.CounterVec
}

// linkMetrics are one link's counters.
type linkMetrics struct {
	shipped, overflow prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, links []*Link) (*metrics, error) {
	m := &metrics{
		shipped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fcap_region_shipped_viewers_total",
			Help: "Viewer states a peer region's owners acknowledged merging, by peer region."}, []string{"region"}),
		overflow: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fcap_region_overflow_total",
			Help: "Changes not queued for a peer region because its queue was full; each starts (or repeats) a catch-up that re-ships every viewer of the partitions this node is primary of."}, []string{"region"}),
		received: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fcap_region_received_viewers_total",
			Help: "Viewer states merged from another region's nodes, by sending region."}, []string{"region"}),
	}
	cs := []prometheus.Collector{m.shipped, m.overflow, m.received}
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
	return linkMetrics{shipped: m.shipped.WithLabelValues(region), overflow: m.overflow.WithLabelValues(region)}
}

package node

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/node/engine"
)

// Time trust (SECURITY.md, "Time").
//
// The node's clock (Config.Clock) is the authority on what "now" is. The
// engine runs on it: a caller's time more than Config.MaxClockSkew ahead
// of it is refused (fcap.ErrFutureTime, proto.CodeFutureTime) and the
// engine's high-water mark, by which it ages, sweeps and judges an
// impression stale, never passes it. Times that arrive without a caller
// (a peer's Replicate, a log record, a snapshot) carry a high-water mark
// of their sender; one beyond the bound is clamped to this node's clock
// and counted here, so a peer running ahead, or a log written before this
// bound existed, shows on /metrics instead of silently ageing state.

// timeSource is where a high-water mark the node did not choose came from.
type timeSource uint8

const (
	fromReplication timeSource = iota // a peer's Replicate
	fromLog                           // a log record replayed at start
	fromSnapshot                      // a snapshot loaded at start
	numTimeSources
)

var timeSourceNames = [numTimeSources]string{"replication", "log", "snapshot"}

// timeMetrics count the times the node would not take as given.
type timeMetrics struct {
	refused [numOps]prometheus.Counter
	clamped [numTimeSources]prometheus.Counter
}

func newTimeMetrics(reg prometheus.Registerer, eng *engine.Engine) (*timeMetrics, error) {
	m := &timeMetrics{}
	refused := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fcap_time_refused_total",
		Help: "Requests (and record items) refused because their time was more than MaxClockSkew ahead of the node's clock, by operation. Nothing they asked was done.",
	}, []string{"op"})
	clamped := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fcap_time_clamped_total",
		Help: "High-water marks more than MaxClockSkew ahead of the node's clock, from a peer's replication, the log or a snapshot, clamped to the node's clock, by source.",
	}, []string{"source"})
	for op := range numOps {
		m.refused[op] = refused.WithLabelValues(opNames[op])
	}
	for src := range numTimeSources {
		m.clamped[src] = clamped.WithLabelValues(timeSourceNames[src])
	}
	highWater := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "fcap_engine_high_water_seconds",
		Help: "The engine's \"now\" (Unix seconds): the newest time it was given, never past the node's clock. Far behind time(): the node is idle; ahead of it: a bug, alert.",
	}, func() float64 { return float64(eng.HighWater()) / 1000 })
	for _, c := range []prometheus.Collector{refused, clamped, highWater} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// refusedTime counts err if it refused a time ahead of the clock.
func (m *timeMetrics) refusedTime(op opKind, err error) {
	if errors.Is(err, fcap.ErrFutureTime) {
		m.refused[op].Inc()
	}
}

// observe advances eng's high-water mark to a time from src, clamped to
// the engine's clock, and counts a clamp beyond the skew. m may be nil
// (a replay that counts nothing).
func (m *timeMetrics) observe(eng *engine.Engine, src timeSource, t int64) {
	if eng.Observe(t) && m != nil {
		m.clamped[src].Inc()
	}
}

package metrics

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/proto"
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

// TimeSource is where a high-water mark the node did not choose came from.
type TimeSource uint8

const (
	FromReplication TimeSource = iota // a peer's Replicate
	FromLog                           // a log record replayed at start
	FromSnapshot                      // a snapshot loaded at start
	numTimeSources
)

var timeSourceNames = [numTimeSources]string{"replication", "log", "snapshot"}

// Time count the times the node would not take as given.
type Time struct {
	refused [NumOps]prometheus.Counter
	clamped [numTimeSources]prometheus.Counter
}

func newTime(reg prometheus.Registerer, eng Engine) (*Time, error) {
	m := &Time{}
	refused := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fcap_time_refused_total",
		Help: "Requests (and record items) refused because their time was more than MaxClockSkew ahead of the node's clock, by operation. Nothing they asked was done.",
	}, []string{"op"})
	clamped := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fcap_time_clamped_total",
		Help: "High-water marks more than MaxClockSkew ahead of the node's clock, from a peer's replication, the log or a snapshot, clamped to the node's clock, by source.",
	}, []string{"source"})
	for op := range NumOps {
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

// RefusedTime counts err if it refused a time ahead of the clock. A
// peer's refusal passed on (a *proto.Error, which is an
// fcap.ErrFutureTime too) was counted by the peer, not here.
func (m *Time) RefusedTime(op Op, err error) {
	var pe *proto.Error
	if errors.Is(err, fcap.ErrFutureTime) && !errors.As(err, &pe) {
		m.refused[op].Inc()
	}
}

// Refused counts a time ahead of the clock refused before it reached the
// engine (the JSON API refuses one at the edge).
func (m *Time) Refused(op Op) { m.refused[op].Inc() }

// Observer is the engine as Time.Observe moves it (*engine.Engine is
// one): Observe advances its high-water mark to t, clamped to its clock,
// and reports whether t was clamped for being beyond the skew.
type Observer interface {
	Observe(t int64) bool
}

// Observe advances eng's high-water mark to a time from src, clamped to
// the engine's clock, and counts a clamp beyond the skew. m may be nil
// (a replay that counts nothing).
func (m *Time) Observe(eng Observer, src TimeSource, t int64) {
	if eng.Observe(t) && m != nil {
		m.clamped[src].Inc()
	}
}

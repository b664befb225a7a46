package engine_test

import (
	"errors"
	"sync/atomic"
	"testing"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/node/engine"
)

const (
	t0        = int64(1_800_000_000_000) // a Unix millisecond in 2027
	skew      = int64(60_000)
	tenYears  = int64(10 * 365 * 24 * 3600 * 1000)
	dayMillis = int64(24 * 3600 * 1000)
)

// clockedEngine returns an engine on a test clock set to t0 that accepts
// times up to skew ahead of it.
func clockedEngine(t *testing.T) (*engine.Engine, *atomic.Int64) {
	t.Helper()
	clock := new(atomic.Int64)
	clock.Store(t0)
	return newEngine(t, func(c *engine.Config) {
		c.Clock = clock.Load
		c.MaxFuture = skew
	}), clock
}

// TestFutureTimeIsRefusedAndChangesNothing: every operation that takes a
// time refuses one more than MaxFuture ahead of the clock, with
// ErrFutureTime (an ErrInvalid), and changes nothing: no counter, no
// high-water mark. One exactly MaxFuture ahead is accepted.
func TestFutureTimeIsRefusedAndChangesNothing(t *testing.T) {
	c := campaign("c", 3, dayMillis)
	ops := map[string]func(e *engine.Engine, at int64) error{
		"allow": func(e *engine.Engine, at int64) error { _, err := e.Allow("v", at, c); return err },
		"check": func(e *engine.Engine, at int64) error {
			_, err := e.Check("v", []fcap.Candidate{{Caps: []fcap.Cap{c}}}, at, nil)
			return err
		},
		"reserve": func(e *engine.Engine, at int64) error {
			_, _, err := e.Reserve("v", fcap.Candidate{Caps: []fcap.Cap{c}}, at, 1000)
			return err
		},
		"record": func(e *engine.Engine, at int64) error {
			_, err := e.Record("v", fcap.Impression{ID: "i", Time: at, Caps: []fcap.Cap{c}})
			return err
		},
		"link device":   func(e *engine.Engine, at int64) error { _, err := e.LinkDevice("d", "v", at, nil); return err },
		"unlink device": func(e *engine.Engine, at int64) error { _, err := e.UnlinkDevice("d", at); return err },
		"add device": func(e *engine.Engine, at int64) error {
			_, err := e.AddDevice("v", "d", at, nil, 8)
			return err
		},
		"remove device": func(e *engine.Engine, at int64) error { return e.RemoveDevice("v", "d", at) },
	}
	for name, op := range ops {
		t.Run(name, func(t *testing.T) {
			e, _ := clockedEngine(t)
			for _, at := range []int64{t0 + skew + 1, t0 + tenYears, fcap.MaxTime} {
				err := op(e, at)
				if !errors.Is(err, fcap.ErrFutureTime) || !errors.Is(err, fcap.ErrInvalid) {
					t.Fatalf("at clock+%d: err = %v, want fcap.ErrFutureTime wrapping fcap.ErrInvalid", at-t0, err)
				}
			}
			if st := e.Stats(); st.HighWater != -1 || st.Viewers != 0 {
				t.Fatalf("refused times changed the engine: high water %d, %d viewers", st.HighWater, st.Viewers)
			}
			if err := op(e, t0+skew); err != nil {
				t.Fatalf("a time exactly MaxFuture ahead was refused: %v", err)
			}
			if hw := e.HighWater(); hw != t0 {
				t.Fatalf("high water %d after a time %d ahead, want the clock %d", hw, skew, t0)
			}
		})
	}
}

// TestHighWaterNeverPassesTheClock: a time accepted within the skew
// counts from when it says but does not age the engine: a real-time
// impression after it is not stale, even with a window shorter than the
// skew, and a capped viewer stays capped.
func TestHighWaterNeverPassesTheClock(t *testing.T) {
	e, clock := clockedEngine(t)
	short := campaign("short", 1, 1000) // a window shorter than the skew
	day := campaign("day", 1, dayMillis)
	mustAllow(t, e, "capped", t0, true, day)
	checkOne(t, e, "other", t0+skew, short) // a caller 59 s ahead
	if hw := e.HighWater(); hw != t0 {
		t.Fatalf("high water %d, want the clock %d", hw, t0)
	}
	mustRecord(t, e, "v", fcap.Impression{ID: "real-time", Time: t0, Caps: []fcap.Cap{short}}, fcap.Recorded)
	e.Sweep(1 << 30)
	mustAllow(t, e, "capped", t0+1, false, day)
	clock.Store(t0 + dayMillis)
	mustAllow(t, e, "capped", t0+dayMillis, true, day) // the window passed by the clock: room again
}

// TestObserveClampsToTheClock: a replica's or log's high-water mark
// never moves the engine past its clock; one beyond the skew is reported
// so the node counts it, and capped viewers stay capped after a sweep.
func TestObserveClampsToTheClock(t *testing.T) {
	e, clock := clockedEngine(t)
	day := campaign("day", 2, dayMillis)
	mustAllow(t, e, "capped", t0, true, day)
	mustAllow(t, e, "capped", t0, true, day)
	cases := []struct {
		name    string
		at      int64
		clamped bool
	}{
		{"behind the clock", t0 - 5, false},
		{"within the skew", t0 + skew, false},
		{"past the skew", t0 + skew + 1, true},
		{"ten years ahead", t0 + tenYears, true},
		{"fcap.MaxTime", fcap.MaxTime, true},
		{"out of range", -1, false},
	}
	for _, c := range cases {
		if got := e.Observe(c.at); got != c.clamped {
			t.Errorf("%s: Observe = %v, want %v", c.name, got, c.clamped)
		}
		if hw := e.HighWater(); hw != t0 {
			t.Fatalf("%s: high water %d, want the clock %d", c.name, hw, t0)
		}
	}
	e.Sweep(1 << 30)
	mustAllow(t, e, "capped", t0+1, false, day)
	mustRecord(t, e, "capped", fcap.Impression{ID: "real-time", Time: t0 + 2, Caps: []fcap.Cap{day}}, fcap.Recorded)
	clock.Store(t0 + 1000)
	if e.Observe(t0+500) || e.HighWater() != t0+500 {
		t.Fatalf("an in-bound Observe after the clock moved: high water %d, want %d", e.HighWater(), t0+500)
	}
}

// TestExportUntilCoversTimesAheadOfTheClock: a log record of a viewer
// with an impression accepted ahead of the clock is kept until that
// impression ages out, not only until the clock's time plus the window.
func TestExportUntilCoversTimesAheadOfTheClock(t *testing.T) {
	e, _ := clockedEngine(t)
	c := campaign("c", 5, 1000)
	mustAllow(t, e, "v", t0+skew, true, c)
	_, until := e.ExportUntil(fcap.ViewerKey("v"), nil)
	if until < t0+skew+1000 {
		t.Fatalf("ExportUntil = %d, before the impression at %d ages out of its window (%d)", until, t0+skew, t0+skew+1000)
	}
}

// TestNoClockTakesTimesAsGiven: without a clock (tests, replays) every
// time in range is accepted and the high-water mark is the newest.
func TestNoClockTakesTimesAsGiven(t *testing.T) {
	e := newEngine(t)
	mustAllow(t, e, "v", t0+tenYears, true, campaign("c", 1, 10))
	if hw := e.HighWater(); hw != t0+tenYears {
		t.Fatalf("high water %d, want %d", hw, t0+tenYears)
	}
	if e.Observe(fcap.MaxTime) {
		t.Fatal("Observe reported a clamp without a clock")
	}
}

func TestMaxFutureIsValidated(t *testing.T) {
	cfg := engine.DefaultLocalConfig()
	cfg.MaxFuture = -1
	if _, err := engine.New(cfg); err == nil {
		t.Fatal("a negative MaxFuture was accepted")
	}
}

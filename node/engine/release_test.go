package engine_test

import (
	"errors"
	"testing"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/node/engine"
)

// TestReleaseOfAnExpiredReservation: a reservation past its ttl no longer
// counts, so releasing it is ErrUnknownReservation even before the
// sweeper has dropped it (it answered OK, and the JSON API 200, before).
func TestReleaseOfAnExpiredReservation(t *testing.T) {
	cand := fcap.Candidate{Caps: []fcap.Cap{campaign("r", 5, 1000)}}
	t.Run("high-water mark", func(t *testing.T) {
		e := newEngine(t)
		_, id, err := e.Reserve("v", cand, 100, 10)
		if err != nil || id == 0 {
			t.Fatalf("Reserve = %d, %v", id, err)
		}
		if _, err := e.Check("other", []fcap.Candidate{cand}, 110, nil); err != nil { // time moves on
			t.Fatal(err)
		}
		if err := e.Release("v", id); !errors.Is(err, fcap.ErrUnknownReservation) {
			t.Fatalf("Release at its expiry = %v, want ErrUnknownReservation", err)
		}
	})
	t.Run("clock", func(t *testing.T) {
		now := int64(100)
		e := newEngine(t, func(c *engine.Config) { c.Clock = func() int64 { return now } })
		_, live, err := e.Reserve("v", cand, 100, 10)
		if err != nil {
			t.Fatal(err)
		}
		_, expired, err := e.Reserve("v", cand, 100, 10)
		if err != nil {
			t.Fatal(err)
		}
		now = 109
		if err := e.Release("v", live); err != nil {
			t.Fatalf("Release of a live reservation = %v", err)
		}
		now = 110
		if err := e.Release("v", expired); !errors.Is(err, fcap.ErrUnknownReservation) {
			t.Fatalf("Release once the clock passed its expiry = %v, want ErrUnknownReservation", err)
		}
	})
}

package engine

import (
	"fmt"
	"math"
	"testing"
	"time"
	"unsafe"

	"github.com/fcap-io/fcap"
)

// TestSeenIDIsTwelveBytes: the layout is the point of seenID.
func TestSeenIDIsTwelveBytes(t *testing.T) {
	if n := unsafe.Sizeof(seenID{}); n != 12 || seenEntryBytes != 12 {
		t.Fatalf("seenID is %d bytes, accounted as %d; want 12", n, seenEntryBytes)
	}
}

// TestSeenIDKeepsTheHashAndRoundsTheHorizonUp: the whole 64-bit hash comes
// back, and an id is never forgotten before its horizon.
func TestSeenIDKeepsTheHashAndRoundsTheHorizonUp(t *testing.T) {
	for _, tc := range []struct {
		millis int64
		want   int64 // untilMillis
	}{
		{1_700_000_000_000, 1_700_000_000_000},
		{1_700_000_000_001, 1_700_000_001_000},
		{1_700_000_000_999, 1_700_000_001_000},
		{1, 1000},
		{0, 0},
		{-5, 0},
		{math.MaxInt64, math.MaxUint32 * 1000},
	} {
		const hash = 0xfedc_ba98_7654_3210
		s := newSeen(hash, tc.millis)
		if s.hash() != hash {
			t.Fatalf("hash %x came back as %x", uint64(hash), s.hash())
		}
		if got := s.untilMillis(); got != tc.want || (tc.millis > 0 && tc.millis < math.MaxUint32*1000 && got < tc.millis) {
			t.Errorf("horizon %d: remembered until %d, want %d", tc.millis, got, tc.want)
		}
	}
}

// TestDuplicateUntilTheHorizon: through the engine, an id recorded with a
// one-hour window is a duplicate up to its horizon, wherever in a second
// the horizon falls.
func TestDuplicateUntilTheHorizon(t *testing.T) {
	e, err := New(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	c := fcap.Cap{Scope: "campaign", ID: "c", Limit: 100, Window: time.Hour}
	for _, at := range []int64{1_700_000_000_000, 1_700_000_000_001, 1_700_000_000_999} {
		imp := fcap.Impression{ID: "imp", Time: at, Caps: []fcap.Cap{c}}
		v := fmt.Sprint("viewer-", at)
		if st, err := e.Record(v, imp); err != nil || st != fcap.Recorded {
			t.Fatalf("first record at %d: %v, %v", at, st, err)
		}
		// A retry just before the horizon, after the engine's clock moved
		// there and a sweep forgot whatever had passed.
		late := at + c.WindowMillis() - 1
		e.Check("clock", nil, late, nil)
		e.Sweep(1 << 30)
		if st, err := e.Record(v, imp); err != nil || st != fcap.Duplicate {
			t.Fatalf("retry of the id recorded at %d, clock at %d: %v, %v; want a duplicate", at, late, st, err)
		}
	}
}

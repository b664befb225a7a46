package fcap_test

import (
	"math"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
)

// TestWindowIsADuration: a window is what it says, time.Hour an hour,
// and it crosses to milliseconds (the wire's, the JSON API's and the
// engine's unit) and back unchanged.
func TestWindowIsADuration(t *testing.T) {
	for _, tc := range []struct {
		window time.Duration
		ms     int64
	}{
		{time.Millisecond, 1},
		{time.Second, 1000},
		{time.Hour, 3_600_000},
		{24 * time.Hour, 86_400_000},
		{fcap.MaxWindow, 400 * 86_400_000},
	} {
		c := fcap.Cap{Scope: "campaign", ID: "c", Limit: 1, Window: tc.window}
		if got := c.WindowMillis(); got != tc.ms {
			t.Errorf("Window %v: WindowMillis %d, want %d", tc.window, got, tc.ms)
		}
		if got := fcap.Millis(tc.ms); got != tc.window {
			t.Errorf("Millis(%d) = %v, want %v", tc.ms, got, tc.window)
		}
	}
}

// TestMillisSaturates: milliseconds past what a time.Duration holds (a
// peer's or a JSON caller's window of 2^62 ms) become the longest whole
// number of milliseconds of their sign, which validation refuses and
// which crosses the wire and back unchanged; they never wrap around to
// a window that would pass.
func TestMillisSaturates(t *testing.T) {
	most := time.Duration(math.MaxInt64/1_000_000) * time.Millisecond
	for _, tc := range []struct {
		ms   int64
		want time.Duration
	}{
		{math.MaxInt64 / 1_000_000, most},
		{math.MaxInt64/1_000_000 + 1, most},
		{fcap.MaxTime, most},
		{math.MaxInt64, most},
		{-math.MaxInt64 / 1_000_000, -most},
		{-math.MaxInt64/1_000_000 - 1, -most},
		{math.MinInt64, -most},
		{0, 0},
		{-5, -5 * time.Millisecond},
	} {
		got := fcap.Millis(tc.ms)
		if got != tc.want {
			t.Errorf("Millis(%d) = %v, want %v", tc.ms, got, tc.want)
		}
		c := fcap.Cap{Scope: "campaign", ID: "c", Limit: 1, Window: got}
		if fcap.Millis(c.WindowMillis()) != got {
			t.Errorf("Millis(%d) = %v does not survive WindowMillis", tc.ms, got)
		}
		if err := c.Validate(fcap.Limits{}); err == nil && tc.ms != 0 {
			t.Errorf("a window of %d ms (%v) is valid", tc.ms, got)
		}
	}
}

// TestKeyOfWindowInMilliseconds: a Buckets or Fixed cap's key mixes in
// its window in milliseconds, as it did when Window was milliseconds, so
// the keys in snapshots, logs and replicas written before still name
// the same counters. The hashes are those of the code before the
// change.
func TestKeyOfWindowInMilliseconds(t *testing.T) {
	for _, tc := range []struct {
		c    fcap.Cap
		want uint64
	}{
		{fcap.Cap{Scope: "campaign", ID: "c7", Limit: 10, Window: time.Hour, Algorithm: fcap.Buckets}, 0xa9e27bc02f4c34d7},
		{fcap.Cap{Scope: "creative", ID: "cr42", Limit: 3, Window: 24 * time.Hour, Algorithm: fcap.Fixed}, 0xccea3cf8a645b350},
		{fcap.Cap{Scope: "campaign", ID: "c7", Limit: 10, Window: time.Hour}, 0x747b925bd9d5a765},
	} {
		if got := tc.c.Key(); got != tc.want {
			t.Errorf("%v: key %#x, want %#x", tc.c, got, tc.want)
		}
	}
}

package client

import (
	"testing"
	"time"
)

// TestRecordBackoffRidesOutAFailover: with the defaults an impression is
// retried for 30-60 s before it is dropped, however the jitter falls; a
// node's death and the failover after it take seconds.
func TestRecordBackoffRidesOutAFailover(t *testing.T) {
	cfg := DefaultConfig("x")
	least := func(time.Duration) time.Duration { return 0 }
	most := func(n time.Duration) time.Duration { return n - 1 }
	var lo, hi time.Duration
	for a := 1; a < cfg.RecordAttempts; a++ { // a wait follows every failure but the last
		lo += retryDelay(&cfg, a, least)
		hi += retryDelay(&cfg, a, most)
	}
	if lo < 30*time.Second || hi > 61*time.Second {
		t.Fatalf("an impression is retried for %v to %v before it is dropped, want within 30s-61s", lo, hi)
	}
	if d := retryDelay(&cfg, 1, least); d < cfg.RecordRetryMin {
		t.Errorf("first wait at least %v, want at least RecordRetryMin %v", d, cfg.RecordRetryMin)
	}
	if d := retryDelay(&cfg, 40, most); d >= cfg.RecordRetryMax {
		t.Errorf("a late wait reaches %v, want under RecordRetryMax %v", d, cfg.RecordRetryMax)
	}
}

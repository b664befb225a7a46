package replication

import (
	"testing"
	"time"
)

func TestThrottleDelay(t *testing.T) {
	th := newThrottle(10 << 20) // 10 MiB/s, burst 2.5 MiB
	if d := th.delay(5 << 19); d != 0 {
		t.Fatalf("within the burst: delay %v, want 0", d)
	}
	// 10 MiB more than the burst allows must wait about one second.
	d := th.delay(10 << 20)
	if d < 900*time.Millisecond || d > 1100*time.Millisecond {
		t.Fatalf("10 MiB past the burst at 10 MiB/s: delay %v, want about 1s", d)
	}
	var unlimited *throttle
	if unlimited.delay(1<<30) != 0 || newThrottle(0).delay(1<<30) != 0 {
		t.Fatal("an unlimited throttle delayed")
	}
}

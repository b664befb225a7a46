package replication

import (
	"sync"
	"time"
)

// throttle paces whole-partition transfers to a byte rate shared by every
// peer, so a join or a re-replication after a crash does not starve the
// data plane of CPU and network. Ongoing replication of changes and
// hand-overs are not throttled: strict writes and drains wait on them.
type throttle struct {
	rate  float64 // bytes per second; 0 means unlimited
	burst float64

	mu     sync.Mutex
	tokens float64
	last   time.Time
}

func newThrottle(bytesPerSecond int64) *throttle {
	t := &throttle{rate: float64(bytesPerSecond), last: time.Now()}
	// A burst of a quarter second, and at least one replication message,
	// so a single message never waits for more than the rate allows.
	t.burst = max(t.rate/4, 512<<10)
	t.tokens = t.burst
	return t
}

// delay takes n bytes and returns how long the caller must wait before
// sending them.
func (t *throttle) delay(n int) time.Duration {
	if t == nil || t.rate <= 0 {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	t.tokens = min(t.burst, t.tokens+now.Sub(t.last).Seconds()*t.rate)
	t.last = now
	t.tokens -= float64(n)
	if t.tokens >= 0 {
		return 0
	}
	return time.Duration(-t.tokens / t.rate * float64(time.Second))
}

// wait takes n bytes, sleeping as the rate requires; it returns early
// (false) when stop closes.
func (t *throttle) wait(n int, stop <-chan struct{}) bool {
	d := t.delay(n)
	if d <= 0 {
		return true
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-stop:
		return false
	}
}

package wanproxy

import (
	"fmt"
	"time"
)

// Dir is one direction of a proxied connection.
type Dir int

const (
	// Forward carries bytes from the side that dialed the proxy to the
	// upstream.
	Forward Dir = iota
	// Reverse carries the upstream's answers back to the dialing side.
	Reverse
)

func (d Dir) String() string {
	switch d {
	case Forward:
		return "forward"
	case Reverse:
		return "reverse"
	}
	return fmt.Sprintf("Dir(%d)", int(d))
}

func (d Dir) valid() bool { return d == Forward || d == Reverse }

// MinRTO is the least time a lost chunk is held back: Linux's minimum
// TCP retransmission timeout (TCP_RTO_MIN).
const MinRTO = 200 * time.Millisecond

// Link is what one direction of the emulated WAN does to the bytes it
// carries. The zero Link forwards bytes as they come.
type Link struct {
	// Latency is the one-way delay every chunk of bytes waits before it
	// is forwarded. Default 0.
	Latency time.Duration
	// Jitter spreads each chunk's delay uniformly over
	// [Latency-Jitter, Latency+Jitter] (never below 0). A chunk never
	// overtakes the one before it on its connection: a chunk whose draw
	// would land before its predecessor leaves right after it, as TCP
	// delivers a stream in order whatever the packets did. Default 0.
	Jitter time.Duration
	// Bandwidth caps the bytes per second forwarded in this direction,
	// shared by every connection of the proxy (a token bucket). 0: no
	// cap. Default 0.
	Bandwidth int64
	// Burst is the token bucket's size in bytes: what may pass at once
	// after an idle spell. 0: Bandwidth/50 (20 ms worth), at least
	// 4 KiB. Ignored without a Bandwidth.
	Burst int64
	// Loss is the probability, per chunk read from the sender, that the
	// chunk is "lost": held back for a retransmission timeout,
	// max(MinRTO, 2*RTT) with RTT the sum of both directions' Latency,
	// before it and everything behind it on its connection goes on.
	// TCP turns a lost segment into exactly that: a stall of one RTO
	// and head-of-line blocking, never missing bytes. Default 0.
	Loss float64
}

// Validate reports a knob out of range.
func (l Link) Validate() error {
	switch {
	case l.Latency < 0:
		return fmt.Errorf("%w: latency %v below 0", ErrBadLink, l.Latency)
	case l.Jitter < 0:
		return fmt.Errorf("%w: jitter %v below 0", ErrBadLink, l.Jitter)
	case l.Bandwidth < 0:
		return fmt.Errorf("%w: bandwidth %d below 0", ErrBadLink, l.Bandwidth)
	case l.Burst < 0:
		return fmt.Errorf("%w: burst %d below 0", ErrBadLink, l.Burst)
	case !(l.Loss >= 0 && l.Loss <= 1): // also refuses NaN
		return fmt.Errorf("%w: loss %v outside [0, 1]", ErrBadLink, l.Loss)
	}
	return nil
}

// burst returns the bucket size in force.
func (l Link) burst() int64 {
	if l.Burst > 0 {
		return l.Burst
	}
	return max(l.Bandwidth/50, 4<<10)
}

// rto is how long a lost chunk is held back, given both directions.
func rto(a, b Link) time.Duration {
	return max(MinRTO, 2*(a.Latency+b.Latency))
}

package client

import (
	"context"
	"testing"
	"time"
)

// TestDeadlineLeavesTheMargin: a call stops waiting Config.Margin before
// its deadline (default a tenth of Timeout, at most 5ms), never more than
// a tenth of its budget early, and never later than the deadline.
func TestDeadlineLeavesTheMargin(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	expired, cancel := context.WithDeadline(context.Background(), now.Add(-time.Millisecond))
	defer cancel()
	short, cancel2 := context.WithDeadline(context.Background(), now.Add(2*time.Millisecond))
	defer cancel2()
	for _, tc := range []struct {
		name    string
		timeout time.Duration
		margin  time.Duration
		ctx     context.Context
		want    time.Duration // from now
	}{
		{"default margin is a tenth of a 5ms timeout", 5 * time.Millisecond, 0, context.Background(), 4500 * time.Microsecond},
		{"default margin is a tenth of a 50ms timeout", 50 * time.Millisecond, 0, context.Background(), 45 * time.Millisecond},
		{"default margin is at most 5ms", 200 * time.Millisecond, 0, context.Background(), 195 * time.Millisecond},
		{"an explicit margin", 50 * time.Millisecond, 3 * time.Millisecond, context.Background(), 47 * time.Millisecond},
		{"never more than a tenth of the budget", 10 * time.Millisecond, 5 * time.Millisecond, context.Background(), 9 * time.Millisecond},
		{"a negative margin is none", 50 * time.Millisecond, -1, context.Background(), 50 * time.Millisecond},
		{"a shorter context deadline, less its tenth", 50 * time.Millisecond, 0, short, 1800 * time.Microsecond},
		{"a passed deadline is not moved later", 50 * time.Millisecond, 0, expired, -time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Client{cfg: Config{Timeout: tc.timeout, Margin: tc.margin}}
			c.margin = margin(c.cfg)
			if got := c.deadline(tc.ctx, now).Sub(now); got != tc.want {
				t.Errorf("deadline = now%+v, want now%+v", got, tc.want)
			}
		})
	}
}

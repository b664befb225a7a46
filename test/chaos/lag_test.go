package chaos

import (
	"context"
	"slices"
	"sync"
	"time"
)

// lagMeter measures how late this process's timers fire: a call can only
// return by its deadline if the client's timer fires on time, so a late
// call with an equally late timer says the machine was starved (2 shared
// vCPUs, race-built processes), not that the client ignored its deadline.
type lagMeter struct {
	mu sync.Mutex
	// The fields below are guarded by mu.
	lags []time.Duration
	at   []time.Time // when each lag over lateSlack was seen
}

func (m *lagMeter) run(ctx context.Context) *sync.WaitGroup {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		const period = 5 * time.Millisecond
		t := time.NewTimer(period)
		defer t.Stop()
		due := time.Now().Add(period)
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				lag := now.Sub(due)
				m.mu.Lock()
				m.lags = append(m.lags, lag)
				if lag > lateSlack {
					m.at = append(m.at, due)
				}
				m.mu.Unlock()
				due = time.Now().Add(period)
				t.Reset(period)
			}
		}
	}()
	return &wg
}

// stats returns the p99 and the max lag and when lags over lateSlack were
// seen.
func (m *lagMeter) stats() (p99, top time.Duration, late []time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.lags) == 0 {
		return 0, 0, nil
	}
	l := slices.Clone(m.lags)
	slices.Sort(l)
	return l[len(l)*99/100], l[len(l)-1], slices.Clone(m.at)
}

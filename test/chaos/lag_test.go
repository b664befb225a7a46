package chaos

import (
	"context"
	"slices"
	"sync"
	"time"
)

// lagMeter measures how late this process's goroutines wake from a
// timer: a call can only return by its deadline if the client's goroutine
// runs when its timer fires, so a late call with an equally late wake-up
// says the machine was starved (2 shared vCPUs, race-built processes),
// not that the client ignored its deadline.
type lagMeter struct {
	mu sync.Mutex
	// The fields below are guarded by mu.
	lags []time.Duration
	woke []time.Time // when each probe ran, in order (lags[i] late)
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
			case <-t.C:
				// Now, not the time the channel carries: that is when the
				// timer fired, and a goroutine can wait far longer than
				// that for a CPU to run it.
				lag := time.Since(due)
				m.mu.Lock()
				m.lags = append(m.lags, lag)
				m.woke = append(m.woke, due.Add(lag))
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

// worstAround is the largest wake-up lag of a probe that ran between from
// and to (or the first one after to: a starved process may run no probe
// inside a short span at all).
func (m *lagMeter) worstAround(from, to time.Time) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	i, _ := slices.BinarySearchFunc(m.woke, from, func(a, b time.Time) int { return a.Compare(b) })
	var worst time.Duration
	for ; i < len(m.woke); i++ {
		worst = max(worst, m.lags[i])
		if m.woke[i].After(to) {
			break
		}
	}
	return worst
}

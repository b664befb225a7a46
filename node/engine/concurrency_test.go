package engine_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/node/engine"
)

// TestConcurrentAllowGrantsExactlyLimit: N goroutines racing Allow on one
// counter with limit L get exactly L grants, for every algorithm, while
// other goroutines hammer neighbouring viewers of the same stripes.
func TestConcurrentAllowGrantsExactlyLimit(t *testing.T) {
	for _, algo := range []fcap.Algorithm{fcap.Sliding, fcap.Buckets, fcap.Fixed} {
		t.Run(algo.String(), func(t *testing.T) {
			e := newEngine(t, func(c *engine.Config) { c.Stripes = 4 })
			const limit, goroutines, attempts = 37, 16, 50
			c := fcap.Cap{Scope: "campaign", ID: "hot", Limit: limit, Window: (1 << 30) * time.Millisecond, Algorithm: algo}
			var granted atomic.Int64
			var wg sync.WaitGroup
			for g := range goroutines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range attempts {
						vd, err := e.Allow("viewer", int64(i), c)
						if err != nil {
							t.Error(err)
							return
						}
						if vd.Allowed {
							granted.Add(1)
						}
						// Noise on other viewers sharing the stripes.
						e.Allow(fmt.Sprintf("other-%d-%d", g, i%8), int64(i), c)
					}
				}()
			}
			wg.Wait()
			if got := granted.Load(); got != limit {
				t.Fatalf("granted %d, want exactly %d", got, limit)
			}
		})
	}
}

// TestConcurrentReserveNeverOvershoots: reservations and allows racing on
// one counter never hold more than the limit between them.
func TestConcurrentReserveNeverOvershoots(t *testing.T) {
	e := newEngine(t)
	const limit = 20
	c := campaign("strict", limit, 1<<30)
	c.Mode = fcap.Strict
	var held atomic.Int64
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 40 {
				if g%2 == 0 {
					vd, _, err := e.Reserve("v", fcap.Candidate{Caps: []fcap.Cap{c}}, int64(i), 1<<40)
					if err != nil {
						t.Error(err)
						return
					}
					if vd.Allowed {
						held.Add(1)
					}
				} else if vd, _ := e.Allow("v", int64(i), c); vd.Allowed {
					held.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if got := held.Load(); got != limit {
		t.Fatalf("reservations plus impressions = %d, want exactly %d", got, limit)
	}
}

// TestConcurrentRecordLosesNothing: many goroutines record distinct
// impressions (and redeliver each one) for a few viewers; every
// impression counts exactly once.
func TestConcurrentRecordLosesNothing(t *testing.T) {
	e := newEngine(t, func(c *engine.Config) { c.Stripes = 2 })
	const goroutines, per, viewers = 8, 300, 3
	c := campaign("c", fcap.MaxLimit, fcap.MaxWindow.Milliseconds())
	adv := fcap.Cap{Scope: "advertiser", ID: "a", Limit: fcap.MaxLimit, Window: fcap.MaxWindow, Algorithm: fcap.Fixed}
	var recorded atomic.Int64
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				imp := fcap.Impression{ID: fmt.Sprintf("%d-%d", g, i), Time: int64(i), Caps: []fcap.Cap{c, adv}}
				v := fmt.Sprint("viewer-", i%viewers)
				for range 2 { // at-least-once delivery
					st, err := e.Record(v, imp)
					if err != nil {
						t.Error(err)
						return
					}
					if st == fcap.Recorded {
						recorded.Add(1)
					}
				}
			}
		}()
	}
	wg.Wait()
	if got := recorded.Load(); got != goroutines*per {
		t.Fatalf("fcap.Recorded %d times, want %d (one per distinct impression)", got, goroutines*per)
	}
	var total int64
	for v := range viewers {
		id := fmt.Sprint("viewer-", v)
		used := fcap.MaxLimit - checkOne(t, e, id, per, c).Remaining
		fixed := fcap.MaxLimit - checkOne(t, e, id, per, adv).Remaining
		if used != fixed {
			t.Errorf("%s: sliding counts %d, fixed counts %d", id, used, fixed)
		}
		total += used
	}
	if total != goroutines*per {
		t.Fatalf("counters hold %d impressions, want %d", total, goroutines*per)
	}
}

// TestSweeperRunsBesideTraffic runs the background sweeper while writers
// and readers work, then stops it and checks no goroutine is left.
func TestSweeperRunsBesideTraffic(t *testing.T) {
	defer goleak.VerifyNone(t)
	e := newEngine(t, func(c *engine.Config) {
		c.SweepInterval = time.Millisecond
		c.SweepPass = 10 * time.Millisecond
		c.SweepBatch = 16
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.Run(ctx)
	}()
	c := campaign("c", 3, 50)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 3000 {
				now := int64(i)
				v := fmt.Sprintf("v-%d-%d", g, i%200)
				e.Allow(v, now, c)
				e.Check(v, []fcap.Candidate{{Caps: []fcap.Cap{c}}}, now, nil)
			}
		}()
	}
	wg.Wait()
	// Everything ages out; the running sweeper must free it all.
	e.Check("probe", nil, 1_000_000, nil)
	deadline := time.Now().Add(10 * time.Second)
	for e.Stats().Viewers > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("sweeper left %+v", e.Stats())
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
}

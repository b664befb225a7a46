package engine_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/node/engine"
)

// TestRetiredBasesOnlyGrowAndSumToTheLimit: for any viewer, cap and set
// of retired regions, the bases of the remaining regions sum to the
// limit once the retired regions' units are free, each remaining region
// keeps at least its static base, retiring one more region never
// lowers a base, and a retired region's units spread evenly (each heir
// gets floor or ceil of its share).
func TestRetiredBasesOnlyGrowAndSumToTheLimit(t *testing.T) {
	const window = 10
	for k := 2; k <= 5; k++ {
		for limit := int64(1); limit <= 23; limit++ {
			for v := range 16 {
				c := strictCap("c", limit, window*time.Millisecond)
				vk, kh := fcap.ViewerKey(fmt.Sprint("v", v)), c.Key()
				static := make([]int64, k)
				for i, s := range regionShares(k) {
					static[i] = s.Base(vk, kh, &c, 0)
				}
				// Retire regions k-1, k-2, ... one by one (never region 0).
				shares := regionShares(k)
				prev := append([]int64(nil), static...)
				for r := k - 1; r >= 1; r-- {
					t0 := int64(100 * (k - r)) // each retire after the last one's switch
					for i, s := range shares {
						if i != r && s.Retire(r, t0) != nil {
							t.Fatal("retire refused")
						}
					}
					var sum int64
					for i := range r {
						b := shares[i].Base(vk, kh, &c, t0+2*window)
						if b < prev[i] {
							t.Fatalf("k=%d L=%d: region %d's base fell from %d to %d when region %d retired", k, limit, i, prev[i], b, r)
						}
						if r == k-1 {
							// One region gone: its units go evenly to the others.
							gained, share := b-static[i], static[k-1]/int64(k-1)
							if gained != share && gained != share+1 {
								t.Fatalf("k=%d L=%d: region %d inherited %d of the %d units of the retired region", k, limit, i, gained, static[k-1])
							}
						}
						if early := shares[i].Base(vk, kh, &c, t0+2*window-1); early != prev[i] {
							t.Fatalf("k=%d L=%d: region %d's base moved before T0+2W: %d, was %d", k, limit, i, early, prev[i])
						}
						prev[i] = b
						sum += b
					}
					if sum != limit {
						t.Fatalf("k=%d L=%d with regions %d.. retired: the remaining bases sum to %d", k, limit, r, sum)
					}
				}
			}
		}
	}
	s := regionShares(3)[0]
	if err := s.Retire(0, 1); !errors.Is(err, fcap.ErrInvalid) {
		t.Errorf("a region retired itself: %v", err)
	}
	if err := s.Retire(3, 1); !errors.Is(err, fcap.ErrInvalid) {
		t.Errorf("retired region 3 of 3: %v", err)
	}
	if err := s.Retire(1, 5); err != nil {
		t.Fatal(err)
	}
	if err := s.Retire(1, 9); err != nil {
		t.Fatal(err)
	}
	if at, ok := s.RetiredAt(1); !ok || at != 5 {
		t.Errorf("retired twice: at %d %v, want the first time 5", at, ok)
	}
}

// TestRetireWaitsForTheRetiredRegionsLoans: the retired region lent its
// whole base just before T0, and the borrower granted with the credits
// the last moment they counted. Its base must stay unused until those
// grants age out, T0+2W: switching at T0+W lets a remaining region grant
// a seventh time inside one window for a limit of 6. From T0+2W on the
// remaining regions grant the whole limit between them.
func TestRetireWaitsForTheRetiredRegionsLoans(t *testing.T) {
	const window, t0 = 20, 10
	c := strictCap("c", 6, window*time.Millisecond) // bases 2, 2, 2
	shares := regionShares(3)
	a, b, gone := newEngine(t, withShares(shares[0])), newEngine(t, withShares(shares[1])), newEngine(t, withShares(shares[2]))
	allow := func(e *engine.Engine, viewer string, now int64) bool {
		t.Helper()
		vd, err := e.AllowWrite(&engine.Write{}, viewer, now, []fcap.Cap{c})
		if err != nil {
			t.Fatal(err)
		}
		return vd.Allowed
	}
	// Before T0 the region about to be lost lends B its two units.
	for id := uint64(1); id <= 2; id++ {
		if ok, err := gone.LendWrite(&engine.Write{}, "v", c, 9, id); err != nil || !ok {
			t.Fatalf("lend %d: %v %v", id, ok, err)
		}
		if ok, err := b.CreditWrite(&engine.Write{}, "v", c, 8, id); err != nil || !ok {
			t.Fatalf("credit %d: %v %v", id, ok, err)
		}
	}
	shares[0].Retire(2, t0)
	shares[1].Retire(2, t0+3) // B's operator ran it a little later
	grants := []int64{}
	grant := func(e *engine.Engine, now int64) {
		for allow(e, "v", now) {
			grants = append(grants, now)
		}
	}
	// B uses its base and both credits the last tick they count (8+W).
	grant(b, 8+window-1)
	grant(a, 8+window-1)
	fresh := func(viewer string, now int64) int {
		n := 0
		for _, e := range []*engine.Engine{a, b} {
			for allow(e, viewer, now) {
				n++
			}
		}
		return n
	}
	for now := int64(8 + window); now <= t0+3*window; now++ {
		switch now {
		case t0 + 2*window - 1: // A switches at T0+2W, B 3 later
			if n := fresh("x", now); n != 4 {
				t.Errorf("before T0+2W the remaining regions granted %d, want their old bases, 4", n)
			}
		case t0 + 3 + 2*window: // both switched: the whole limit
			if n := fresh("w", now); n != 6 {
				t.Errorf("after T0+2W the remaining regions granted %d of 6", n)
			}
		}
		grant(a, now)
		grant(b, now)
		n := 0
		for _, g := range grants {
			if g > now-window {
				n++
			}
		}
		if n > 6 {
			t.Fatalf("tick %d: %d grants inside one window across the remaining regions, limit 6 (grants at %v)", now, n, grants)
		}
	}
}

// TestRetireNeverGrantsPastTheLimit is TestEscrowNeverGrantsPastTheLimit
// across a retire: three regions grant, ask, lend and credit at random;
// region 2 dies at a random tick (no grant, loan or credit after it,
// though answers it sent still arrive), regions 0 and 1 retire it at
// their own later ticks and stop asking it. After every tick the grants
// of all regions inside any window sum to at most the limit; once both
// switched, the remaining bases sum to the limit. Demand comes in
// bursts and the region about to be lost is asked most, so that units
// it lent are used late: with the switch at T0 (not T0+2W) most seeds
// overshoot, at T0+W a few (TestRetireWaitsForTheRetiredRegionsLoans
// shows that case step by step).
func TestRetireNeverGrantsPastTheLimit(t *testing.T) {
	for seed := range uint64(300) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { retireModel(t, seed) })
	}
}

func retireModel(t *testing.T, seed uint64) {
	const k, window, ticks, dead, burst = 3, 20, 500, 2, 17
	rng := rand.New(rand.NewPCG(seed, 36))
	shares := regionShares(k)
	engines := make([]*engine.Engine, k)
	for i := range engines {
		engines[i] = newEngine(t, withShares(shares[i]))
	}
	caps := []fcap.Cap{strictCap("a", 5, window*time.Millisecond), strictCap("b", 2, window*time.Millisecond), strictCap("c", 7, window*time.Millisecond)}
	viewers := []string{"x"}
	death := int64(100 + rng.IntN(150))
	retireAt := []int64{death + int64(rng.IntN(3)), death + int64(rng.IntN(40))}
	type key struct{ v, c int }
	grants := map[key][]int64{}
	var asks []*modelAsk
	asking := map[[3]int]bool{}
	lentByDead := 0
	for now := int64(1); now <= ticks; now++ {
		for r, at := range retireAt {
			if now == at {
				if err := shares[r].Retire(dead, at); err != nil {
					t.Fatal(err)
				}
			}
		}
		alive := func(r int) bool { return r != dead || now < death }
		for _, a := range asks {
			if a.next != now {
				continue
			}
			vi, ci := int(a.transfer>>32&3), int(a.transfer>>34&3)
			done := func() { a.next = -1; delete(asking, [3]int{a.from, vi, ci}) }
			if !a.lent {
				if !alive(a.to) {
					done() // no answer: the ask fails
					continue
				}
				ok, err := engines[a.to].LendWrite(&engine.Write{}, viewers[vi], caps[ci], now, a.transfer)
				if err != nil {
					t.Fatal(err)
				}
				if !ok {
					done()
					continue
				}
				if a.to == dead {
					lentByDead++
				}
				a.lent, a.next = true, now+int64(rng.IntN(6))+1
				continue
			}
			if alive(a.from) {
				if _, err := engines[a.from].CreditWrite(&engine.Write{}, viewers[vi], caps[ci], a.asked, a.transfer); err != nil {
					t.Fatal(err)
				}
			}
			done()
		}
		for r := range k {
			if !alive(r) {
				continue
			}
			// Demand comes in bursts: a region quiet for a while grants
			// with credits late in their life, the case a retire's
			// switch must wait for.
			tries := 0
			if (now+int64(r)*burst/int64(k))%burst < burst/3 || rng.IntN(8) == 0 {
				tries = rng.IntN(4)
			}
			for range tries {
				vi, ci := rng.IntN(len(viewers)), rng.IntN(len(caps))
				var w engine.Write
				vd, err := engines[r].AllowWrite(&w, viewers[vi], now, caps[ci:ci+1])
				if err != nil {
					t.Fatal(err)
				}
				if vd.Allowed {
					grants[key{vi, ci}] = append(grants[key{vi, ci}], now)
					continue
				}
				if w.ShareSpent && !asking[[3]int{r, vi, ci}] {
					to := (r + 1 + rng.IntN(k-1)) % k
					if r != dead && rng.IntN(3) > 0 {
						to = dead // the region about to be lost lends most
					}
					if _, retired := shares[r].RetiredAt(dead); retired && to == dead {
						to = 1 - r // a retired region's link asks nothing
					}
					asking[[3]int{r, vi, ci}] = true
					id := rng.Uint64()&^(15<<32) | uint64(vi)<<32 | uint64(ci)<<34 | 1
					asks = append(asks, &modelAsk{from: r, to: to, transfer: id, asked: now, next: now + int64(rng.IntN(6)) + 1})
				}
			}
		}
		for kk, ts := range grants {
			n := 0
			for _, g := range ts {
				if g > now-window {
					n++
				}
			}
			if limit := caps[kk.c].Limit; int64(n) > limit {
				t.Fatalf("tick %d (death %d, retired at %v): viewer %s cap %s: %d grants inside one window, limit %d",
					now, death, retireAt, viewers[kk.v], caps[kk.c].ID, n, limit)
			}
		}
	}
	if lentByDead == 0 {
		t.Log("the lost region lent nothing in this run")
	}
	for vi, v := range viewers {
		for ci := range caps {
			c := &caps[ci]
			sum := shares[0].Base(fcap.ViewerKey(v), c.Key(), c, ticks) + shares[1].Base(fcap.ViewerKey(v), c.Key(), c, ticks)
			if sum != c.Limit {
				t.Fatalf("viewer %d cap %s: the remaining bases sum to %d after the switch, limit %d", vi, c.ID, sum, c.Limit)
			}
		}
	}
}

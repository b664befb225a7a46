package engine_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/node/engine"
)

func strictCap(id string, limit int64, window time.Duration) fcap.Cap {
	return fcap.Cap{Scope: "campaign", ID: id, Limit: limit, Window: window, Mode: fcap.Strict}
}

// withShares configures an engine of the region with shares s.
func withShares(s *engine.Shares) func(*engine.Config) {
	return func(c *engine.Config) { c.Shares = s }
}

// regionShares are the shares of k regions, in index order.
func regionShares(k int) []*engine.Shares {
	out := make([]*engine.Shares, k)
	for i := range out {
		out[i] = &engine.Shares{Index: i, Regions: k, Tag: engine.ShareTag(fmt.Sprintf("r%d", i))}
	}
	return out
}

// TestShareBasesSumToTheLimit: for any viewer, cap and number of regions,
// the static bases sum to the limit, each is floor(L/k) or one more, and
// the leftover units of a small cap do not always land in one region.
func TestShareBasesSumToTheLimit(t *testing.T) {
	for k := 2; k <= 5; k++ {
		shares := regionShares(k)
		for limit := int64(1); limit <= 13; limit++ {
			favoured := map[int]bool{}
			for v := range 64 {
				c := strictCap("c", limit, time.Hour)
				vk, kh := fcap.ViewerKey(fmt.Sprint("v", v)), c.Key()
				var sum int64
				for i, s := range shares {
					b := s.Base(vk, kh, &c, 0)
					if b != limit/int64(k) && b != limit/int64(k)+1 {
						t.Fatalf("k=%d L=%d: region %d base %d", k, limit, i, b)
					}
					if b > limit/int64(k) {
						favoured[i] = true
					}
					sum += b
				}
				if sum != limit {
					t.Fatalf("k=%d L=%d viewer %d: bases sum to %d", k, limit, v, sum)
				}
			}
			if limit%int64(k) != 0 && len(favoured) != k {
				t.Errorf("k=%d L=%d: the leftover units went only to regions %v over 64 viewers", k, limit, favoured)
			}
		}
	}
}

// TestStaticSharesHoldAcrossRegionsRacing: three regions (three engines
// that never exchange a byte) race on the same viewers with a strict cap
// of 5: each grants exactly its base, and the grants of all three sum to
// the limit, never more. A soft cap beside it is not split.
func TestStaticSharesHoldAcrossRegionsRacing(t *testing.T) {
	const viewers, limit = 50, 5
	shares := regionShares(3)
	engines := make([]*engine.Engine, 3)
	for i := range engines {
		engines[i] = newEngine(t, withShares(shares[i]))
	}
	c := strictCap("c", limit, time.Hour)
	var mu sync.Mutex
	granted := map[string][]int64{} // per viewer, per region
	var wg sync.WaitGroup
	for r := range 3 {
		for range 4 {
			wg.Go(func() {
				for v := range viewers {
					viewer := fmt.Sprint("v", v)
					for range limit + 2 {
						var w engine.Write
						vd, err := engines[r].AllowWrite(&w, viewer, 1000, []fcap.Cap{c})
						if err != nil {
							t.Error(err)
							return
						}
						if !vd.Allowed {
							if !w.ShareSpent {
								t.Errorf("%s region %d: refused without ShareSpent", viewer, r)
							}
							continue
						}
						mu.Lock()
						if granted[viewer] == nil {
							granted[viewer] = make([]int64, 3)
						}
						granted[viewer][r]++
						mu.Unlock()
					}
				}
			})
		}
	}
	wg.Wait()
	for v := range viewers {
		viewer := fmt.Sprint("v", v)
		var sum int64
		for r, n := range granted[viewer] {
			if base := shares[r].Base(fcap.ViewerKey(viewer), c.Key(), &c, 0); n != base {
				t.Errorf("%s region %d granted %d, base %d", viewer, r, n, base)
			}
			sum += n
		}
		if sum != limit {
			t.Errorf("%s: %d granted across the regions, limit %d", viewer, sum, limit)
		}
	}
	// A soft cap is judged against its whole limit in every region.
	soft := fcap.Cap{Scope: "campaign", ID: "soft", Limit: limit, Window: time.Hour}
	for range limit {
		var w engine.Write
		if vd, err := engines[0].AllowWrite(&w, "s", 1000, []fcap.Cap{soft}); err != nil || !vd.Allowed {
			t.Fatalf("soft cap: %+v %v", vd, err)
		}
	}
}

// TestLendAndCredit: a lender gives a unit only while its own grants and
// loans leave one unused under its base; a retried transfer id is
// answered with the same loan and takes no second unit; a credit lets
// the borrower grant one more, once however often it is recorded; and
// both age out: the loan after twice the window, the credit after one.
func TestLendAndCredit(t *testing.T) {
	const window = 100
	c := strictCap("c", 4, window*time.Millisecond) // bases 2 and 2
	shares := regionShares(2)
	lender, borrower := newEngine(t, withShares(shares[0])), newEngine(t, withShares(shares[1]))
	lw := func() *engine.Write { return &engine.Write{} }
	bw := func() *engine.Write { return &engine.Write{} }
	allow := func(e *engine.Engine, w *engine.Write, now int64) bool {
		t.Helper()
		vd, err := e.AllowWrite(w, "v", now, []fcap.Cap{c})
		if err != nil {
			t.Fatal(err)
		}
		return vd.Allowed
	}
	lend := func(now int64, id uint64) bool {
		t.Helper()
		ok, err := lender.LendWrite(lw(), "v", c, now, id)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}

	if !allow(lender, lw(), 10) {
		t.Fatal("lender's first grant refused")
	}
	if !lend(20, 7) {
		t.Fatal("lender with one unit unused lent nothing")
	}
	if !lend(21, 7) {
		t.Fatal("a retried transfer was not answered with its loan")
	}
	if lend(22, 8) {
		t.Fatal("lender lent a unit it has not: one granted, one lent, base 2")
	}
	if w := lw(); allow(lender, w, 23) || !w.ShareSpent {
		t.Fatal("lender granted past its base after lending (or did not say its share was spent)")
	}

	for now := int64(30); now < 32; now++ {
		if !allow(borrower, bw(), now) {
			t.Fatal("borrower's base refused")
		}
	}
	if w := bw(); allow(borrower, w, 33) || !w.ShareSpent {
		t.Fatal("borrower granted past its base before any credit")
	}
	for range 2 {
		if _, err := borrower.CreditWrite(bw(), "v", c, 19, 7); err != nil { // asked at 19, answered twice
			t.Fatal(err)
		}
	}
	if ok, err := borrower.LendWrite(bw(), "v", c, 33, 9); err != nil || ok {
		t.Fatalf("the borrower lent on a borrowed unit: %v %v", ok, err)
	}
	if !allow(borrower, bw(), 34) {
		t.Fatal("the credit did not let the borrower grant")
	}
	if allow(borrower, bw(), 35) {
		t.Fatal("one credit, recorded twice, let the borrower grant twice")
	}

	// The credit counts until 19+window; the loan until 20+2*window.
	if allow(borrower, bw(), 19+window) {
		t.Fatal("the borrower granted on a credit aged out (its base is spent until 130)")
	}
	// The lender's grant at 10 aged out at 110: one unit is free beside the loan.
	if !allow(lender, lw(), 111) || allow(lender, lw(), 112) {
		t.Fatal("lender with a grant aged out and a loan running: want one grant, no more")
	}
	if !allow(lender, lw(), 212) || allow(lender, lw(), 219) {
		t.Fatal("lender at 212-219: want one grant (111 aged out), then none while the loan runs")
	}
	if !allow(lender, lw(), 20+2*window) {
		t.Fatal("the loan did not return to the lender after twice the window")
	}

	// Bad input is an error, not a loan.
	for _, tc := range []struct {
		name string
		e    *engine.Engine
		c    fcap.Cap
		id   uint64
	}{
		{"no shares", newEngine(t), c, 1},
		{"transfer 0", lender, c, 0},
		{"soft cap", lender, fcap.Cap{Scope: "campaign", ID: "c", Limit: 4, Window: time.Hour}, 1},
	} {
		if _, err := tc.e.LendWrite(lw(), "v", tc.c, 500, tc.id); !errors.Is(err, fcap.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", tc.name, err)
		}
	}
	cfg := engine.DefaultConfig()
	cfg.Shares = &engine.Shares{Index: 2, Regions: 2}
	if _, err := engine.New(cfg); !errors.Is(err, fcap.ErrInvalid) {
		t.Errorf("an engine with region 2 of 2: %v, want ErrInvalid", err)
	}
}

// TestEscrowNeverGrantsPastTheLimit drives three regions through random
// grants, asks, loans, credits, delays and retried transfers, and checks
// after every tick that the grants of all regions inside any window sum
// to at most the limit, and that borrowing happens (so the check is not
// vacuous).
func TestEscrowNeverGrantsPastTheLimit(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { escrowModel(t, seed) })
	}
}

type modelAsk struct {
	from, to    int
	transfer    uint64
	asked, next int64 // when it was first asked; when it next moves
	lent        bool  // the lender answered (the answer is on its way)
}

func escrowModel(t *testing.T, seed uint64) {
	const k, window, ticks = 3, 20, 600
	rng := rand.New(rand.NewPCG(seed, 99))
	shares := regionShares(k)
	engines := make([]*engine.Engine, k)
	for i := range engines {
		engines[i] = newEngine(t, withShares(shares[i]))
	}
	caps := []fcap.Cap{strictCap("a", 5, window*time.Millisecond), strictCap("b", 2, window*time.Millisecond)}
	viewers := []string{"x", "y"}
	type key struct {
		viewer string
		c      int
	}
	grants := map[key][]int64{} // grant times of all regions
	var asks []*modelAsk
	asking := map[[3]int]bool{} // region, viewer, cap: an ask in flight
	borrowed := 0
	for now := int64(1); now <= ticks; now++ {
		// Asks and answers move on.
		for _, a := range asks {
			if a.next != now {
				continue
			}
			vi, ci := int(a.transfer>>32&1), int(a.transfer>>33&1)
			if !a.lent || rng.IntN(4) == 0 { // a retry reaches the lender again
				ok, err := engines[a.to].LendWrite(&engine.Write{}, viewers[vi], caps[ci], now, a.transfer)
				if err != nil {
					t.Fatal(err)
				}
				if !ok {
					a.next = -1
					delete(asking, [3]int{a.from, vi, ci})
					continue
				}
				a.lent, a.next = true, now+int64(rng.IntN(6))+1
				continue
			}
			if _, err := engines[a.from].CreditWrite(&engine.Write{}, viewers[vi], caps[ci], a.asked, a.transfer); err != nil {
				t.Fatal(err)
			}
			borrowed++
			a.next = -1
			delete(asking, [3]int{a.from, vi, ci})
		}
		// Each region tries some grants.
		for r := range k {
			for range rng.IntN(3) {
				vi, ci := rng.IntN(len(viewers)), rng.IntN(len(caps))
				var w engine.Write
				vd, err := engines[r].AllowWrite(&w, viewers[vi], now, caps[ci:ci+1])
				if err != nil {
					t.Fatal(err)
				}
				kk := key{viewers[vi], ci}
				if vd.Allowed {
					grants[kk] = append(grants[kk], now)
					continue
				}
				if w.ShareSpent && !asking[[3]int{r, vi, ci}] {
					asking[[3]int{r, vi, ci}] = true
					to := (r + 1 + rng.IntN(k-1)) % k
					id := rng.Uint64()&^(3<<32) | uint64(vi)<<32 | uint64(ci)<<33 | 1
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
				t.Fatalf("tick %d: viewer %s cap %s: %d grants across the regions inside one window, limit %d", now, kk.viewer, caps[kk.c].ID, n, limit)
			}
		}
	}
	if borrowed == 0 {
		t.Fatal("no unit was ever borrowed: the run shows nothing")
	}
}

// TestCheckSeesTheShare: with shares, a Check reports what the region may
// still grant of a strict cap (its share), not what the limit leaves; a
// credit raises it and a soft cap keeps its whole limit.
func TestCheckSeesTheShare(t *testing.T) {
	shares := regionShares(3)
	e := newEngine(t, withShares(shares[0]))
	c := strictCap("c", 5, time.Hour)
	soft := fcap.Cap{Scope: "campaign", ID: "soft", Limit: 5, Window: time.Hour}
	base := shares[0].Base(fcap.ViewerKey("v"), c.Key(), &c, 0)
	remaining := func(now int64, cp fcap.Cap) (int64, bool) {
		t.Helper()
		vds, err := e.Check("v", []fcap.Candidate{{Caps: []fcap.Cap{cp}}}, now, nil)
		if err != nil {
			t.Fatal(err)
		}
		return vds[0].Remaining, vds[0].Allowed
	}
	if left, _ := remaining(10, c); left != base {
		t.Fatalf("a fresh viewer: %d left of the strict cap, want the base %d", left, base)
	}
	for range base {
		mustAllowWrite(t, e, "v", 20, c)
	}
	if left, ok := remaining(30, c); left != 0 || ok {
		t.Fatalf("share spent: Check says %d left, allowed %v", left, ok)
	}
	if _, err := e.CreditWrite(&engine.Write{}, "v", c, 25, 42); err != nil {
		t.Fatal(err)
	}
	if left, ok := remaining(30, c); left != 1 || !ok {
		t.Fatalf("after a credit: Check says %d left, allowed %v; want 1", left, ok)
	}
	if left, _ := remaining(30, soft); left != 5 {
		t.Fatalf("a soft cap: %d left, want its limit 5", left)
	}
}

func mustAllowWrite(t *testing.T, e *engine.Engine, viewer string, now int64, c fcap.Cap) {
	t.Helper()
	var w engine.Write
	vd, err := e.AllowWrite(&w, viewer, now, []fcap.Cap{c})
	if err != nil || !vd.Allowed {
		t.Fatalf("allow %s at %d: %+v %v", viewer, now, vd, err)
	}
}

// TestLoansAndCreditsTravelWithTheViewer: a viewer's state as replication
// ships it (Export, Import on a backup) carries the loans, the credits and
// the transfer ids, so a backup that takes over answers a retried
// transfer with the same loan, grants no unit it lent, and keeps the
// units it borrowed; merged into another region's copy, neither counts
// there.
func TestLoansAndCreditsTravelWithTheViewer(t *testing.T) {
	shares := regionShares(2)
	c := strictCap("c", 4, time.Hour) // bases 2 and 2
	key := fcap.ViewerKey("v")
	lender, borrower := newEngine(t, withShares(shares[0])), newEngine(t, withShares(shares[1]))
	if ok, err := lender.LendWrite(&engine.Write{}, "v", c, 10, 7); err != nil || !ok {
		t.Fatalf("lend: %v %v", ok, err)
	}
	if ok, err := borrower.CreditWrite(&engine.Write{}, "v", c, 9, 7); err != nil || !ok {
		t.Fatalf("credit: %v %v", ok, err)
	}
	failover := func(from *engine.Engine, s *engine.Shares) *engine.Engine {
		t.Helper()
		to := newEngine(t, withShares(s))
		if _, _, err := to.Import(from.Export(key, nil)); err != nil {
			t.Fatal(err)
		}
		return to
	}
	grants := func(e *engine.Engine) int {
		n := 0
		for now := int64(20); now < 30; now++ {
			var w engine.Write
			vd, err := e.AllowWrite(&w, "v", now, []fcap.Cap{c})
			if err != nil {
				t.Fatal(err)
			}
			if vd.Allowed {
				n++
			}
		}
		return n
	}
	lender2 := failover(lender, shares[0])
	if ok, err := lender2.LendWrite(&engine.Write{}, "v", c, 15, 7); err != nil || !ok {
		t.Fatalf("the lender's backup answered the retried transfer %v %v, want its loan", ok, err)
	}
	if n := grants(lender2); n != 1 {
		t.Errorf("the lender's backup granted %d, want 1 (base 2, one lent)", n)
	}
	if n := grants(failover(borrower, shares[1])); n != 3 {
		t.Errorf("the borrower's backup granted %d, want 3 (base 2, one borrowed)", n)
	}
	// The lender's state merged into a third copy of the borrower's
	// region: the loan is not read as the borrower's, nor is the credit
	// read by the lender.
	mixed := newEngine(t, withShares(shares[1]))
	for _, e := range []*engine.Engine{lender, borrower} {
		if _, _, err := mixed.MergeAll(e.Export(key, nil), func(uint64) bool { return true }); err != nil {
			t.Fatal(err)
		}
	}
	if n := grants(mixed); n != 3 {
		t.Errorf("the borrower's copy with the lender's merged in granted %d, want 3", n)
	}
}

// TestTransferIDsArePerRegion: a transfer id one region lent under,
// merged into another region's copy of the viewer, does not make that
// region answer the same id as lent without lending.
func TestTransferIDsArePerRegion(t *testing.T) {
	shares := regionShares(2)
	c := strictCap("c", 4, time.Hour) // bases 2 and 2
	key := fcap.ViewerKey("v")
	a, b := newEngine(t, withShares(shares[0])), newEngine(t, withShares(shares[1]))
	if ok, err := a.LendWrite(&engine.Write{}, "v", c, 10, 7); err != nil || !ok {
		t.Fatalf("lend at a: %v %v", ok, err)
	}
	if _, _, err := b.MergeAll(a.Export(key, nil), func(uint64) bool { return true }); err != nil {
		t.Fatal(err)
	}
	for range 2 { // b lends its two units to transfers 7 and 8
		for _, id := range []uint64{7, 8} {
			if ok, err := b.LendWrite(&engine.Write{}, "v", c, 11, id); err != nil || !ok {
				t.Fatalf("lend %d at b: %v %v", id, ok, err)
			}
		}
	}
	if ok, err := b.LendWrite(&engine.Write{}, "v", c, 12, 9); err != nil || ok {
		t.Fatalf("b lent a third unit of a base of 2 (transfer 7 answered from a's memory?): %v %v", ok, err)
	}
	var w engine.Write
	if vd, err := b.AllowWrite(&w, "v", 13, []fcap.Cap{c}); err != nil || vd.Allowed {
		t.Fatalf("b granted with its base lent: %+v %v", vd, err)
	}
}

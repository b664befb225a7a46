package region

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/proto"
	"github.com/fcap-io/fcap/ring"
)

// fakeLenders are peer regions in memory, one node each, that answer
// ShareAsk from a budget of units per region, remembering transfers.
type fakeLenders struct {
	mu sync.Mutex
	// guarded by mu
	rings   map[string]*ring.Ring // by region
	budget  map[string]int        // units left, by region
	lent    map[uint64]string     // transfer -> the region that lent it
	asks    map[uint64]int        // ShareAsks seen, by transfer
	lose    int                   // answers still to lose (after the loan is made)
	hold    chan struct{}         // when set, asks wait for it to close
	regions [][]string            // the region sets asks named
	clock   int64                 // the borrower's clock: each ask takes a tick
	hang    map[string]bool       // regions whose nodes never answer (a cut WAN)
	hangAsk map[string]bool       // regions whose nodes answer all but ShareAsks
	asked   map[string]int        // ShareAsks received, by region
	topo    map[string]int        // TopologyRequests received, by region
}

func newFakeLenders(t *testing.T, budget map[string]int) *fakeLenders {
	f := &fakeLenders{clock: 1000, hang: map[string]bool{}, hangAsk: map[string]bool{}, asked: map[string]int{}, topo: map[string]int{}, rings: map[string]*ring.Ring{}, budget: budget, lent: map[uint64]string{}, asks: map[uint64]int{}}
	for r := range budget {
		f.rings[r] = buildRing(t, 0, r+"-1")
	}
	return f
}

func (f *fakeLenders) Dial(ctx context.Context, addr string) (Conn, error) {
	region, _, _ := strings.Cut(addr, "-")
	return &lenderConn{f: f, region: region}, nil
}

type lenderConn struct {
	f      *fakeLenders
	region string
}

func (c *lenderConn) Close() error { return nil }

func (c *lenderConn) Call(ctx context.Context, req, resp proto.Message) error {
	f := c.f
	f.mu.Lock()
	hold, hang := f.hold, f.hang[c.region]
	switch req.(type) {
	case *proto.ShareAsk:
		f.asked[c.region]++
		hang = hang || f.hangAsk[c.region]
	case *proto.TopologyRequest:
		f.topo[c.region]++
	}
	f.mu.Unlock()
	if hang {
		<-ctx.Done()
		return ctx.Err()
	}
	if _, ask := req.(*proto.ShareAsk); ask && hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	switch m := req.(type) {
	case *proto.TopologyRequest:
		rg := f.rings[c.region]
		t := resp.(*proto.Topology)
		*t = proto.Topology{Epoch: rg.Epoch(), Partitions: rg.Partitions(), Replicas: rg.Replicas(), Owners: rg.Table()}
		for _, mb := range rg.Members() {
			t.Members = append(t.Members, proto.Member{Name: mb.Name, Addr: mb.Addr, State: uint8(mb.State), Incarnation: mb.Incarnation})
		}
		return nil
	case *proto.ShareAsk:
		f.clock++
		f.asks[m.Transfer]++
		f.regions = append(f.regions, m.Regions)
		given := f.lent[m.Transfer] == c.region
		if !given && f.budget[c.region] > 0 {
			f.budget[c.region]--
			f.lent[m.Transfer] = c.region
			given = true
		}
		if f.lose > 0 {
			f.lose--
			return io.ErrUnexpectedEOF // the answer is lost; the loan stands
		}
		*resp.(*proto.ShareGive) = proto.ShareGive{Epoch: 1, Given: given}
		return nil
	}
	return fmt.Errorf("unexpected %T", req)
}

// credit is one call of EscrowDeps.Credit.
type credit struct {
	viewer   string
	cap      fcap.Cap
	at       int64
	transfer uint64
}

// escrowLinks starts links of region a to the peers of budget (seeds
// "<name>-1:7700") with escrow, and returns them with the credits they
// make.
func escrowLinks(t *testing.T, f *fakeLenders, maxAsks int, reg prometheus.Registerer, mutate ...func(*Config)) (*Links, func() []credit) {
	t.Helper()
	cfg := testConfig()
	for _, m := range mutate {
		m(&cfg)
	}
	cfg.Peers = nil
	for _, name := range []string{"b", "c"} {
		if _, ok := f.budget[name]; ok {
			cfg.Peers = append(cfg.Peers, Peer{Name: name, Seeds: []string{name + "-1:7700"}})
		}
	}
	ls, err := New(cfg, Deps{Engine: newFakeEngine(), Dialer: f, Primary: func(uint64) bool { return true }, PrimaryPartitions: allPrimary, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var credits []credit
	err = ls.EnableEscrow(EscrowDeps{
		Now: func() int64 { f.mu.Lock(); defer f.mu.Unlock(); return f.clock },
		Credit: func(_ context.Context, viewer string, c fcap.Cap, at int64, transfer uint64) error {
			mu.Lock()
			defer mu.Unlock()
			credits = append(credits, credit{viewer, c, at, transfer})
			return nil
		},
		MaxAsks: maxAsks,
	}, reg)
	if err != nil {
		t.Fatal(err)
	}
	ls.Start()
	t.Cleanup(ls.Close)
	return ls, func() []credit {
		mu.Lock()
		defer mu.Unlock()
		return append([]credit(nil), credits...)
	}
}

var escrowCap = fcap.Cap{Scope: "campaign", ID: "c", Limit: 5, Window: time.Hour, Mode: fcap.Strict}

// TestAskRetriesOneTransfer: answers lost after the lender lent are
// retried with the same transfer id, which the lender answers with the
// same loan: one unit lent, one credited, stamped when the ask began;
// the ask names the region set.
func TestAskRetriesOneTransfer(t *testing.T) {
	f := newFakeLenders(t, map[string]int{"b": 3})
	f.lose = askAttempts - 1
	ls, credits := escrowLinks(t, f, 0, nil)
	ls.Ask("v", escrowCap)
	eventually(t, "a credit", func() bool { return len(credits()) == 1 })
	c := credits()[0]
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.asks[c.transfer] != askAttempts || len(f.asks) != 1 {
		t.Errorf("asks by transfer %v: want one transfer asked %d times", f.asks, askAttempts)
	}
	if f.budget["b"] != 2 {
		t.Errorf("b has %d units left of 3 after one transfer retried", f.budget["b"])
	}
	if c.viewer != "v" || c.cap != escrowCap || c.at != 1000 {
		t.Errorf("credit %+v: want viewer v, the cap, stamped at the ask's start (1000, before its %d attempts)", c, askAttempts)
	}
	if got := strings.Join(f.regions[0], ","); got != "a,b" {
		t.Errorf("the ask named regions %q, want a,b", got)
	}
}

// TestAskOneAtATime: while an ask for a viewer and cap is in flight,
// asking again adds nothing; past the table's bound an ask is dropped
// and counted.
func TestAskOneAtATime(t *testing.T) {
	f := newFakeLenders(t, map[string]int{"b": 100})
	hold := make(chan struct{})
	f.hold = hold
	reg := prometheus.NewRegistry()
	ls, credits := escrowLinks(t, f, 2, reg)
	for range 10 {
		ls.Ask("v", escrowCap)
	}
	ls.Ask("w", escrowCap)
	for i := range 5 {
		ls.Ask(fmt.Sprint("x", i), escrowCap) // the table (2) is full
	}
	if got := testutil.ToFloat64(ls.escrow.dropped.WithLabelValues("dropped")); got != 5 {
		t.Errorf("%v asks dropped, want 5", got)
	}
	close(hold)
	eventually(t, "two credits", func() bool { return len(credits()) == 2 })
	eventually(t, "the table empties", func() bool {
		ls.escrow.mu.Lock()
		defer ls.escrow.mu.Unlock()
		return len(ls.escrow.asking) == 0
	})
	if n := len(credits()); n != 2 {
		t.Errorf("%d credits for asks of two viewers", n)
	}
	// Done: the same viewer may ask again.
	ls.Ask("v", escrowCap)
	eventually(t, "a third credit", func() bool { return len(credits()) == 3 })
}

// TestAskNextRegion: a region with nothing to lend is passed over for
// the next; with nothing anywhere nothing is credited.
func TestAskNextRegion(t *testing.T) {
	f := newFakeLenders(t, map[string]int{"b": 0, "c": 1})
	reg := prometheus.NewRegistry()
	ls, credits := escrowLinks(t, f, 0, reg)
	// A viewer whose asks start at b (the first peer).
	v := "v"
	for i := 0; fcap.ViewerKey(v)%2 != 0; i++ {
		v = fmt.Sprint("v", i)
	}
	ls.Ask(v, escrowCap)
	eventually(t, "a credit", func() bool { return len(credits()) == 1 })
	if got := testutil.ToFloat64(ls.escrow.borrowed.WithLabelValues("c")); got != 1 {
		t.Errorf("borrowed from c: %v, want 1", got)
	}
	if lent, borrowed := ls.SharesMoved("c"); lent != 0 || borrowed != 1 {
		t.Errorf("shares moved with c: lent %d borrowed %d", lent, borrowed)
	}
	ls.Ask(v, escrowCap)
	eventually(t, "an ask answered with nothing", func() bool {
		return testutil.ToFloat64(ls.escrow.dropped.WithLabelValues("none")) == 1
	})
	if n := len(credits()); n != 1 {
		t.Errorf("%d credits with no unit left anywhere", n)
	}
}

// TestAskReachableRegionsFirst: a peer region the link cannot reach (it
// never answers) is asked after those it reaches, so an ask does not
// wait out its timeouts when another region has units.
func TestAskReachableRegionsFirst(t *testing.T) {
	f := newFakeLenders(t, map[string]int{"b": 5, "c": 5})
	f.hang["b"] = true
	// b's shipper, once it failed, backs off for a minute: what reaches
	// b after that is the askers'.
	ls, credits := escrowLinks(t, f, 0, nil, func(c *Config) {
		c.Timeout, c.RetryMin, c.RetryMax = 100*time.Millisecond, time.Minute, time.Minute
	})
	eventually(t, "the links find b unreachable and c reachable", func() bool {
		st := ls.Status()
		return !st[0].Reachable && st[1].Reachable
	})
	f.mu.Lock()
	before := f.topo["b"]
	f.mu.Unlock()
	v := "v" // a viewer whose asks would start at b (the first peer)
	for i := 0; fcap.ViewerKey(v)%2 != 0; i++ {
		v = fmt.Sprint("v", i)
	}
	ls.Ask(v, escrowCap)
	eventually(t, "a credit", func() bool { return len(credits()) == 1 })
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.asked["b"] != 0 || f.topo["b"] != before || f.asked["c"] != 1 {
		t.Errorf("asks received: %v, topology requests at b %d after the link found it unreachable (%d before); want c's ask only", f.asked, f.topo["b"], before)
	}
}

// TestAskLearnsAgainARingWithoutOwners: a peer region's ring learned
// from a node that had just restarted (alone, joining) owns nothing.
// The askers learn the ring again instead of keeping it: in the bed, a
// node of region b killed and restarted answered first, and region a's
// asks to b failed "no owner for the viewer" for as long as the test
// waited (a minute).
func TestAskLearnsAgainARingWithoutOwners(t *testing.T) {
	f := newFakeLenders(t, map[string]int{"b": 5})
	f.rings["b"] = buildRingOf(t, 7, []ring.Member{{Name: "b-1", Addr: "b-1:7700", State: ring.Joining, Incarnation: 2}})
	reg := prometheus.NewRegistry()
	ls, credits := escrowLinks(t, f, 0, reg, func(c *Config) { c.TopologyInterval = time.Hour })
	ls.Ask("v", escrowCap)
	eventually(t, "an ask that failed", func() bool {
		return testutil.ToFloat64(ls.escrow.dropped.WithLabelValues("failed")) == 1
	})
	f.mu.Lock()
	f.rings["b"] = buildRing(t, 2, "b-1") // b-1 joined: it owns every partition
	f.mu.Unlock()
	ls.Ask("v", escrowCap)
	eventually(t, "a credit once region b's node owns the viewer", func() bool { return len(credits()) == 1 })
}

package node_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/internal/testwait"
	"github.com/fcap-io/fcap/node"
	"github.com/fcap-io/fcap/node/region"
	"github.com/fcap-io/fcap/proto"
	"github.com/fcap-io/fcap/proto/rpc"
)

// freeAddrs returns n loopback addresses free a moment ago: regions
// that name each other as peers need their addresses before they start.
func freeAddrs(t *testing.T, n int) []string {
	addrs := make([]string, n)
	for i := range addrs {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addrs[i] = ln.Addr().String()
		ln.Close()
	}
	return addrs
}

// escrowRegions starts regions a, b and c, one node each, every one a
// peer of the others, and a client of each.
func escrowRegions(t *testing.T) (map[string][]*node.Node, map[string]*client.Client, map[string]*sync.Map) {
	names := []string{"a", "b", "c"}
	addrs := freeAddrs(t, len(names))
	nodes, clients, regs := map[string][]*node.Node{}, map[string]*client.Client{}, map[string]*sync.Map{}
	for i, name := range names {
		var peers []region.Peer
		for j, other := range names {
			if j != i {
				peers = append(peers, region.Peer{Name: other, Seeds: []string{addrs[j]}})
			}
		}
		regs[name] = &sync.Map{}
		addr := addrs[i]
		nodes[name] = settledCluster(t, "esc"+name, 1, regionNodes(name, regs[name], peers...), func(c *node.Config) { c.DataAddr = addr })
	}
	for _, name := range names {
		clients[name] = newClient(t, nodes[name])
	}
	return nodes, clients, regs
}

// TestEscrowAcrossRegions: three regions, each its own cluster, split a
// strict cap's limit into shares. Clients in all three racing on the same
// viewers never get more than the limit between them; a region whose
// share is spent fails closed at once, borrows a unit from a peer, and a
// later call succeeds, until it holds every grant and the peers, having
// lent all they had, refuse; a retried transfer id is answered with the
// same loan, never a second; a region naming another set of regions is
// refused.
func TestEscrowAcrossRegions(t *testing.T) {
	nodes, clients, regs := escrowRegions(t)
	ctx := context.Background()
	const limit = 5
	strict := fcap.Cap{Scope: "campaign", ID: "esc", Limit: limit, Window: time.Hour, Mode: fcap.Strict}

	allow := func(region, viewer string, c fcap.Cap) bool {
		t.Helper()
		vd, err := clients[region].Allow(ctx, viewer, []fcap.Cap{c})
		if err != nil {
			var pe *proto.Error
			if errors.As(err, &pe) {
				return false // failed closed (a strict grant in flight)
			}
			t.Fatalf("allow in %s: %v", region, err)
		}
		return vd.Allowed && !vd.FailOpen
	}

	t.Run("racing regions never pass the limit", func(t *testing.T) {
		const viewers = 20
		var granted [viewers]atomic.Int64
		var wg sync.WaitGroup
		for _, r := range []string{"a", "b", "c"} {
			wg.Go(func() {
				for round := range 3 * limit {
					for v := range viewers {
						if allow(r, fmt.Sprint("race-", v), strict) {
							granted[v].Add(1)
						}
					}
					_ = round
				}
			})
		}
		wg.Wait()
		total := int64(0)
		for v := range viewers {
			n := granted[v].Load()
			if n > limit {
				t.Errorf("viewer race-%d: %d strict grants across three regions, limit %d", v, n, limit)
			}
			total += n
		}
		if total == 0 {
			t.Fatal("no grant at all: the race shows nothing")
		}
		if metricSum(t, regs["a"], "fcap_strict_refused_total")+metricSum(t, regs["b"], "fcap_strict_refused_total")+metricSum(t, regs["c"], "fcap_strict_refused_total") == 0 {
			t.Error("no strict refusal counted (share_spent)")
		}
	})

	t.Run("a spent region borrows from its peers", func(t *testing.T) {
		const viewer = "borrower"
		c := strict
		c.ID = "borrow"
		got := 0
		testwait.Eventually(t, 60*time.Second, func() bool {
			if allow("a", viewer, c) {
				got++
			}
			return got == limit
		}, "region a never got all %d grants: the peers' shares never arrived", limit)
		if allow("a", viewer, c) {
			t.Fatal("region a granted past the limit")
		}
		for _, r := range []string{"b", "c"} {
			if allow(r, viewer, c) {
				t.Errorf("region %s granted after lending all it had (region a holds all %d)", r, limit)
			}
		}
		if b := metricSum(t, regs["a"], "fcap_region_shares_borrowed_total"); b < limit-2 {
			t.Errorf("region a counts %v units borrowed, want at least %d", b, limit-2)
		}
		// fcapctl status shows them, by peer region.
		var st proto.Status
		if err := rpc.Call(ctx, nodes["a"][0].DataAddr(), &proto.StatusRequest{}, &st); err != nil {
			t.Fatal(err)
		}
		var borrowed uint64
		for _, r := range st.Regions {
			borrowed += r.Borrowed
		}
		if borrowed < limit-2 {
			t.Errorf("region a's status shows %d units borrowed (%+v), want at least %d", borrowed, st.Regions, limit-2)
		}
	})

	t.Run("a retried transfer gets the same loan", func(t *testing.T) {
		const viewer = "retried"
		c := strict
		c.ID, c.Limit = "retry", 6 // bases 2, 2, 2
		ask := &proto.ShareAsk{Region: "a", Regions: []string{"a", "b", "c"}, Viewer: viewer, Cap: c, Transfer: 0xfeed}
		addr := nodes["b"][0].DataAddr()
		before := metricSum(t, regs["b"], "fcap_region_shares_lent_total")
		for range 3 {
			var res proto.ShareGive
			if err := rpc.Call(ctx, addr, ask, &res); err != nil || !res.Given {
				t.Fatalf("share ask at b: %+v %v", res, err)
			}
		}
		if lent := metricSum(t, regs["b"], "fcap_region_shares_lent_total") - before; lent != 1 {
			t.Errorf("b lent %v units for one transfer asked three times", lent)
		}
		// b has one unit of its base left, not none.
		if !allow("b", viewer, c) {
			t.Error("b lent more than the one unit of the transfer")
		}
		if allow("b", viewer, c) {
			t.Error("b granted past its base after lending one unit")
		}
		// Nothing left to lend: another transfer gets nothing.
		var res proto.ShareGive
		ask.Transfer = 0xbeef
		if err := rpc.Call(ctx, addr, ask, &res); err != nil || res.Given {
			t.Errorf("b with its base spent lent: %+v %v", res, err)
		}
	})

	t.Run("another set of regions is refused", func(t *testing.T) {
		ask := &proto.ShareAsk{Region: "a", Regions: []string{"a", "b"}, Viewer: "v", Cap: strict, Transfer: 1}
		var res proto.ShareGive
		err := rpc.Call(ctx, nodes["b"][0].DataAddr(), ask, &res)
		if !errors.Is(err, proto.ErrBadRequest) {
			t.Errorf("an ask naming regions [a b] at a node of [a b c]: %+v %v, want a bad request", res, err)
		}
		if metricSum(t, regs["b"], "fcap_region_set_mismatch_total") == 0 {
			t.Error("the mismatch was not counted")
		}
		// The region link's topology request too: the link stays down.
		var top proto.Topology
		err = rpc.Call(ctx, nodes["b"][0].DataAddr(), &proto.TopologyRequest{Region: "a", Regions: []string{"a", "b"}}, &top)
		if !errors.Is(err, proto.ErrBadRequest) {
			t.Errorf("a region link's topology request naming regions [a b] at a node of [a b c]: %v, want a bad request", err)
		}
		if err := rpc.Call(ctx, nodes["b"][0].DataAddr(), &proto.TopologyRequest{Region: "a", Regions: []string{"a", "b", "c"}}, &top); err != nil || len(top.Members) != 1 {
			t.Errorf("a region link's topology request naming the same regions: %+v %v", top, err)
		}
		if err := rpc.Call(ctx, nodes["b"][0].DataAddr(), &proto.TopologyRequest{}, &top); err != nil {
			t.Errorf("a client's topology request: %v", err)
		}
	})
}

// A node that splits nothing refuses a region link that counts it as a
// region holding a share: one with a region name but no peers (it would
// grant strict caps whole, and the sender its own share and the rest's
// borrowed units: together past the limit), and one of a cluster with no
// region at all. A client's topology request is still answered.
func TestRegionLinkRefusedWhereNothingIsSplit(t *testing.T) {
	ctx := context.Background()
	receiveOnly := settledCluster(t, "recv", 1, regionNodes("c", &sync.Map{}))
	plain := settledCluster(t, "plain", 1)
	for name, n := range map[string]*node.Node{"receive-only region c": receiveOnly[0], "no region": plain[0]} {
		var top proto.Topology
		err := rpc.Call(ctx, n.DataAddr(), &proto.TopologyRequest{Region: "a", Regions: []string{"a", "b", "c"}}, &top)
		if !errors.Is(err, proto.ErrBadRequest) {
			t.Errorf("%s: a region link's topology request naming [a b c]: %v, want a bad request", name, err)
		}
		if err := rpc.Call(ctx, n.DataAddr(), &proto.TopologyRequest{}, &top); err != nil || len(top.Members) != 1 {
			t.Errorf("%s: a client's topology request: %+v %v", name, top, err)
		}
	}
}

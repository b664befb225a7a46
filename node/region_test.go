package node_test

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/internal/testwait"
	"github.com/fcap-io/fcap/node"
	"github.com/fcap-io/fcap/node/nodetest"
	"github.com/fcap-io/fcap/node/region"
	"github.com/fcap-io/fcap/proto"
	"github.com/fcap-io/fcap/proto/rpc"
)

// regionNodes configures a node of region name with peers, fast link
// timings and a small queue (a burst overflows it), and its own metrics
// registry, kept in regs by node name.
func regionNodes(name string, regs *sync.Map, peers ...region.Peer) func(*node.Config) {
	return func(c *node.Config) {
		c.Region.Name, c.Region.Peers = name, peers
		c.Region.BatchInterval = 5 * time.Millisecond
		c.Region.BatchViewers, c.Region.QueueViewers = 8, 32
		c.Region.RetryMin, c.Region.RetryMax = 10*time.Millisecond, 200*time.Millisecond
		reg := prometheus.NewRegistry()
		c.Registerer, c.Gatherer = reg, reg
		regs.Store(c.Name, reg)
	}
}

// metricSum sums a metric's series over the registries in regs.
func metricSum(t *testing.T, regs *sync.Map, name string) float64 {
	t.Helper()
	var sum float64
	regs.Range(func(_, r any) bool {
		mfs, err := r.(*prometheus.Registry).Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != name {
				continue
			}
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
		return true
	})
	return sum
}

// counted is how many impressions region's client sees for viewer under
// c: -1 when the answer was not the owner's.
func counted(ctx context.Context, cl *client.Client, viewer string, c fcap.Cap) int64 {
	res, err := cl.Check(ctx, viewer, []fcap.Candidate{{Caps: []fcap.Cap{c}}})
	if err != nil || len(res.Verdicts) != 1 || res.Verdicts[0].Failed() {
		return -1
	}
	return c.Limit - res.Verdicts[0].Remaining
}

// TestTwoRegions: region a ships its soft changes to region b, whose
// checks see them; a merge shipped twice counts once; a burst past the
// link's queue is caught up with nothing lost; strict impressions stay in
// their region.
func TestTwoRegions(t *testing.T) {
	var regsA, regsB sync.Map
	// b lists a, as every region must list every other (a region that
	// splits nothing refuses links), at an address where nobody listens:
	// this test is about what a ships.
	b := settledCluster(t, "rb", 2, regionNodes("b", &regsB, region.Peer{Name: "a", Seeds: freeAddrs(t, 1)}))
	seedsB := []string{b[0].DataAddr(), b[1].DataAddr()}
	a := settledCluster(t, "ra", 2, regionNodes("a", &regsA, region.Peer{Name: "b", Seeds: seedsB}))
	ca, cb := newClient(t, a), newClient(t, b)
	ctx := context.Background()
	soft := fcap.Cap{Scope: "campaign", ID: "soft", Limit: 1000, Window: time.Hour}
	strict := fcap.Cap{Scope: "campaign", ID: "strict", Limit: 1000, Window: time.Hour, Mode: fcap.Strict}

	record := func(viewers []string, id string, caps ...fcap.Cap) {
		t.Helper()
		items := make([]client.RecordItem, len(viewers))
		for i, v := range viewers {
			items[i] = client.RecordItem{Viewer: v, Impression: fcap.Impression{ID: id + "-" + v, Time: time.Now().UnixMilli(), Caps: caps}}
		}
		for i, ack := range ca.RecordSync(ctx, items) {
			if ack.Err != nil || ack.Status != fcap.Recorded {
				t.Fatalf("record %s in region a: %v %v", viewers[i], ack.Status, ack.Err)
			}
		}
	}
	viewers := func(prefix string, n int) []string {
		vs := make([]string, n)
		for i := range vs {
			vs[i] = fmt.Sprintf("%s-%d", prefix, i)
		}
		return vs
	}
	waitCounted := func(vs []string, c fcap.Cap, want int64) {
		t.Helper()
		testwait.Eventually(t, 60*time.Second, func() bool {
			for _, v := range vs {
				if counted(ctx, cb, v, c) != want {
					return false
				}
			}
			return true
		}, "region b does not count %d for each of %d viewers", want, len(vs))
	}

	t.Run("soft changes reach the other region", func(t *testing.T) {
		vs := viewers("soft", 10)
		record(vs, "one", soft)
		waitCounted(vs, soft, 1)
		record(vs, "two", soft)
		waitCounted(vs, soft, 2)
	})

	t.Run("a merge is idempotent", func(t *testing.T) {
		v := "soft-0" // counted twice in both regions by now
		key := fcap.ViewerKey(v)
		var aOwner *node.Node
		for _, nd := range a {
			if _, owners := nd.Ring().LookupKey(key); nd.Ring().Member(owners[0]).Name == nd.Name() {
				aOwner = nd
			}
		}
		rb := b[0].Ring()
		_, owners := rb.LookupKey(key)
		ownerAddr := rb.Member(owners[0]).Addr
		other := seedsB[0]
		if other == ownerAddr {
			other = seedsB[1]
		}
		m := &proto.RegionMerge{Region: "a", HighWater: time.Now().UnixMilli(), States: aOwner.Engine().Export(key, nil)}
		for range 2 {
			var res proto.RegionMergeResult
			if err := rpc.Call(ctx, ownerAddr, m, &res); err != nil || res.Applied != 1 {
				t.Fatalf("merge at b's owner: %+v, %v", res, err)
			}
		}
		if got := counted(ctx, cb, v, soft); got != 2 {
			t.Errorf("region b counts %d after the same state was shipped twice more, want 2", got)
		}
		var res proto.RegionMergeResult
		if err := rpc.Call(ctx, other, m, &res); err != nil || res.Applied != 0 || len(res.Refused) != 1 || res.Refused[0] != key {
			t.Errorf("merge at a node of b that does not own the viewer: %+v, %v; want it refused by key", res, err)
		}
	})

	// Before the overflow: its catch-up re-ships whole viewers, strict
	// counters included (ARCHITECTURE, "Regions": a viewer's state rides
	// along with any later soft change or catch-up).
	t.Run("strict impressions stay in their region", func(t *testing.T) {
		vs := viewers("strict", 5)
		record(vs, "strict", strict)
		// A soft impression after them, on other viewers, shows the link
		// has shipped what was marked before it.
		marker := viewers("after-strict", 5)
		record(marker, "marker", soft)
		waitCounted(marker, soft, 1)
		// b's check reports what its own share still grants: half the
		// limit (two regions split it), untouched by a's grants.
		for _, v := range vs {
			if got := counted(ctx, cb, v, strict); got != strict.Limit/2 {
				t.Errorf("region b reports %d of %d strict units used or not its own for %s, want %d: its share of the limit, none of it used", got, strict.Limit, v, strict.Limit/2)
			}
		}
	})
	t.Run("overflow catches up", func(t *testing.T) {
		before := metricSum(t, &regsA, "fcap_region_overflow_total")
		vs := viewers("burst", 300) // ten times the queue
		record(vs, "burst", soft)
		waitCounted(vs, soft, 1)
		if after := metricSum(t, &regsA, "fcap_region_overflow_total"); after <= before {
			t.Errorf("a burst of %d viewers past queues of 32: overflow %v, was %v", len(vs), after, before)
		}
		if got := metricSum(t, &regsB, "fcap_region_received_viewers_total"); got < float64(len(vs)) {
			t.Errorf("region b received %v viewer states, want at least %d", got, len(vs))
		}
	})
}

// blackhole accepts connections and never answers: a peer region that
// hangs rather than refuses.
type blackhole struct {
	ln net.Listener
	wg sync.WaitGroup

	mu sync.Mutex
	// conns are the accepted connections; guarded by mu.
	conns []net.Conn
}

func newBlackhole(t *testing.T) *blackhole {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	bh := &blackhole{ln: ln}
	bh.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			bh.mu.Lock()
			bh.conns = append(bh.conns, c)
			bh.mu.Unlock()
		}
	})
	t.Cleanup(func() {
		ln.Close()
		bh.wg.Wait()
		bh.mu.Lock()
		defer bh.mu.Unlock()
		for _, c := range bh.conns {
			c.Close()
		}
	})
	return bh
}

// TestRegionLinkToAHungRegion: a peer region that accepts connections and
// never answers holds up nothing on the request path: records and checks
// in region c are answered by their owners (never by the failure
// policy) while the link stays down with its changes waiting.
func TestRegionLinkToAHungRegion(t *testing.T) {
	bh := newBlackhole(t)
	var regs sync.Map
	hung := func(c *node.Config) { c.Region.Timeout = time.Hour } // a call to it never ends by itself
	nodes := settledCluster(t, "rc", 1, regionNodes("c", &regs, region.Peer{Name: "d", Seeds: []string{bh.ln.Addr().String()}}), hung)
	cl := newClient(t, nodes)
	ctx := context.Background()
	soft := fcap.Cap{Scope: "campaign", ID: "soft", Limit: 1000, Window: time.Hour}
	for i := range 100 {
		v := fmt.Sprintf("hung-%d", i)
		acks := cl.RecordSync(ctx, []client.RecordItem{{Viewer: v, Impression: fcap.Impression{ID: "i", Time: time.Now().UnixMilli(), Caps: []fcap.Cap{soft}}}})
		if acks[0].Err != nil {
			t.Fatalf("record %s with the peer region hung: %v", v, acks[0].Err)
		}
		if got := counted(ctx, cl, v, soft); got != 1 {
			t.Fatalf("check %s with the peer region hung: %d, want 1 from its owner", v, got)
		}
	}
	st, err := rpc.NodeStatus(ctx, nodes[0].DataAddr())
	if err != nil || len(st.Regions) != 1 || st.Regions[0].Name != "d" || st.Regions[0].Reachable {
		t.Errorf("status of the link to the hung region: %+v, %v; want region d, unreachable", st.Regions, err)
	}
	if up := metricSum(t, &regs, "fcap_region_link_up"); up != 0 {
		t.Errorf("link up %v to a region that never answers", up)
	}
	if q := metricSum(t, &regs, "fcap_region_queue_viewers") + metricSum(t, &regs, "fcap_region_overflow_total"); q == 0 {
		t.Error("nothing waits for or overflowed to the hung region")
	}
}

// TestRegionCatchUpAfterARestart: a node with a data dir whose changes
// never left (its peer region hung) ships them once it serves again after
// a restart, though nothing changes them: its queue is not kept, and the
// digest catch-up compares what it is primary of with region b's lane of
// it. Only those: viewers b already held as a counts them are neither
// found differing nor shipped again.
func TestRegionCatchUpAfterARestart(t *testing.T) {
	var regsB sync.Map
	b := settledCluster(t, "rb", 1, regionNodes("b", &regsB, region.Peer{Name: "a", Seeds: freeAddrs(t, 1)})) // see TestTwoRegions
	cb := newClient(t, b)
	bh := newBlackhole(t)
	dir := t.TempDir()
	cfgA := func(peer string, regs *sync.Map) node.Config {
		c := node.DefaultLocalConfig("ra-0")
		c.Logger = nodetest.Quiet
		c.Storage.DataDir = dir
		regionNodes("a", regs, region.Peer{Name: "b", Seeds: []string{peer}})(&c)
		c.Region.Timeout = time.Hour
		return c
	}
	ctx := context.Background()
	soft := fcap.Cap{Scope: "campaign", ID: "soft", Limit: 1000, Window: time.Hour}
	record := func(cl *client.Client, vs []string) {
		t.Helper()
		for _, v := range vs {
			if acks := cl.RecordSync(ctx, []client.RecordItem{{Viewer: v, Impression: fcap.Impression{ID: "i", Time: time.Now().UnixMilli(), Caps: []fcap.Cap{soft}}}}); acks[0].Err != nil {
				t.Fatalf("record %s: %v", v, acks[0].Err)
			}
		}
	}
	shutdown := func(n *node.Node) {
		t.Helper()
		stop, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := n.Shutdown(stop); err != nil {
			t.Fatal(err)
		}
	}
	allCounted := func(vs []string) bool {
		for _, v := range vs {
			if counted(ctx, cb, v, soft) != 1 {
				return false
			}
		}
		return true
	}
	held := make([]string, 10)
	for i := range held {
		held[i] = fmt.Sprintf("held-%d", i)
	}
	vs := make([]string, 20)
	for i := range vs {
		vs[i] = fmt.Sprintf("restart-%d", i)
	}

	// Linked: the held viewers reach b.
	var regs0 sync.Map
	linked := nodetest.Start(t, cfgA(b[0].DataAddr(), &regs0))
	nodetest.Settle(t, []*node.Node{linked}, 60*time.Second)
	record(newClient(t, []*node.Node{linked}), held)
	testwait.Eventually(t, 60*time.Second, func() bool { return allCounted(held) }, "the held viewers did not reach b")
	shutdown(linked)

	// Hung: the others never leave.
	var regs1 sync.Map
	first := nodetest.Start(t, cfgA(bh.ln.Addr().String(), &regs1))
	nodetest.Settle(t, []*node.Node{first}, 60*time.Second)
	record(newClient(t, []*node.Node{first}), vs)
	shutdown(first)
	for _, v := range vs {
		if got := counted(ctx, cb, v, soft); got != 0 {
			t.Fatalf("region b counts %d for %s before a's restart: it was never shipped", got, v)
		}
	}
	received := metricSum(t, &regsB, "fcap_region_received_viewers_total")

	var regs2 sync.Map
	nodetest.Start(t, cfgA(b[0].DataAddr(), &regs2))
	testwait.Eventually(t, 60*time.Second, func() bool { return allCounted(vs) && allCounted(held) }, "the restarted node did not ship what it recovered")
	testwait.Eventually(t, 60*time.Second, func() bool {
		return metricSum(t, &regs2, "fcap_region_catchup_differing_viewers_total") >= float64(len(vs))
	}, "the catch-up did not count the differing viewers")
	if got := metricSum(t, &regs2, "fcap_region_catchup_differing_viewers_total"); got != float64(len(vs)) {
		t.Errorf("the catch-up found %v viewers differing, want the %d never shipped (b held the other %d alike)", got, len(vs), len(held))
	}
	if got := metricSum(t, &regsB, "fcap_region_received_viewers_total") - received; got != float64(len(vs)) {
		t.Errorf("region b merged %v viewer states after the restart, want the %d it lacked", got, len(vs))
	}
}

// TestRegionDigestFindsWhatADeadPrimaryNeverShipped: the primary of some
// viewers of region a never reaches region b (its link leads into a
// black hole) and leaves; the viewers' new primary, which holds them as
// their backup but never had them queued, runs a digest comparison as
// it inherits them (periodic rounds are off here: node/region's tests
// cover them), finds that region b lacks them, and ships them.
func TestRegionDigestFindsWhatADeadPrimaryNeverShipped(t *testing.T) {
	var regsB sync.Map
	b := settledCluster(t, "rdb", 1, regionNodes("b", &regsB, region.Peer{Name: "a", Seeds: freeAddrs(t, 1)})) // see TestTwoRegions
	cb := newClient(t, b)
	bh := newBlackhole(t)
	var regsA sync.Map
	a := settledCluster(t, "rda", 2, regionNodes("a", &regsA), func(c *node.Config) {
		seed := b[0].DataAddr()
		if c.Name == "rda-0" {
			seed = bh.ln.Addr().String()
			c.Region.Timeout = time.Hour
		}
		c.Region.Peers = []region.Peer{{Name: "b", Seeds: []string{seed}}}
		c.Region.DigestInterval = 0
	})
	ctx := context.Background()
	soft := fcap.Cap{Scope: "campaign", ID: "soft", Limit: 1000, Window: time.Hour}
	vs := nodetest.OwnedBy(t, a[0].Ring(), "rda-0", "dead", 10)
	ca := newClient(t, a)
	for _, v := range vs {
		if acks := ca.RecordSync(ctx, []client.RecordItem{{Viewer: v, Impression: fcap.Impression{ID: "i", Time: time.Now().UnixMilli(), Caps: []fcap.Cap{soft}}}}); acks[0].Err != nil {
			t.Fatalf("record %s: %v", v, acks[0].Err)
		}
	}
	testwait.Eventually(t, 60*time.Second, func() bool {
		for _, v := range vs {
			if count(a[1], v, soft) != 1 {
				return false
			}
		}
		return true
	}, "the backup does not hold the viewers")
	for _, v := range vs {
		if got := counted(ctx, cb, v, soft); got != 0 {
			t.Fatalf("region b counts %d for %s: its primary reached b", got, v)
		}
	}
	stop, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := a[0].Shutdown(stop); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, 60*time.Second, func() bool {
		for _, v := range vs {
			if counted(ctx, cb, v, soft) != 1 {
				return false
			}
		}
		return true
	}, "region b never got what the dead primary did not ship")
	if got := metricSum(t, &regsA, "fcap_region_catchup_differing_viewers_total"); got < float64(len(vs)) {
		t.Errorf("%v viewers found differing, want at least the %d the dead primary never shipped: they came another way", got, len(vs))
	}
}

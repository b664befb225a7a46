package node_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/internal/testwait"
	"github.com/fcap-io/fcap/node"
	"github.com/fcap-io/fcap/node/nodetest"
	"github.com/fcap-io/fcap/node/region"
	"github.com/fcap-io/fcap/proto"
	"github.com/fcap-io/fcap/proto/rpc"
)

// regionStatus returns node n's status of its link to peer region name.
func regionStatus(t *testing.T, n *node.Node, name string) proto.RegionStatus {
	t.Helper()
	var st proto.Status
	if err := rpc.Call(context.Background(), n.DataAddr(), &proto.StatusRequest{}, &st); err != nil {
		t.Fatal(err)
	}
	for _, r := range st.Regions {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("%s has no link to region %s", n.Name(), name)
	return proto.RegionStatus{}
}

// retire sends an operator's RetireRegion to n.
func retire(n *node.Node, name string, force bool) (proto.RetireRegionResult, error) {
	var res proto.RetireRegionResult
	err := rpc.Call(context.Background(), n.DataAddr(), &proto.RetireRegion{Region: name, Force: force}, &res)
	return res, err
}

// TestRetireRegion: region a (three nodes) has peers b (up) and c (lost:
// nothing answers at its address). A retire of its own region, of a
// name that is no peer, or of b (reachable) is refused; a retire of c
// through one node reaches the other two by gossip, each retired as of
// its own clock, no earlier than the first; a second retire is
// answered with the first T0. The link to c says retired; strict caps of
// a grow from a's base to a's and half of c's once c's last grants and
// loans aged out (T0+2W), not before.
func TestRetireRegion(t *testing.T) {
	var regsA, regsB sync.Map
	addrs := freeAddrs(t, 2) // a's first node's, and c's, where nothing listens
	aAddr, lost := addrs[0], addrs[1]
	// b lists a and c as every region must (one that splits nothing
	// refuses links).
	b := settledCluster(t, "rtb", 1, regionNodes("b", &regsB,
		region.Peer{Name: "a", Seeds: []string{aAddr}},
		region.Peer{Name: "c", Seeds: []string{lost}}))
	a := settledCluster(t, "rta", 3, regionNodes("a", &regsA,
		region.Peer{Name: "b", Seeds: []string{b[0].DataAddr()}},
		region.Peer{Name: "c", Seeds: []string{lost}}),
		func(c *node.Config) {
			if strings.HasSuffix(c.Name, "-0") {
				c.DataAddr = aAddr
			}
		})
	testwait.Eventually(t, 60*time.Second, func() bool {
		return regionStatus(t, a[0], "b").Reachable && !regionStatus(t, a[0], "c").Reachable
	}, "a's links: b reachable, c not")

	// A strict cap of L=6 over three regions: a's base is 2. What a may
	// grant of a fresh viewer is read off a Check, which asks no peer
	// for a unit (a refused Allow would borrow b's).
	const window = 2 * time.Second
	strict := fcap.Cap{Scope: "campaign", ID: "rt", Limit: 6, Window: window, Mode: fcap.Strict}
	cl := newClient(t, a)
	grants := func(viewer string) int {
		res, err := cl.Check(context.Background(), viewer, []fcap.Candidate{{Caps: []fcap.Cap{strict}}})
		if err != nil || len(res.Verdicts) != 1 || res.Verdicts[0].Failed() {
			t.Fatalf("check %s in a: %+v %v", viewer, res, err)
		}
		return int(res.Verdicts[0].Remaining)
	}
	if n := grants("before"); n != 2 {
		t.Fatalf("a may grant %d of a fresh viewer before the retire, want its base 2", n)
	}

	for _, tc := range []struct{ name, want string }{
		{"a", "own region"}, {"zz", "not a peer region"}, {"b", "reachable"},
	} {
		if _, err := retire(a[0], tc.name, false); !errors.Is(err, proto.ErrBadRequest) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("retire %s: %v, want a refusal saying %q", tc.name, err, tc.want)
		}
	}
	if regionStatus(t, a[0], "b").Retired {
		t.Fatal("a refused retire retired b")
	}
	res, err := retire(a[1], "c", false)
	if err != nil || !res.New {
		t.Fatalf("retire c: %+v %v", res, err)
	}
	t0 := res.AtMillis
	if n := grants("during"); n != 2 {
		t.Errorf("a may grant %d of a fresh viewer before T0+2W, want its old base 2", n)
	}
	if again, err := retire(a[1], "c", false); err != nil || again.New || again.AtMillis != t0 {
		t.Errorf("retire c again: %+v %v, want the first T0 %d", again, err, t0)
	}
	for _, n := range a {
		testwait.Eventually(t, 60*time.Second, func() bool { return regionStatus(t, n, "c").Retired }, "%s did not learn that c was retired", n.Name())
		if st := regionStatus(t, n, "c"); st.RetiredAtMillis < t0 || st.Reachable {
			t.Errorf("%s: c retired as of %d (reachable %v), first retired at %d", n.Name(), st.RetiredAtMillis, st.Reachable, t0)
		}
	}
	// From T0+2W on (on the last node's clock) a's base is 3.
	latest := int64(0)
	for _, n := range a {
		latest = max(latest, regionStatus(t, n, "c").RetiredAtMillis)
	}
	for time.Now().UnixMilli() < latest+2*window.Milliseconds()+50 {
		time.Sleep(10 * time.Millisecond) // waiting out T0+2W, which this test is about
	}
	if n := grants("after"); n != 3 {
		t.Errorf("a may grant %d of a fresh viewer after T0+2W, want 3 (its base and half of c's)", n)
	}
}

// TestRetireRegionSurvivesARestart: a node with a data dir keeps its
// retires across a restart, as of their first T0.
func TestRetireRegionSurvivesARestart(t *testing.T) {
	dir := t.TempDir()
	lost := freeAddrs(t, 2)
	cfg := func() node.Config {
		var regs sync.Map
		c := node.DefaultLocalConfig("rr-0")
		c.Logger = nodetest.Quiet
		c.Storage.DataDir = dir
		regionNodes("a", &regs, region.Peer{Name: "b", Seeds: []string{lost[0]}}, region.Peer{Name: "c", Seeds: []string{lost[1]}})(&c)
		return c
	}
	first := nodetest.Start(t, cfg())
	nodetest.Settle(t, []*node.Node{first}, 60*time.Second)
	res, err := retire(first, "c", false)
	if err != nil {
		t.Fatal(err)
	}
	stop, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := first.Shutdown(stop); err != nil {
		t.Fatal(err)
	}
	again := nodetest.Start(t, cfg())
	st := regionStatus(t, again, "c")
	if !st.Retired || st.RetiredAtMillis != res.AtMillis {
		t.Errorf("after a restart c is %+v, want retired as of %d", st, res.AtMillis)
	}
	if regionStatus(t, again, "b").Retired {
		t.Error("b retired after the restart, never retired before")
	}
}

// TestRetireInOneRegionThenTheOther: regions a and b, peers of each
// other and of c (lost). Once a retired c and b not yet, each names
// another set of regions than the other: their links are refused both
// ways (counted), so neither borrows from the other (fewer grants,
// never more). Once b retired c too, both name {a, b} and their links
// are up again.
func TestRetireInOneRegionThenTheOther(t *testing.T) {
	addrs := freeAddrs(t, 3) // a, b, and c's, where nothing listens
	regs := map[string]*sync.Map{"a": {}, "b": {}}
	nodes := map[string]*node.Node{}
	for i, name := range []string{"a", "b"} {
		other := map[string]string{"a": "b", "b": "a"}[name]
		addr := addrs[i]
		nodes[name] = settledCluster(t, "rt1"+name, 1, regionNodes(name, regs[name],
			region.Peer{Name: other, Seeds: []string{addrs[1-i]}},
			region.Peer{Name: "c", Seeds: []string{addrs[2]}}),
			func(c *node.Config) { c.DataAddr = addr; c.Region.TopologyInterval = 100 * time.Millisecond })[0]
	}
	linked := func(from, to string) bool { return regionStatus(t, nodes[from], to).Reachable }
	testwait.Eventually(t, 60*time.Second, func() bool { return linked("a", "b") && linked("b", "a") }, "a and b linked")

	if _, err := retire(nodes["a"], "c", false); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, 60*time.Second, func() bool { return !linked("a", "b") && !linked("b", "a") },
		"a retired c, b did not: their links are still up")
	if metricSum(t, regs["b"], "fcap_region_set_mismatch_total") == 0 || metricSum(t, regs["a"], "fcap_region_set_mismatch_total") == 0 {
		t.Error("the refused links were not counted as a set mismatch on both sides")
	}
	if _, err := retire(nodes["b"], "c", false); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, 60*time.Second, func() bool { return linked("a", "b") && linked("b", "a") },
		"both retired c: their links did not come back")
}

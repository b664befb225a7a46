package regions

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/test/cluster"
	"github.com/fcap-io/fcap/test/wanproxy"
)

// TestBedSeparateRegions exercises the harness without region links
// (no --region flags): three regions of three nodes come up, each its own
// cluster (three members, not nine), every proxy leads to the node it
// stands in front of, a viewer recorded in one region is unknown in the
// others, and a restarted node's proxies follow it.
func TestBedSeparateRegions(t *testing.T) {
	b := Start(t, Config{Link: wanproxy.Link{Latency: 5 * time.Millisecond}})
	if len(b.Regions) != 3 {
		t.Fatalf("%d regions, want 3", len(b.Regions))
	}
	names := map[string]bool{}
	for _, r := range b.Regions {
		if len(r.Nodes) != 3 {
			t.Fatalf("region %s: %d nodes, want 3", r.Name, len(r.Nodes))
		}
		for i, n := range r.Nodes {
			if want := fmt.Sprintf("%s%d", r.Name, i+1); n.Name != want {
				t.Fatalf("region %s node %d named %q, want %q", r.Name, i, n.Name, want)
			}
			names[n.Name] = true
			active, err := n.ActiveMembers()
			if err != nil || active != 3 {
				t.Fatalf("%s counts %d active members (err %v), want its region's 3", n.Name, active, err)
			}
			if !n.Ready() {
				t.Fatalf("%s not ready", n.Name)
			}
		}
	}
	if len(names) != 9 {
		t.Fatalf("%d distinct node names, want 9", len(names))
	}
	checkProxies(t, b)

	// The regions share nothing: what a counts, b and c do not.
	cp := fcap.Cap{Scope: "campaign", ID: "bed", Limit: 10, Window: time.Hour}
	a := b.Client(t, "a")
	Record(t, a, "viewer-1", Impressions("bed", 2, cp)...)
	for _, r := range b.Regions {
		want := 0
		if r.Name == "a" {
			want = 2
		}
		c := b.Client(t, r.Name)
		cluster.Eventually(t, 30*time.Second, func() bool {
			n, ok := Counted(context.Background(), c, "viewer-1", cp)
			if ok && n != want {
				t.Fatalf("region %s counts %d for viewer-1, want %d", r.Name, n, want)
			}
			return ok
		}, "region %s did not answer for viewer-1", r.Name)
	}

	// A restarted node comes back on a new data port; its proxies follow.
	b.Restart("b", 0)
	cluster.WaitActive(t, b.Region("b").Nodes, 3)
	checkProxies(t, b)
}

// checkProxies asks every node for its status through every proxy in
// front of it: the answer names that node and its region's 3 members,
// and the bytes went through the proxy.
func checkProxies(t *testing.T, b *Bed) {
	t.Helper()
	for _, from := range b.Regions {
		for _, to := range b.Regions {
			if from == to {
				continue
			}
			before := b.Carried(from.Name, to.Name)
			for i, n := range to.Nodes {
				name, members, err := b.Status(from.Name, to.Name, i)
				if err != nil {
					t.Fatalf("status of %s through %s->%s proxy %d: %v", n.Name, from.Name, to.Name, i, err)
				}
				if name != n.Name || members != 3 {
					t.Fatalf("%s->%s proxy %d leads to %s with %d members, want %s with 3", from.Name, to.Name, i, name, members, n.Name)
				}
			}
			// The ring a region link learns through the proxies names
			// the proxies: the link's batches cross the WAN too.
			topo, err := b.Topology(from.Name, to.Name, 0)
			if err != nil {
				t.Fatalf("topology of %s through %s->%s: %v", to.Name, from.Name, to.Name, err)
			}
			if len(topo.Members) != len(to.Nodes) {
				t.Fatalf("topology of %s has %d members, want %d", to.Name, len(topo.Members), len(to.Nodes))
			}
			proxies := b.Proxies(from.Name, to.Name)
			for _, m := range topo.Members {
				i := slices.IndexFunc(to.Nodes, func(n *cluster.Node) bool { return n.Name == m.Name })
				if i < 0 || m.Addr != proxies[i].Addr() {
					t.Fatalf("%s->%s: member %s at %s, want its proxy (node %d of %d)", from.Name, to.Name, m.Name, m.Addr, i, len(to.Nodes))
				}
			}
			if after := b.Carried(from.Name, to.Name); after <= before {
				t.Fatalf("the %s->%s proxies carried no bytes for the status calls", from.Name, to.Name)
			}
		}
	}
}

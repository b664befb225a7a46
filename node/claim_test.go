package node

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/internal/testwait"
	"github.com/fcap-io/fcap/ring"
)

// TestClaimedPartitionGetsSurvivorsCopies: a node that gives up waiting
// for a hand-over and claims a partition with what it holds asks the other
// holders for their copies, so a count only they kept comes back.
func TestClaimedPartitionGetsSurvivorsCopies(t *testing.T) {
	nodes := startNodes(t, "claim", 2)
	testwait.Eventually(t, 20*time.Second, func() bool {
		return len(nodes[0].Ring().Members()) == 2 && len(nodes[1].Ring().Members()) == 2 && nodes[0].Ready() && nodes[1].Ready()
	}, "cluster of 2 did not converge")

	a, b := nodes[0], nodes[1]
	const viewer = "claimed-viewer"
	capc := fcap.Cap{Scope: "campaign", ID: "c", Limit: 10, Window: fcap.MaxWindow}
	// A count only a holds: written to its engine directly, as if its
	// replication to b had not run yet.
	if _, err := a.engine.Allow(viewer, time.Now().UnixMilli(), capc); err != nil {
		t.Fatal(err)
	}
	if _, ok := b.engine.Viewer(viewer); ok {
		t.Fatal("b holds the viewer before the claim: the test proves nothing")
	}
	p := ring.PartitionOf(fcap.ViewerKey(viewer), b.repl.Partitions())
	b.repl.Await(p, time.Now().Add(-time.Hour))
	b.repl.ClaimStale(context.Background(), time.Second)
	if !b.repl.Holds(p) {
		t.Fatal("the partition was not claimed")
	}
	testwait.Eventually(t, 10*time.Second, func() bool {
		st, ok := b.engine.Viewer(viewer)
		return ok && len(st.Keys) == 1 && len(st.Keys[0].Times) == 1
	}, "the claimed partition never received the survivor's count")
}

// startNodes starts n in-process nodes named prefix-0.. that join the
// first, each config changed by mutate, stopped when the test ends; it
// does not wait for them to settle. (node/nodetest does this for tests
// outside the package; it imports node, so these cannot use it.)
func startNodes(t *testing.T, prefix string, n int, mutate ...func(*Config)) []*Node {
	t.Helper()
	var nodes []*Node
	for i := range n {
		cfg := DefaultLocalConfig(fmt.Sprintf("%s-%d", prefix, i))
		cfg.Logger = slog.New(slog.DiscardHandler)
		if i > 0 {
			cfg.Membership.Seeds = []string{nodes[0].GossipAddr()}
		}
		for _, m := range mutate {
			m(&cfg)
		}
		nd, err := Start(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			nd.Shutdown(ctx)
		})
		nodes = append(nodes, nd)
	}
	return nodes
}

package node

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/internal/testwait"
	"github.com/fcap-io/fcap/ring"
)

// TestSkippedRingRelaysTheHandOver: nodes that change rings together may
// pass over one. In CI three nodes forming a cluster went: A primary of
// p; a ring (B primary) that C saw and B passed over; C primary. A
// handed p over to B; B, never p's primary in its own rings, sent C
// nothing; C waited for B's hand-over until it claimed p without it, 10
// s later. B now relays the hand-over it received: its whole copy, then
// the marker, to C asking it (the expected sender), or asking every
// member when the one it expects does not send it (a skipped ring the
// other way round: the expected sender handed the partition to a node
// that passed over being its primary). Here b, p's backup, holds p's
// hand-over from an earlier primary and a count that one wrote (written
// to b's engine, as its hand-over would have brought it); a, p's
// primary, waits for c's hand-over, which c, never given one, does not
// send. a gets p with the count from b, without claiming it.
func TestSkippedRingRelaysTheHandOver(t *testing.T) {
	// Mostly waiting (on gossip, on throttled transfers) with a cluster of
	// its own (ports :0, no package state): it waits beside the others.
	t.Parallel()
	nodes := startNodes(t, "relay", 3)
	testwait.Eventually(t, 20*time.Second, func() bool {
		for _, n := range nodes {
			if len(n.Ring().Members()) != 3 || !n.Ready() {
				return false
			}
		}
		return true
	}, "cluster of 3 did not converge")
	// A viewer of a partition a is primary of and b, its backup, never
	// was; c is not its owner. (Either of the others may be that b.)
	a := nodes[0]
	var b, c *Node
	var viewer string
	var p int
	for i := 0; viewer == ""; i++ {
		if i > 100_000 {
			t.Fatal("no partition with a primary and a backup that never was its primary")
		}
		v := fmt.Sprintf("relayed-viewer-%d", i)
		q := ring.PartitionOf(fcap.ViewerKey(v), a.repl.Partitions())
		owners := a.Ring().Owners(q)
		if len(owners) != 2 || a.Ring().Member(owners[0]).Name != a.cfg.Name {
			continue
		}
		for _, pair := range [][2]*Node{{nodes[1], nodes[2]}, {nodes[2], nodes[1]}} {
			if a.Ring().Member(owners[1]).Name == pair[0].cfg.Name && !pair[0].repl.WasPrimary(q) && pair[0].repl.Holds(q) {
				b, c, viewer, p = pair[0], pair[1], v, q
			}
		}
	}
	capc := fcap.Cap{Scope: "campaign", ID: "c", Limit: 10, Window: fcap.MaxWindow}
	if _, err := b.engine.Allow(viewer, time.Now().UnixMilli(), capc); err != nil {
		t.Fatal(err)
	}
	if _, ok := a.engine.Viewer(viewer); ok {
		t.Fatal("a holds the viewer before the relay: the test proves nothing")
	}
	// Claims a may have made while the three formed the cluster (a wait
	// that outlived SyncTimeout on a busy machine) are not this test's:
	// what counts is a claim from here on.
	claimedBefore := testutil.ToFloat64(a.metrics.Claimed)
	b.repl.ReceiveHandoff("relay-earlier", p)
	a.repl.AwaitHandoff(p, c.cfg.Name, time.Now())
	testwait.Eventually(t, 60*time.Second, func() bool { return a.repl.Holds(p) }, "a never got the partition")
	if c := testutil.ToFloat64(a.metrics.Claimed) - claimedBefore; c != 0 {
		t.Fatalf("a claimed %v partitions without their hand-over; b should have relayed it", c)
	}
	st, ok := a.engine.Viewer(viewer)
	if !ok || len(st.Keys) != 1 || len(st.Keys[0].Times) != 1 {
		t.Fatalf("a got the partition without the count b held: %+v", st)
	}
}

package node

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/ring"
)

// TestSkippedRingRelaysTheHandOver: nodes that change rings together may
// pass over one. In CI three nodes forming a cluster went: A primary of
// p; a ring (B primary) that C saw and B passed over; C primary. A
// handed p over to B; B, never p's primary in its own rings, sent C
// nothing; C waited for B's hand-over until it claimed p without it, 10
// s later. B now relays the hand-over it received: its whole copy, then
// the marker. Here b, p's backup, holds p's hand-over from an earlier
// primary and a count that one wrote (written to b's engine, as its
// hand-over would have brought it); a, p's primary, waits for b's
// hand-over. a gets p with the count, without claiming it.
func TestSkippedRingRelaysTheHandOver(t *testing.T) {
	nodes := startNodes(t, "relay", 2)
	waitUntil(t, 20*time.Second, func() bool {
		return len(nodes[0].Ring().Members()) == 2 && len(nodes[1].Ring().Members()) == 2 && nodes[0].Ready() && nodes[1].Ready()
	}, "cluster of 2 did not converge")
	a, b := nodes[0], nodes[1]

	// A viewer of a partition a is primary of and b, its backup, never was.
	var viewer string
	var p int
	for i := 0; viewer == ""; i++ {
		v := "relayed-viewer-" + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676%26))
		q := ring.PartitionOf(ring.ViewerKey(v), b.repl.Partitions())
		if owners := b.Ring().Owners(q); len(owners) == 2 && b.Ring().Member(owners[0]).Name == a.cfg.Name && !b.repl.WasPrimary(q) && b.repl.Holds(q) {
			viewer, p = v, q
		}
		if i > 100_000 {
			t.Fatal("no partition with a primary and a backup that never was its primary")
		}
	}
	capc := fcap.Cap{Scope: "campaign", ID: "c", Limit: 10, Window: 1 << 40}
	if _, err := b.engine.Allow(viewer, time.Now().UnixMilli(), capc); err != nil {
		t.Fatal(err)
	}
	if _, ok := a.engine.Viewer(viewer); ok {
		t.Fatal("a holds the viewer before the relay: the test proves nothing")
	}
	b.repl.ReceiveHandoff("relay-earlier", p)
	a.repl.AwaitHandoff(p, b.cfg.Name, time.Now())
	waitUntil(t, 60*time.Second, func() bool { return a.repl.Holds(p) }, "a never got the partition")
	if c := testutil.ToFloat64(a.metrics.Claimed); c != 0 {
		t.Fatalf("a claimed %v partitions without their hand-over; b should have relayed it", c)
	}
	st, ok := a.engine.Viewer(viewer)
	if !ok || len(st.Keys) != 1 || len(st.Keys[0].Times) != 1 {
		t.Fatalf("a got the partition without the count b held: %+v", st)
	}
}

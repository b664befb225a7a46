package node

import (
	"testing"
	"time"

	"github.com/fcap-io/fcap/internal/testwait"
	"github.com/fcap-io/fcap/ring"
)

// TestJoinerNeverBootstrapsFromAStaleRing: a node told to join others may
// claim authority over partitions (a fresh cluster, nobody Active) only by
// the ring it is planning. Gossip can already count the members it joined
// while that ring, built a moment before, holds the node alone and nobody
// Active; judged by gossip, the joiner claimed every partition empty and
// turned Active without a transfer (TestThrottledJoinKeepsStrictWritesFlowing
// caught it 1 run in 8). Here a joined node is handed exactly such a ring.
func TestJoinerNeverBootstrapsFromAStaleRing(t *testing.T) {
	nodes := startNodes(t, "boot", 3)
	testwait.Eventually(t, 30*time.Second, func() bool {
		for _, nd := range nodes {
			if len(nd.Ring().Members()) != 3 || nd.Ring().ActiveMembers() != 3 || !nd.Ready() {
				return false
			}
		}
		return true
	}, "cluster of 3 did not converge")
	b := nodes[2]
	real := b.Ring()
	var notMine []int // partitions b neither owns nor holds
	for p := range b.repl.Partitions() {
		if real.Rank(p, b.Name()) < 0 && !b.repl.Holds(p) {
			notMine = append(notMine, p)
		}
	}
	if len(notMine) == 0 {
		t.Fatal("b owns every partition: the test proves nothing")
	}
	// The ring b would have built before the others arrived: b alone,
	// Joining, nobody Active.
	owners := make([]uint16, real.Partitions()*real.Replicas())
	for i := range owners {
		owners[i] = ring.NoOwner
	}
	self := real.Member(mustFind(t, real, b.Name()))
	self.State = ring.Joining
	stale, err := ring.FromTable(real.Epoch()+1, real.Partitions(), real.Replicas(), []ring.Member{self}, owners)
	if err != nil {
		t.Fatal(err)
	}
	b.ringMu.Lock()
	_, start := b.repl.OnRing(stale)
	start()
	b.ringMu.Unlock()
	claimed := 0
	for _, p := range notMine {
		if b.repl.Holds(p) {
			claimed++
		}
	}
	b.replan() // back to the real ring before the cleanup
	if claimed > 0 {
		t.Fatalf("a joined node planning a ring that holds only itself claimed %d partitions it never received", claimed)
	}
}

func mustFind(t *testing.T, r *ring.Ring, name string) uint16 {
	t.Helper()
	i, ok := r.Find(name)
	if !ok {
		t.Fatalf("%s not in the ring", name)
	}
	return i
}

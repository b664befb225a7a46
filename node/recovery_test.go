package node

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/internal/testwait"
	"github.com/fcap-io/fcap/node/wal"
	"github.com/fcap-io/fcap/ring"
)

// TestRestartOffersWhatABackupRecovered: a soft write a backup took while
// standing in for its owner, logged but not yet replicated when the whole
// cluster was killed, came back on the backup's disk and never reached the
// primary, which answers for the viewer: CI lost 2 of 1,003 soft Allows so
// (TestWholeClusterKill9DefaultFsync). A node that recovered state offers
// the partitions it backs to their primaries once it is Active. Here b
// logs a count for a viewer a is primary of without replicating it (as a
// stand-in write cut short), both stop, a comes back first and forms the
// cluster alone (so no transfer from b could carry the count), then b
// joins: a must count the viewer.
func TestRestartOffersWhatABackupRecovered(t *testing.T) {
	// Mostly waiting (on gossip, on throttled transfers) with a cluster of
	// its own (ports :0, no package state): it waits beside the others.
	t.Parallel()
	base := t.TempDir()
	durable := func(c *Config) {
		c.Storage.DataDir = filepath.Join(base, c.Name)
		c.Storage.Fsync = wal.Always
	}
	nodes := startNodes(t, "offer", 2, durable)
	testwait.Eventually(t, 20*time.Second, func() bool {
		return len(nodes[0].Ring().Members()) == 2 && len(nodes[1].Ring().Members()) == 2 && nodes[0].Ready() && nodes[1].Ready()
	}, "cluster of 2 did not converge")
	a, b := nodes[0], nodes[1]
	var viewer string
	for i := 0; viewer == ""; i++ {
		v := fmt.Sprintf("offered-viewer-%d", i)
		if owners := a.Ring().Owners(ring.PartitionOf(fcap.ViewerKey(v), a.repl.Partitions())); len(owners) == 2 && a.Ring().Member(owners[0]).Name == a.cfg.Name {
			viewer = v
		}
	}
	capc := fcap.Cap{Scope: "campaign", ID: "c", Limit: 10, Window: fcap.MaxWindow}
	if _, err := b.engine.Allow(viewer, time.Now().UnixMilli(), capc); err != nil {
		t.Fatal(err)
	}
	b.durable.Wait(b.logChange(fcap.ViewerKey(viewer)))
	if held(a, viewer) {
		t.Fatal("a holds the viewer before the restart: the test proves nothing")
	}
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			n.Shutdown(ctx)
		})
	}
	wg.Wait()

	a = startNodes(t, "offer", 1, durable)[0]
	testwait.Eventually(t, 20*time.Second, a.Ready, "a did not form a cluster alone")
	if held(a, viewer) {
		t.Fatal("a holds the viewer before b is back: the test proves nothing")
	}
	startNodes(t, "offer", 1, func(c *Config) { c.Name = "offer-1"; c.Membership.Seeds = []string{a.GossipAddr()} }, durable) // b
	testwait.Eventually(t, 60*time.Second, func() bool { return held(a, viewer) }, "the count b recovered never reached a, the viewer's primary")
}

// held reports whether the node's engine counts one impression of the
// viewer.
func held(n *Node, viewer string) bool {
	st, ok := n.engine.Viewer(viewer)
	return ok && len(st.Keys) == 1 && len(st.Keys[0].Times) == 1
}

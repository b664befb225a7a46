package node

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/fcap-io/fcap/ring"
)

// TestTransferBeforeTheRingShowsOwnership: a whole partition (its Done)
// that reaches a node before the node's own ring names it an owner is
// remembered, so when the ring catches up the node holds the partition
// at once instead of waiting and pulling it again. Not when no transfer
// came, nor when the janitor dropped the partition's state in between.
func TestTransferBeforeTheRingShowsOwnership(t *testing.T) {
	var nodes []*Node
	for i := range 3 {
		cfg := DefaultLocalConfig(fmt.Sprintf("early-%d", i))
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
		if i > 0 {
			cfg.Membership.Seeds = []string{nodes[0].GossipAddr()}
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
	waitUntil(t, 30*time.Second, func() bool {
		for _, nd := range nodes {
			r := nd.Ring()
			if r.ActiveMembers() != 3 || !nd.Ready() || r.Epoch() != nodes[0].Ring().Epoch() {
				return false
			}
		}
		return true
	}, "the three nodes did not settle on one ring")

	c := nodes[2]
	c.stopSweep() // no replans of its own from here: the test drives them
	r := c.repl.prev
	P, R := r.Partitions(), r.Replicas()
	var free []int
	for p := range P {
		if r.Rank(p, c.cfg.Name) < 0 {
			free = append(free, p)
		}
	}
	if len(free) < 3 {
		t.Fatalf("%s owns all but %d partitions", c.cfg.Name, len(free))
	}
	early, none, dropped := free[0], free[1], free[2]
	from := r.Member(r.Owners(early)[0]).Name

	// Transfers of two partitions arrive; the replan a receipt causes
	// runs on the old ring, where c owns neither.
	c.repl.received(from, []uint32{uint32(early), uint32(dropped)}, nil)
	c.repl.onRing(r)
	if c.repl.parts[early].have.Load() {
		t.Fatal("a partition this node does not own is marked held")
	}
	c.repl.parts[dropped].lostAt.Store(-1) // the janitor dropped its state (what janitor() records)

	// c's ring catches up: it becomes the last backup of all three.
	owners := append([]uint16(nil), r.Table()...)
	ci, _ := r.Find(c.cfg.Name)
	for _, p := range []int{early, none, dropped} {
		owners[p*R+R-1] = ci
	}
	next, err := ring.FromTable(r.Epoch()+1, P, R, r.Members(), owners)
	if err != nil {
		t.Fatal(err)
	}
	c.repl.onRing(next)
	for _, tc := range []struct {
		name string
		p    int
		held bool
	}{{"transferred early", early, true}, {"never transferred", none, false}, {"transferred, then dropped", dropped, false}} {
		part := &c.repl.parts[tc.p]
		if got := part.have.Load(); got != tc.held {
			t.Errorf("%s (partition %d): held %v, want %v", tc.name, tc.p, got, tc.held)
		}
		if waiting := part.waitSince.Load() != 0; waiting == tc.held {
			t.Errorf("%s (partition %d): waiting %v, want %v", tc.name, tc.p, waiting, !tc.held)
		}
	}
}

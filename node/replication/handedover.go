package replication

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/fcap-io/fcap/proto"
	"github.com/fcap-io/fcap/ring"
)

// A drain is over only when the new owners serve what the draining node
// owned: after it leaves the gossip pool, it asks every member it leaves
// behind until each one's ring is without it and none waits for a
// partition (a transfer or a hand-over). Until then clients may still be
// refused, so "fcapctl drain" must not report success; if the drain's
// deadline passes first, the drain fails and says which node still
// waits for what.

// HandedOver polls the members of ring x other than this node until
// every one of them has a ring without this node and no partition it
// waits for, or ctx ends; then it returns an error naming those that
// have not.
func (r *Replicator) HandedOver(ctx context.Context, x *ring.Ring) error {
	var peers []ring.Member
	for _, m := range x.Members() {
		if m.Name != r.cfg.Name && m.State.Owns() {
			peers = append(peers, m)
		}
	}
	sort.Slice(peers, func(i, j int) bool { return peers[i].Name < peers[j].Name })
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		var waiting []string
		for _, m := range peers {
			if why := r.peerWaits(ctx, m); why != "" {
				waiting = append(waiting, m.Name+": "+why)
			}
		}
		if len(waiting) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("hand-over not confirmed: %s", strings.Join(waiting, "; "))
		case <-tick.C:
		}
	}
}

// peerWaits asks a member whether it is done with this node's drain: ""
// when its ring no longer holds this node and it waits for no partition,
// otherwise why not.
func (r *Replicator) peerWaits(ctx context.Context, m ring.Member) string {
	var topo proto.Topology
	if err := r.peers.Call(ctx, m.Addr, &proto.TopologyRequest{}, &topo); err != nil {
		return fmt.Sprintf("unreachable (%v)", err)
	}
	for _, x := range topo.Members {
		if x.Name == r.cfg.Name {
			return "its ring still holds " + r.cfg.Name
		}
	}
	var st proto.Status
	if err := r.peers.Call(ctx, m.Addr, &proto.StatusRequest{}, &st); err != nil {
		return fmt.Sprintf("unreachable (%v)", err)
	}
	if st.Syncing > 0 {
		return fmt.Sprintf("waits for %d partitions", st.Syncing)
	}
	return ""
}

// AwaitSent waits until ready reports the hand-overs planned (the node's
// ring shows it Leaving) and nothing planned is left to send, or ctx
// ends; then it says what was left.
func (r *Replicator) AwaitSent(ctx context.Context, ready func() bool) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		q, _ := r.Queued()
		if ready() && r.Handing() == 0 && q == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			r.log.Warn("drain: hand-over unfinished, leaving anyway", "handing", r.Handing(), "queued", q)
			return fmt.Errorf("%d partition transfers unsent and %d changes unreplicated when the drain's time ran out", r.Handing(), q)
		case <-tick.C:
		}
	}
}

// Flush waits until no change is queued for any peer, for d at most and
// not past ctx.
func (r *Replicator) Flush(ctx context.Context, d time.Duration) {
	for until := time.Now().Add(d); time.Now().Before(until) && ctx.Err() == nil; time.Sleep(10 * time.Millisecond) {
		if q, _ := r.Queued(); q == 0 {
			return
		}
	}
}

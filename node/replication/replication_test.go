package replication

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fcap-io/fcap/proto"
	"github.com/fcap-io/fcap/ring"
)

// form forms a fresh cluster of the named nodes: a ring with all of
// them Joining (nobody holds anything, so each is the authority of what
// it will own), then the ring with all of them Active, whose transfers
// it waits for.
func (c *cluster) form(names ...string) *ring.Ring {
	c.t.Helper()
	joining := map[string]ring.State{}
	for _, n := range names {
		joining[n] = ring.Joining
	}
	c.onRing(c.ring(joining, names...))
	x := c.ring(nil, names...)
	c.onRing(x)
	c.settled(x)
	return x
}

// settled waits until every member of x holds what it owns in x and
// nothing is queued or being sent.
func (c *cluster) settled(x *ring.Ring) {
	c.t.Helper()
	eventually(c.t, "every owner holds its partitions and nothing is left to send", func() bool {
		for _, m := range x.Members() {
			n := c.nodes[m.Name]
			q, _ := n.r.Queued()
			if n.r.Missing() > 0 || n.r.Handing() > 0 || q > 0 || n.r.UnderReplicated() > 0 {
				return false
			}
		}
		return true
	})
}

func TestPusherAndHolders(t *testing.T) {
	c := newCluster(t, nil, "a", "b", "c")
	ab := c.ring(nil, "a", "b")
	abc := c.ring(nil, "a", "b", "c")
	for p := range c.rcfg.Partitions {
		if got, want := pusher(ab, abc, p), names(ab, p)[0]; got != want {
			t.Errorf("partition %d: pusher %q, want the previous primary %q", p, got, want)
		}
		if got, want := pusher(nil, ab, p), names(ab, p)[0]; got != want {
			t.Errorf("partition %d, first ring: pusher %q, want the primary %q", p, got, want)
		}
		hs := holders(ab, abc, p, "c")
		if len(hs) != 2 || hs[0].Name != names(ab, p)[0] || hs[1].Name != names(ab, p)[1] {
			t.Errorf("partition %d: holders %v, want the previous owners %v first", p, hs, names(ab, p))
		}
	}
	// A restarted member (a new incarnation) pushes nothing: it holds
	// nothing.
	c.incs["a"]++
	ab2 := c.ring(nil, "a", "b")
	for p := range c.rcfg.Partitions {
		if got := pusher(ab, ab2, p); got != "b" {
			t.Errorf("partition %d: pusher %q after a restarted, want b", p, got)
		}
	}
}

func TestPlanTargetsAndReplication(t *testing.T) {
	c := newCluster(t, nil, "a", "b")
	x := c.form("a", "b")
	for p := range c.rcfg.Partitions {
		owners := names(x, p)
		prim, back := c.nodes[owners[0]], c.nodes[owners[1]]
		if got := namesOf(prim.plan.Load().targets[p]); !slices.Equal(got, []string{back.name}) {
			t.Fatalf("partition %d: primary %s targets %v, want [%s]", p, prim.name, got, back.name)
		}
		if got := namesOf(back.plan.Load().targets[p]); len(got) != 0 {
			t.Fatalf("partition %d: backup %s targets %v, want none", p, back.name, got)
		}
		if got := namesOf(back.plan.Load().standIn[p]); !slices.Equal(got, []string{prim.name}) {
			t.Fatalf("partition %d: backup %s stands in towards %v, want [%s]", p, back.name, got, prim.name)
		}
	}
	p := 3
	owners := names(x, p)
	v := c.viewerIn(p, "plan")
	var key uint64
	for i := range 5 {
		key = c.record(owners[0], v, string(rune('a'+i)))
	}
	eventually(t, "the backup's copy counts what the primary's does", func() bool {
		return c.digest(owners[1], key) == c.digest(owners[0], key)
	})
	if c.digest(owners[1], key) == 0 {
		t.Fatal("the backup counts nothing")
	}
}

// pairOwning forms a two-node cluster and returns it with partition p's
// owners (primary first) and the primary.
func pairOwning(t *testing.T, p int) (*cluster, []string, *memNode) {
	c := newCluster(t, nil, "a", "b")
	owners := names(c.form("a", "b"), p)
	return c, owners, c.nodes[owners[0]]
}

func TestWaitSynced(t *testing.T) {
	p := 5
	c, owners, prim := pairOwning(t, p)
	key := c.record(owners[0], c.viewerIn(p, "strict"), "i1")
	if err := prim.plan.Load().WaitSynced(key, p, 10*time.Second); err != nil {
		t.Fatalf("WaitSynced with the backup reachable: %v", err)
	}
	if c.digest(owners[1], key) != c.digest(owners[0], key) {
		t.Fatal("WaitSynced returned before the backup applied the write")
	}
	c.net.partition(owners[0], owners[1])
	key = c.record(owners[0], c.viewerIn(p, "strict"), "i2")
	if err := prim.plan.Load().WaitSynced(key, p, 10*time.Second); err == nil {
		t.Fatal("WaitSynced succeeded with the link to the backup cut")
	}
}

// TestWaitSyncedPastTheBacklog: a change that does not fit in a peer's
// set of changed viewers queues its partition's whole transfer, which
// the sender sends after it answers the strict writers waiting on that
// flush. WaitSynced must then fail (the client fails closed), not be
// acknowledged before the backup has the write; the transfer still
// delivers it.
func TestWaitSyncedPastTheBacklog(t *testing.T) {
	p := 5
	c, owners, prim := pairOwning(t, p)
	rep := prim.r.peer(owners[1])
	if rep == nil {
		t.Fatalf("%s has no replica of %s", owners[0], owners[1])
	}
	rep.mu.Lock()
	rep.maxDirty = 0 // every change overflows
	rep.mu.Unlock()
	key := c.record(owners[0], c.viewerIn(p, "backlog"), "i1")
	if err := prim.plan.Load().WaitSynced(key, p, 10*time.Second); err == nil {
		t.Fatal("WaitSynced acknowledged a write that overflowed the backlog (queued as a transfer sent after the answer)")
	}
	errs := prim.plan.Load().WaitSyncedAll([]Synced{{Key: key, Partition: p}}, 10*time.Second)
	if errs[0] == nil {
		t.Fatal("WaitSyncedAll acknowledged a write that overflowed the backlog")
	}
	eventually(t, "the transfer brings the backup the write", func() bool {
		return c.digest(owners[1], key) == c.digest(owners[0], key)
	})
}

func TestPushWholePartition(t *testing.T) {
	c := newCluster(t, nil, "a", "b")
	c.form("a")
	var keys []uint64
	for p := range c.rcfg.Partitions {
		for i := range 3 {
			keys = append(keys, c.record("a", c.viewerIn(p, string(rune('x'+i))), "i"))
		}
	}
	// b joins: a pushes it every partition it will own. The first
	// pushes are lost, the answer to one more is lost too (b applies it
	// twice), so a retries.
	c.net.cutLink("a", "b")
	c.net.setFault("a", "b", fault{drop: 2, lose: 1, only: proto.TypeReplicate})
	joining := c.ring(map[string]ring.State{"b": ring.Joining}, "a", "b")
	c.onRing(joining)
	b := c.nodes["b"]
	future := b.r.plan.Load().future
	want := 0
	for p := range c.rcfg.Partitions {
		if future.Rank(p, "b") >= 0 {
			want++
		}
	}
	if got := b.r.Missing(); got != want {
		t.Fatalf("b misses %d partitions before any push, want %d", got, want)
	}
	eventually(t, "a fails to reach b", func() bool { return value(c.nodes["a"].metrics.Errors) > 0 })
	if b.r.Missing() != want {
		t.Fatal("b holds partitions while the link from a is cut")
	}
	c.net.heal("a", "b")
	eventually(t, "b holds every partition it will own", func() bool { return b.r.Missing() == 0 })
	for _, k := range keys {
		if future.Rank(ring.PartitionOf(k, c.rcfg.Partitions), "b") < 0 {
			continue
		}
		if c.digest("b", k) == 0 || c.digest("b", k) != c.digest("a", k) {
			t.Fatalf("viewer %x: b's copy differs from a's after the push", k)
		}
	}
	// a counts a transfer once the answer to its last marker is back,
	// which may be just after b holds the partition.
	eventually(t, fmt.Sprintf("a counts at least %d transfers", want), func() bool { return c.nodes["a"].r.Transfers() >= int64(want) })
	eventually(t, "b is told its holdings changed", func() bool { return b.holdings.Load() > 0 })
}

func TestHandoffFence(t *testing.T) {
	c := newCluster(t, nil, "a", "b")
	c.form("a")
	joining := c.ring(map[string]ring.State{"b": ring.Joining}, "a", "b")
	c.onRing(joining)
	c.settled(joining)
	active := c.ring(nil, "a", "b")
	p := primaryMoving(t, c, joining, active, "a", "b")
	a, b := c.nodes["a"], c.nodes["b"]
	old := a.plan.Load()
	old.Enter(1) // a write in flight on a under the ring it is leaving
	c.onRing(active, "b")
	if !b.r.Syncing(p) {
		t.Fatalf("b serves partition %d before a handed it over", p)
	}
	c.onRing(active, "a")
	if got := a.plan.Load().targets[p]; len(got) != 0 {
		t.Fatalf("a still replicates partition %d as its primary: %v", p, namesOf(got))
	}
	// The hand-over waits for the write in flight under the ring a
	// left, and b refuses p meanwhile.
	eventually(t, "the hand-over waits for the write in flight", func() bool { return old.fenced.Load() > 0 })
	if !b.r.Syncing(p) {
		t.Fatalf("b took partition %d while a write was in flight on a", p)
	}
	// The write ends after the ring moved; the hand-over carries it
	// before its marker. The link is cut meanwhile: b keeps refusing p
	// until the marker comes.
	c.net.cutLink("a", "b")
	key := c.recordOnly("a", c.viewerIn(p, "fence"), "i")
	old.Mark(key)
	old.Leave(1)
	eventually(t, "a fails to reach b", func() bool { return value(a.metrics.Errors) > 0 })
	if !b.r.Syncing(p) {
		t.Fatalf("b took partition %d without its hand-over", p)
	}
	c.net.heal("a", "b")
	eventually(t, "b holds partition "+strconv.Itoa(p), func() bool { return b.r.Holds(p) })
	if c.digest("b", key) == 0 || c.digest("b", key) != c.digest("a", key) {
		t.Fatal("the hand-over's marker came before the write in flight when the ring moved")
	}
}

func TestPullAsksAHolder(t *testing.T) {
	c := newCluster(t, nil, "a", "b")
	x := c.form("a", "b")
	p := 2
	owners := names(x, p)
	prim, back := c.nodes[owners[0]], c.nodes[owners[1]]
	key := c.record(prim.name, c.viewerIn(p, "pull"), "i")
	eventually(t, "the backup has the write", func() bool { return c.digest(back.name, key) != 0 })
	// The backup lost its copy and waits for p, but no ring change makes
	// anyone push it: it asks after pullAfter.
	back.eng.DeleteViewer(key)
	back.r.Await(p, c.clock.Now())
	back.r.pull(context.Background())
	if n := c.net.count(back.name, prim.name, proto.TypeSyncRequest); n != 0 {
		t.Fatalf("asked %d times before pullAfter", n)
	}
	c.clock.Advance(pullAfter)
	back.r.pull(context.Background())
	if n := c.net.count(back.name, prim.name, proto.TypeSyncRequest); n != 1 {
		t.Fatalf("asked the primary %d times after pullAfter, want 1", n)
	}
	eventually(t, "the backup holds p again", func() bool { return back.r.Holds(p) })
	if c.digest(back.name, key) != c.digest(prim.name, key) {
		t.Fatal("the pushed partition lacks the write")
	}
}

func TestClaimAfterSyncTimeout(t *testing.T) {
	c := newCluster(t, nil, "a", "b")
	c.form("a", "b")
	var keys []uint64
	x0 := c.nodes["a"].ring.Load()
	for p := range c.rcfg.Partitions {
		keys = append(keys, c.record(names(x0, p)[0], c.viewerIn(p, "claim"), "i"))
	}
	c.settled(x0)
	// b restarts empty; a's pushes to it are lost.
	c.start("b", nil)
	c.net.cutLink("a", "b")
	x := c.ring(nil, "a", "b")
	c.onRing(x)
	b := c.nodes["b"]
	owned := 0
	for p := range c.rcfg.Partitions {
		if x.Rank(p, "b") >= 0 {
			owned++
		}
	}
	if got := b.r.SyncingCount(x); got != owned {
		t.Fatalf("the restarted b syncs %d partitions, want every one it owns (%d)", got, owned)
	}
	ctx := context.Background()
	b.r.ClaimStale(ctx, b.r.cfg.SyncTimeout)
	if value(b.metrics.Claimed) != 0 {
		t.Fatal("claimed before SyncTimeout")
	}
	c.clock.Advance(b.r.cfg.SyncTimeout + time.Second)
	b.r.ClaimStale(ctx, b.r.cfg.SyncTimeout)
	if got := value(b.metrics.Claimed); got != float64(owned) {
		t.Fatalf("claimed %v partitions, want %d", got, owned)
	}
	if got := b.r.SyncingCount(x); got != 0 {
		t.Fatalf("%d partitions still syncing after the claim", got)
	}
	if c.net.count("b", "a", proto.TypeSyncRequest) == 0 {
		t.Fatal("the claim asked no holder for its copy")
	}
	c.net.heal("a", "b")
	eventually(t, "a's copies reach the claimer", func() bool {
		for _, k := range keys {
			if x.Rank(ring.PartitionOf(k, c.rcfg.Partitions), "b") >= 0 && c.digest("b", k) != c.digest("a", k) {
				return false
			}
		}
		return true
	})
}

func TestDuplicateAndStaleBatchesMerge(t *testing.T) {
	c := newCluster(t, nil, "a", "b")
	x := c.form("a", "b")
	p := 7
	owners := names(x, p)
	from, to := owners[0], owners[1]
	// Every batch reaches the backup again after the next one (an older
	// state after a newer), and two answers are lost (the batch arrives
	// twice).
	c.net.setFault(from, to, fault{replay: true, lose: 2, only: proto.TypeReplicate})
	v := c.viewerIn(p, "merge")
	var key uint64
	for i := range 6 {
		before := c.net.count(from, to, proto.TypeReplicate)
		key = c.record(from, v, strconv.Itoa(i))
		c.clock.Advance(time.Second)
		eventually(t, "the batch is delivered", func() bool { return c.net.count(from, to, proto.TypeReplicate) > before })
	}
	// One more batch, of another viewer, delivers the last state of v
	// again after it.
	before := c.net.count(from, to, proto.TypeReplicate)
	c.record(from, c.viewerIn(p, "other"), "o")
	eventually(t, "the stale batch is delivered", func() bool { return c.net.count(from, to, proto.TypeReplicate) >= before+2 })
	eventually(t, "the backup converges", func() bool { return c.digest(to, key) == c.digest(from, key) })
	if c.digest(to, key) == 0 {
		t.Fatal("the backup counts nothing")
	}
}

func TestDropLost(t *testing.T) {
	c := newCluster(t, nil, "a", "b")
	c.form("a", "b")
	var keys []uint64
	for p := range c.rcfg.Partitions {
		keys = append(keys, c.record("a", c.viewerIn(p, "drop"), "i"))
	}
	c.settled(c.nodes["a"].ring.Load())
	// b is drained: a's ring no longer holds it. b keeps its copies for
	// DropGrace, then drops them.
	c.onRing(c.ring(nil, "a"), "a")
	b := c.nodes["b"]
	c.onRing(c.ring(nil, "a"), "b")
	b.r.dropLost(b.r.cfg.DropGrace)
	held := func() (n int) {
		for _, k := range keys {
			if c.digest("b", k) != 0 {
				n++
			}
		}
		return n
	}
	if held() == 0 {
		t.Fatal("b dropped its copies before DropGrace")
	}
	c.clock.Advance(b.r.cfg.DropGrace + time.Second)
	// b hands the partitions it was primary of over to a first: their
	// state is dropped once that is done.
	eventually(t, "b drops every copy", func() bool {
		b.r.dropLost(b.r.cfg.DropGrace)
		return held() == 0
	})
}

// primaryMoving returns a partition whose primary is from in ring x and
// to in ring y.
func primaryMoving(t *testing.T, c *cluster, x, y *ring.Ring, from, to string) int {
	t.Helper()
	for p := range c.rcfg.Partitions {
		if names(x, p)[0] == from && names(y, p)[0] == to {
			return p
		}
	}
	t.Fatalf("no partition whose primary moves from %s to %s", from, to)
	return -1
}

// movedPrimary joins b to a cluster of a alone and returns the ring
// with b Active and a partition whose primary moves from a to b in it.
func movedPrimary(t *testing.T, c *cluster) (*ring.Ring, int) {
	t.Helper()
	c.form("a")
	joining := c.ring(map[string]ring.State{"b": ring.Joining}, "a", "b")
	c.onRing(joining)
	c.settled(joining)
	active := c.ring(nil, "a", "b")
	for p := range c.rcfg.Partitions {
		if names(joining, p)[0] == "a" && names(active, p)[0] == "b" {
			return active, p
		}
	}
	t.Fatal("no partition whose primary moves from a to b")
	return nil, 0
}

func TestHandoffAskedAgainOnceLeft(t *testing.T) {
	c := newCluster(t, nil, "a", "b")
	active, p := movedPrimary(t, c)
	a, b := c.nodes["a"], c.nodes["b"]
	// a's hand-over markers are lost after a believes them sent.
	c.net.setFault("a", "b", fault{swallow: 1, only: proto.TypeReplicate})
	c.onRing(active, "b")
	c.onRing(active, "a")
	eventually(t, "a sent its hand-overs", func() bool { return a.r.Handing() == 0 })
	if !b.r.Syncing(p) {
		t.Fatal("b holds the partition whose hand-over was lost")
	}
	// b asks a after pullAfter. a, still a member, does not answer for
	// itself: its ring may have gone another way.
	c.clock.Advance(pullAfter)
	b.r.pull(context.Background())
	if n := c.net.count("b", "a", proto.TypeSyncRequest); n != 1 {
		t.Fatalf("b asked a %d times, want 1", n)
	}
	// A hand-over queued on request would be sent by the time a is
	// done sending.
	eventually(t, "a sent what it queued", func() bool { return a.r.Handing() == 0 })
	if !b.r.Syncing(p) {
		t.Fatal("a member still in the ring answered for its own hand-over")
	}
	// Once a left (a drain), it sends the hand-over again.
	a.left.Store(true)
	b.r.pull(context.Background())
	eventually(t, "b holds partition "+strconv.Itoa(p), func() bool { return b.r.Holds(p) })
}

func TestOfferRecovered(t *testing.T) {
	c := newCluster(t, nil, "a", "b")
	x := c.form("a", "b")
	p := 8
	prim, back := names(x, p)[0], names(x, p)[1]
	// The backup holds a stand-in write its primary never received (the
	// whole cluster was killed before it went out); it comes back from
	// its data dir and offers what it recovered.
	key := c.recordOnly(back, c.viewerIn(p, "recovered"), "i")
	c.nodes[back].r.OfferRecovered()
	c.onRing(x, back)
	eventually(t, "the primary merged the offered state", func() bool {
		return c.digest(prim, key) != 0 && c.digest(prim, key) == c.digest(back, key)
	})
	// Offered once: a later ring sends nothing more. Two stand-in
	// writes follow it, each in a batch of its own; an offer queued by
	// the ring would go with or before the first.
	c.settled(x)
	before := c.net.count(back, prim, proto.TypeReplicate)
	c.onRing(x, back)
	for _, v := range []string{"later1", "later2"} {
		k := c.recordOnly(back, c.viewerIn(p, v), "j")
		c.nodes[back].plan.Load().MarkStandIn(k)
		eventually(t, "the stand-in write reaches the primary", func() bool { return c.digest(prim, k) != 0 })
	}
	if n := c.net.count(back, prim, proto.TypeReplicate) - before; n != 2 {
		t.Fatalf("%d batches after a later ring, want the 2 stand-in writes' only", n)
	}
}

func TestDrainConfirmation(t *testing.T) {
	c := newCluster(t, nil, "a", "b")
	x := c.form("a", "b")
	a := c.nodes["a"]
	ctx := context.Background()
	// a is drained: b's ring is still the old one, so the drain is not
	// confirmed yet.
	// HandedOver asks every member once before it looks at its
	// context: a context already done gets that one answer.
	done, cancel := context.WithCancel(ctx)
	cancel()
	err := a.r.HandedOver(done, x)
	if err == nil || !strings.Contains(err.Error(), "still holds a") {
		t.Fatalf("HandedOver with b's ring still holding a: %v", err)
	}
	leaving := c.ring(map[string]ring.State{"a": ring.Leaving}, "a", "b")
	c.onRing(leaving)
	if err := a.r.AwaitSent(ctx, func() bool { return true }); err != nil {
		t.Fatalf("AwaitSent: %v", err)
	}
	a.r.Flush(ctx, time.Minute)
	if q, _ := a.r.Queued(); q != 0 {
		t.Fatalf("%d changes queued after Flush", q)
	}
	c.onRing(c.ring(nil, "b"), "b")
	if err := a.r.HandedOver(ctx, leaving); err != nil {
		t.Fatalf("HandedOver once b's ring left a out: %v", err)
	}
	c.net.cutLink("a", "b")
	if err := a.r.HandedOver(done, leaving); err == nil || !strings.Contains(err.Error(), "unreachable") {
		t.Fatalf("HandedOver with b unreachable: %v", err)
	}
}

// TestRelays: a member asked for a hand-over relays the one it received
// only when it never wrote the partition and holds every write the last
// writer handed it.
func TestRelays(t *testing.T) {
	c := newCluster(t, nil, "a", "b")
	x := c.form("a", "b")
	b := c.nodes["b"]
	p := -1
	for q := range c.rcfg.Partitions {
		if names(x, q)[0] == "a" {
			p = q
			break
		}
	}
	now := c.clock.Now().UnixNano()
	recent := &early{from: "a", at: now}
	stale := &early{from: "a", at: now - int64(b.r.cfg.SyncTimeout) - 1}
	for _, tc := range []struct {
		name   string
		set    func(part *partition)
		relays bool
	}{
		{"received a hand-over, holds the partition whole", func(part *partition) { part.handed.Store(recent) }, true},
		{"no hand-over received", func(part *partition) {}, false},
		{"the hand-over is older than the sync timeout", func(part *partition) { part.handed.Store(stale) }, false},
		{"was the partition's primary", func(part *partition) { part.handed.Store(recent); part.wasPrimary.Store(true) }, false},
		{"does not hold the partition whole", func(part *partition) { part.handed.Store(recent); part.wait(now) }, false},
		{"held it whole when it stopped owning it", func(part *partition) {
			part.handed.Store(recent)
			part.have.Store(false)
			part.lostAt.Store(now)
			part.wholeAtLoss.Store(true)
		}, true},
		{"did not hold it whole when it stopped owning it", func(part *partition) {
			part.handed.Store(recent)
			part.have.Store(false)
			part.lostAt.Store(now)
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			part := &b.r.parts[p]
			part.handed.Store(nil)
			part.got()
			part.wasPrimary.Store(false)
			part.lostAt.Store(0)
			part.wholeAtLoss.Store(false)
			tc.set(part)
			from, ok := b.r.relays(b.plan.Load(), p)
			if ok != tc.relays || ok && from != "a" {
				t.Fatalf("relays: %q %v, want %v", from, ok, tc.relays)
			}
		})
	}
	// Asked by a, which waits for the hand-over, b relays: its copy whole
	// and a marker.
	part := &b.r.parts[p]
	part.handed.Store(nil)
	part.got()
	part.wasPrimary.Store(false)
	part.lostAt.Store(0)
	part.handed.Store(recent)
	a := c.nodes["a"]
	a.r.AwaitHandoff(p, "c", c.clock.Now())
	if got := b.r.ServeSync("a", nil, nil, []uint32{uint32(p)}, nil); !slices.Equal(got, []uint32{uint32(p)}) {
		t.Fatalf("ServeSync of a relay: pushing %v, want [%d]", got, p)
	}
	eventually(t, "a holds the partition b relayed", func() bool { return a.r.Holds(p) })
}

// TestTakeBackMarkedThroughLaterPlans: a strict write made under a plan
// with no target for its partition (a alone) is taken back after b
// joined and took the partition over, grant and all, and after x joined
// and a handed it partitions (draining a's plans). The take-back is
// marked through every plan since (MarkThrough; HoldPlans keeps them
// linked through the drains), so it reaches b, a target only of the
// later plans, and b counts it though it is the primary by then. Marked under the write's
// plan and the current one only (a is b's backup now: no target), it
// would reach nobody, and b would count the grant on top of the
// client's next try (the double count after a kill -9 and restart,
// TestKillAndRestartAtOnce).
func TestTakeBackMarkedThroughLaterPlans(t *testing.T) {
	c := newCluster(t, nil, "a", "b", "x")
	c.form("a")
	a, b := c.nodes["a"], c.nodes["b"]
	joining := c.ring(map[string]ring.State{"b": ring.Joining}, "a", "b")
	active := c.ring(nil, "a", "b")
	p := primaryMoving(t, c, joining, active, "a", "b")
	v := c.viewerIn(p, "held")
	held := a.plan.Load()
	held.Enter(0)
	key := c.recordOnly("a", v, "grant")
	held.Mark(key)
	a.r.HoldPlans()
	held.Leave(0)
	c.onRing(joining)
	c.settled(joining)
	c.onRing(active, "b")
	c.onRing(active, "a")
	eventually(t, "b holds the partition handed over", func() bool { return b.r.Holds(p) && !b.r.Syncing(p) })
	// x joins and takes partitions over from a, whose hand-overs drain
	// its plans: they must not let go of the plans back to the write's
	// while the write waits.
	joining2 := c.ring(map[string]ring.State{"x": ring.Joining}, "a", "b", "x")
	active2 := c.ring(nil, "a", "b", "x")
	moved := 0
	for q := range c.rcfg.Partitions {
		if names(joining2, q)[0] == "a" && names(active2, q)[0] == "x" {
			moved++
		}
	}
	if moved == 0 {
		t.Fatal("no partition whose primary moves from a to x: a drains nothing")
	}
	c.onRing(joining2)
	c.settled(joining2)
	c.onRing(active2, "x")
	c.onRing(active2, "b")
	c.onRing(active2, "a")
	eventually(t, "a handed its partitions over to x", func() bool { return a.r.Handing() == 0 })
	c.recordOnly("a", v, "take-back")
	a.plan.Load().MarkThrough(held, key)
	a.r.ReleasePlans()
	primary := names(active2, p)[0]
	eventually(t, primary+", the partition's primary, counts the take-back", func() bool {
		return c.digest(primary, key) == c.digest("a", key)
	})
}

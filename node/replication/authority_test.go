package replication

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/fcap-io/fcap/proto"
	"github.com/fcap-io/fcap/ring"
)

// A backup that acknowledges a strict write from another ring does not
// count: on its ring the partition may have another primary, whose grants
// the sender's copy does not hold. Once both route by one ring again, the
// same write is acknowledged.
func TestStrictAckFromAnotherRingFails(t *testing.T) {
	c := newCluster(t, nil, "a", "b", "c")
	x := c.form("a", "b", "c")
	// The backup's ring: c joining again (a new epoch) where partition p
	// keeps its primary, so only the epoch differs.
	other := c.ring(map[string]ring.State{"c": ring.Joining}, "a", "b", "c")
	p := -1
	for q := range c.rcfg.Partitions {
		if o := names(x, q); len(o) == 2 && o[1] != "c" && o[0] != "c" && names(other, q)[0] == o[0] {
			p = q
			break
		}
	}
	if p < 0 {
		t.Fatal("no partition keeps its owners when c joins again: pick other names")
	}
	owners := names(x, p)
	prim := c.nodes[owners[0]]
	c.onRing(other, owners[1])
	key := c.record(owners[0], c.viewerIn(p, "other-ring"), "i1")
	err := prim.plan.Load().WaitSynced(key, p, 10*time.Second)
	if !errors.Is(err, ErrOtherRing) {
		t.Fatalf("WaitSynced acknowledged by a backup on another ring: %v, want ErrOtherRing", err)
	}
	if c.digest(owners[1], key) != c.digest(owners[0], key) {
		t.Fatal("the backup did not merge the state (it should: only the acknowledgement does not count)")
	}
	c.onRing(x, owners[1])
	key = c.record(owners[0], c.viewerIn(p, "other-ring"), "i2")
	if err := prim.plan.Load().WaitSynced(key, p, 10*time.Second); err != nil {
		t.Fatalf("WaitSynced once both route by one ring: %v", err)
	}
}

// A partition claimed after SyncTimeout while a member is failed may
// miss acknowledged writes: it is marked claimed (strict caps refuse it)
// until a holder's copy arrives with its Done marker. Without a failed
// member or an earlier owner alive, a claim is whole.
func TestClaimWhileMembersFailedIsMarked(t *testing.T) {
	c := newCluster(t, nil, "a", "b")
	c.form("a", "b")
	x0 := c.nodes["a"].ring.Load()
	c.settled(x0)
	b, x := restartCutAndClaim(c)
	owned := 0
	for p := range c.rcfg.Partitions {
		if x.Rank(p, "b") >= 0 {
			owned++
			if !b.r.Claimed(p) {
				t.Errorf("partition %d claimed while a member is failed, not marked", p)
			}
		} else if b.r.Claimed(p) {
			t.Errorf("partition %d marked claimed, but b does not own it", p)
		}
	}
	if got := b.r.NumClaimed(); got != owned {
		t.Fatalf("NumClaimed = %d, want %d", got, owned)
	}
	c.net.heal("a", "b")
	eventually(t, "a's current copies, asked for after the heal, unmark the claims", func() bool {
		b.r.pull(context.Background())
		return b.r.NumClaimed() == 0
	})

	// An operator's Unclaim takes marked claims as whole.
	b, _ = restartCutAndClaim(c)
	if b.r.NumClaimed() == 0 {
		t.Fatal("nothing marked claimed")
	}
	b.r.Unclaim()
	if n := b.r.NumClaimed(); n != 0 {
		t.Fatalf("%d partitions still claimed after Unclaim", n)
	}
}

// restartCutAndClaim restarts b of a formed cluster {a, b} empty, with a
// member counted failed, cuts it from a, moves both to a new ring and lets
// b claim what it waited for past SyncTimeout. It returns b and the ring.
func restartCutAndClaim(c *cluster) (*memNode, *ring.Ring) {
	c.start("b", nil)
	b := c.nodes["b"]
	b.failed.Store(1)
	c.net.cutLink("a", "b")
	x := c.ring(nil, "a", "b")
	c.onRing(x)
	c.clock.Advance(b.r.cfg.SyncTimeout + time.Second)
	b.r.ClaimStale(context.Background(), b.r.cfg.SyncTimeout)
	return b, x
}

// A claimed copy is not a current one: a node whose partitions were
// claimed (its quorum lapsed, nobody's copy came) does not end another
// node's wait with it, so that node cannot serve strict caps from what a
// minority kept while the majority granted. The 3/2 split of the
// partition suite found it: at the heal, the two minority nodes handed
// each other their claimed copies and one granted five more to viewers
// the majority had filled. Once the claim is over (a holder's copy came),
// it serves the same request.
func TestClaimedCopyEndsNoWait(t *testing.T) {
	c := newCluster(t, nil, "a", "b")
	c.form("a", "b")
	c.settled(c.nodes["a"].ring.Load())
	b, _ := restartCutAndClaim(c)
	p := -1
	for q := range c.rcfg.Partitions {
		if b.r.Claimed(q) {
			p = q
			break
		}
	}
	if p < 0 {
		t.Fatal("b claimed nothing")
	}
	if got := b.r.ServeSync("a", []uint32{uint32(p)}, nil, nil, nil); len(got) != 0 {
		t.Fatalf("b offers its claimed copy of partition %d: %v", p, got)
	}
	if b.r.current(p) {
		t.Fatal("a claimed copy counts as current: its transfer would end with a Done marker")
	}
	// a's copy arrives (the cut heals): b's claim is over, its copy is
	// current again and b serves a's request for it.
	c.net.heal("a", "b")
	eventually(t, "a's copies unmark b's claims", func() bool {
		b.r.pull(context.Background())
		return !b.r.Claimed(p)
	})
	if !b.r.current(p) {
		t.Fatal("b's copy, refreshed by a's, is not current")
	}
	if got := b.r.ServeSync("a", []uint32{uint32(p)}, nil, nil, nil); len(got) != 1 {
		t.Fatalf("b does not offer its current copy of partition %d: %v", p, got)
	}
}

// A hand-over ends the wait for it, but not a claim: the previous
// primary may have been cut off with this node (a minority handing its
// partitions around at a heal). Only a current copy asked for under the
// quorum (Copied and Done markers) makes a claimed copy whole, whichever
// comes first; a Done marker alone (a transfer that may have begun before
// the ask) does not.
func TestHandoverDoesNotEndAClaim(t *testing.T) {
	c := newCluster(t, nil, "a", "b")
	c.form("a", "b")
	r := c.nodes["a"].r
	for _, doneFirst := range []bool{false, true} {
		p := 3
		part := &r.parts[p]
		part.awaitHandoff(c.clock.Now().UnixNano(), "b")
		part.claimed.Store(true)
		r.received("c", 0, []uint32{uint32(p)}, nil)
		if !part.claimed.Load() {
			t.Fatal("a Done marker alone ended the claim")
		}
		r.startCopies(p, c.nodes["a"].ring.Load().Epoch())
		current := func() { r.copiesReceived("c", []uint32{uint32(p)}, []uint32{uint32(p)}) }
		if doneFirst {
			current()
			if part.claimed.Load() {
				t.Fatal("a current copy asked for left the claim")
			}
			if part.have.Load() {
				t.Fatal("a Done marker ended the wait for a hand-over")
			}
		}
		r.received("b", 0, nil, []uint32{uint32(p)})
		if !part.have.Load() {
			t.Fatal("the hand-over did not end its wait")
		}
		if !doneFirst {
			if !part.claimed.Load() || r.Claimed(p) != true {
				t.Fatal("a hand-over made a claimed copy whole")
			}
			current()
		}
		if r.Claimed(p) || !r.Holds(p) {
			t.Fatalf("after the hand-over and a current copy (Done first: %v): claimed %v, holds %v", doneFirst, r.Claimed(p), r.Holds(p))
		}
	}
}

// A claim lasts until a current copy arrives, and the claimer asks for one
// again when its ring changes, not only when it claims. The partition
// suite's 3/2 split found a minority node back in the ring at the heal
// as the primary of partitions it had claimed during the cut: the node
// that pushed them to it had no current copy (it had passed through
// another ring on the way), the backup that had one pushed nothing, and
// the claimer's one ask (at the claim) had gone nowhere, the link being
// cut. Its strict caps stayed failed closed for good, and its checks read
// the old copy. Here: c is cut off and claims; at the heal the pusher of
// p (b) holds no current copy, and only c's asking its co-owner a ends
// the claim.
func TestClaimAsksAgainAfterTheHeal(t *testing.T) {
	c := newCluster(t, nil, "a", "b", "c")
	x0 := c.form("a", "b", "c")
	xm := c.ring(nil, "a", "b")
	p := -1
	for q := range c.rcfg.Partitions {
		if o, m := names(x0, q), names(xm, q); o[0] == "c" && o[1] == "b" && m[0] == "b" && m[1] == "a" {
			p = q
			break
		}
	}
	if p < 0 {
		t.Fatal("no partition with owners [c b], and [b a] without c: pick other names")
	}
	a, b, cn := c.nodes["a"], c.nodes["b"], c.nodes["c"]
	c.net.partition("a", "c")
	c.net.partition("b", "c")
	a.failed.Store(1)
	b.failed.Store(1)
	cn.failed.Store(2)
	c.onRing(xm, "a", "b")
	c.settled(xm)
	c.onRing(c.ring(nil, "c"), "c")
	cn.r.Reacquire() // c's quorum lapsed while a and b routed without it
	c.clock.Advance(cn.r.cfg.SyncTimeout + time.Second)
	cn.r.ClaimStale(context.Background(), cn.r.cfg.SyncTimeout)
	if !cn.r.Claimed(p) {
		t.Fatalf("c did not claim partition %d", p)
	}
	b.r.Reacquire() // b's copy is no current one: what it pushes ends no claim
	c.net.heal("a", "c")
	c.net.heal("b", "c")
	for _, n := range []*memNode{a, b, cn} {
		n.failed.Store(0)
	}
	c.onRing(x0)
	eventually(t, "c's claim of p ends with a's copy", func() bool {
		cn.r.pull(context.Background())
		return !cn.r.Claimed(p)
	})
}

// A claimed partition the ring moves away is claimed no more (the node
// owns nothing there to serve or to fail closed: status stops counting
// it), and its copy, never whole, ends nobody's wait.
func TestClaimEndsWhenThePartitionMovesAway(t *testing.T) {
	c := newCluster(t, nil, "a", "b")
	c.form("a", "b")
	b, _ := restartCutAndClaim(c)
	if b.r.NumClaimed() == 0 {
		t.Fatal("nothing claimed")
	}
	c.onRing(c.ring(nil, "a"), "b")
	if n := b.r.NumClaimed(); n != 0 {
		t.Fatalf("%d partitions still claimed after they moved away", n)
	}
	for p := range c.rcfg.Partitions {
		if b.r.current(p) {
			t.Fatalf("partition %d: a claimed copy moved away counts as current", p)
		}
	}
}

// A claim whose every copy is claimed ends once no member is failed and
// every member's copy was merged (copies.go): the 3/2 split of the
// partition suite left partitions whose two owners were both on the
// minority claimed on every node after the heal, their strict caps failed
// closed for good. Here b alone holds an impression of p (its batch to a
// was lost), both copies are claimed after a lapse, and a's claim ends
// with b's copy merged: the impression arrives with it.
func TestClaimEndsWithEveryMembersCopy(t *testing.T) {
	c := newCluster(t, nil, "a", "b")
	x0 := c.form("a", "b")
	a, b := c.nodes["a"], c.nodes["b"]
	p := 0
	c.net.partition("a", "b")
	key := c.recordOnly("b", c.viewerIn(p, "only-on-b"), "i1")
	for _, n := range []*memNode{a, b} {
		n.r.Reacquire()
	}
	c.clock.Advance(a.r.cfg.SyncTimeout + time.Second)
	for _, n := range []*memNode{a, b} {
		n.r.ClaimStale(context.Background(), n.r.cfg.SyncTimeout)
		if !n.r.Claimed(p) {
			t.Fatalf("%s did not claim partition %d", n.name, p)
		}
	}
	if c.digest("a", key) == c.digest("b", key) {
		t.Fatal("a already holds b's impression: the test shows nothing")
	}
	c.net.heal("a", "b")
	c.onRing(x0)
	eventually(t, "a's claim ends with b's copy merged", func() bool {
		a.r.pull(context.Background())
		return !a.r.Claimed(p)
	})
	if c.digest("a", key) != c.digest("b", key) {
		t.Fatal("a's claim ended without b's copy")
	}
	// With a member failed, nothing ends a claim but a current copy.
	b.r.Reacquire()
	c.clock.Advance(b.r.cfg.SyncTimeout + time.Second)
	b.r.ClaimStale(context.Background(), b.r.cfg.SyncTimeout)
	a.r.Reacquire()
	a.failed.Store(1)
	c.clock.Advance(a.r.cfg.SyncTimeout + time.Second)
	a.r.ClaimStale(context.Background(), a.r.cfg.SyncTimeout)
	for range 3 {
		a.r.pull(context.Background())
		c.clock.Advance(20 * time.Second)
	}
	if !a.r.Claimed(p) {
		t.Fatal("a's claim ended while a member was failed and no copy was current")
	}
}

// A partition none of whose owners is in the ring any more (they failed:
// cut off, or dead) is claimed after orphanClaimAfter, not SyncTimeout:
// nobody would push it, and its soft caps are served (from nothing)
// sooner, while strict caps stay failed closed. A partition whose earlier
// owner is still in the ring waits for it as before.
func TestOrphanClaimedEarly(t *testing.T) {
	c := newCluster(t, nil, "a", "b", "c")
	x0 := c.form("a", "b", "c")
	// c alone, cut off from a and b: every partition it did not hold is
	// an orphan there.
	cn := c.nodes["c"]
	c.net.partition("a", "c")
	c.net.partition("b", "c")
	cn.failed.Store(2)
	xc := c.ring(nil, "c")
	c.onRing(xc, "c")
	p := -1
	for q := range c.rcfg.Partitions {
		if !contains(names(x0, q), "c") {
			p = q
			break
		}
	}
	if p < 0 {
		t.Fatal("c holds every partition")
	}
	c.clock.Advance(orphanClaimAfter + time.Second)
	cn.r.ClaimStale(context.Background(), cn.r.cfg.SyncTimeout)
	if !cn.r.Claimed(p) || cn.r.Syncing(p) {
		t.Fatalf("partition %d, whose owners both left c's ring, is not claimed %v after its wait began (claimed %v, syncing %v)", p, orphanClaimAfter+time.Second, cn.r.Claimed(p), cn.r.Syncing(p))
	}

	// b and c together, a cut off: a partition b held waits for b's push
	// (lost here), not claimed early.
	c2 := newCluster(t, nil, "a", "b", "c")
	y0 := c2.form("a", "b", "c")
	yb := c2.ring(nil, "b", "c")
	q := -1
	for i := range c2.rcfg.Partitions {
		if o := names(y0, i); !contains(o, "c") && contains(o, "b") && contains(names(yb, i), "c") {
			q = i
			break
		}
	}
	if q < 0 {
		t.Fatal("no partition held by b and not c that c owns without a: pick other names")
	}
	c2.net.partition("a", "c")
	c2.net.cutLink("b", "c")
	c2.nodes["c"].failed.Store(1)
	c2.onRing(yb, "c")
	c2.clock.Advance(orphanClaimAfter + time.Second)
	c2.nodes["c"].r.ClaimStale(context.Background(), c2.nodes["c"].r.cfg.SyncTimeout)
	if !c2.nodes["c"].r.Syncing(q) {
		t.Fatalf("partition %d, held by b which is still in c's ring, was claimed before SyncTimeout", q)
	}
}

// A replan of the same ring (every arriving partition makes one) does not
// ask again for the copies a claim waits for: only a new ring, or the
// backoff, does. Asking again at each replan flooded the members with
// transfers after a 3/2 split's heal, and each claim's answer queued
// behind the others'.
func TestReplanDoesNotAskForClaimsAgain(t *testing.T) {
	c := newCluster(t, nil, "a", "b")
	c.form("a", "b")
	b, x := restartCutAndClaim(c)
	if b.r.NumClaimed() == 0 {
		t.Fatal("b claimed nothing")
	}
	b.r.Kick() // as the quorum's forming does
	b.r.pull(context.Background())
	asked := c.net.count("b", "a", proto.TypeSyncRequest)
	if asked == 0 {
		t.Fatal("b did not ask a for the copies its claims wait for")
	}
	for range 3 {
		c.onRing(x, "b")
		b.r.pull(context.Background())
	}
	if n := c.net.count("b", "a", proto.TypeSyncRequest); n != asked {
		t.Fatalf("b asked %d times more after replans of the same ring", n-asked)
	}
	c.onRing(c.ring(nil, "a", "b", "c"), "b") // a new ring: ask at once
	b.r.pull(context.Background())
	if n := c.net.count("b", "a", proto.TypeSyncRequest); n == asked {
		t.Fatal("b did not ask again after a new ring")
	}
}

// A whole copy sent under a ring this node has left is not current: a
// transfer begun while an older ring made this node an owner, landing
// after a newer ring moved the partition away (writes went elsewhere
// since). Taken as current, it made the node serve the partition when a
// later ring gave it back, from a copy missing strict grants
// acknowledged meanwhile (TestKillTwoOfFive: a viewer's count fell from
// 7 grants to none, and it was granted again). A copy sent under a ring
// this node has not reached yet still counts once it does.
func TestCopyFromALeftRingIsNotCurrent(t *testing.T) {
	c := newCluster(t, nil, "a", "b", "c", "d")
	x := c.form("a", "b", "c")
	y := c.ring(nil, "a", "b", "c", "d")
	v, p := partitionWhere(c, [][]string{{"a", "b"}, {"a", "c"}, {"a", "d"}, {"a", "b", "d"}, {"a", "c", "d"}}, func(v *ring.Ring, q int) bool {
		// a backup under v: a primary waits for its hand-over anyway.
		return contains(names(x, q), "a") && !contains(names(y, q), "a") && backs(v, q, "a")
	})
	if p < 0 {
		t.Fatal("no partition that a owns under x and backs under v, but not under y")
	}
	r := c.nodes["a"].r
	if !r.Holds(p) {
		t.Fatalf("a does not hold partition %d after forming", p)
	}
	done := func(under *ring.Ring) {
		t.Helper()
		if _, err := r.Apply(&proto.Replicate{From: "b", Epoch: under.Epoch(), Done: []uint32{uint32(p)}}); err != nil {
			t.Fatal(err)
		}
	}
	c.onRing(y, "a")
	if r.Holds(p) {
		t.Fatal("a holds a partition its ring moved away")
	}
	done(x) // sent under x, which a has left
	if r.Holds(p) {
		t.Fatal("a copy sent under a ring a left was taken as current")
	}
	c.onRing(x, "a") // back to x: a owns p again
	if r.Holds(p) {
		t.Fatal("a serves a partition from a copy sent under a ring it had left")
	}
	c.onRing(y, "a")
	done(v) // sent under v, which a has not reached
	c.onRing(v, "a")
	if !r.Holds(p) {
		t.Fatal("a copy sent under the ring a then moved to was not taken as current")
	}
}

// A whole copy sent under a ring this node never routed by, landing
// while its ring did not make it an owner, is not current at its next
// owning ring: the ring it routed by meanwhile may be the newer one, its
// owners writing after the copy was sent (TestKillTwoOfFive served a
// strict cap from such a copy without 19 acknowledged grants). The node
// asks every likely holder for the copy at once, so when the skipped ring
// was the older one (the 3/2 split's case: the copy was current, and its
// sender does not send it again unasked) the wait is one round trip, not
// the pulls' one holder a second and then SyncTimeout.
func TestCopyFromASkippedRingIsAskedFor(t *testing.T) {
	c := newCluster(t, nil, "a", "b", "c", "d")
	x := c.form("a", "b", "c")
	y := c.ring(nil, "a", "b", "c", "d")
	sets := [][]string{{"a", "b"}, {"a", "c"}, {"a", "b", "c"}, {"a", "b", "d"}, {"a", "c", "d"}}
	var v, w *ring.Ring
	p := -1
search:
	for i, vs := range sets {
		for j, ws := range sets {
			if i == j {
				continue
			}
			v, w = c.ring(nil, vs...), c.ring(nil, ws...)
			for q := range c.rcfg.Partitions {
				// a backs q under both (a primary waits for a hand-over
				// anyway), not under y; a member of v other than a held q
				// under x, so it has a current copy to send.
				if !contains(names(y, q), "a") && backs(v, q, "a") && backs(w, q, "a") && slices.ContainsFunc(names(x, q), func(n string) bool {
					return n != "a" && contains(vs, n)
				}) {
					p = q
					break search
				}
			}
		}
	}
	if p < 0 {
		t.Fatal("no partition that a backs under two rings, but does not own under y")
	}
	r := c.nodes["a"].r
	c.onRing(y, "a")
	if r.Holds(p) {
		t.Fatal("a holds a partition its ring moved away")
	}
	if _, err := r.Apply(&proto.Replicate{From: "b", Epoch: w.Epoch(), Done: []uint32{uint32(p)}}); err != nil {
		t.Fatal(err)
	}
	asked := map[string]int{}
	for _, m := range v.Members() {
		asked[m.Name] = c.net.count("a", m.Name, proto.TypeSyncRequest)
	}
	c.onRing(v, "a") // not w, which a skips
	if r.Holds(p) {
		t.Fatal("a copy sent under a ring a skipped, landing under one that did not make a an owner, was taken as current")
	}
	r.pull(context.Background()) // at once: the fake clock has not moved
	for _, m := range v.Members() {
		if m.Name != "a" && c.net.count("a", m.Name, proto.TypeSyncRequest) == asked[m.Name] {
			t.Errorf("a did not ask %s for the copy it dropped", m.Name)
		}
	}
	eventually(t, "a holds the partition again, from a current holder's copy", func() bool { return r.Holds(p) })
}

// A hand-over marker carries only its sender's last changes: it does not
// make whole a copy this node dropped (planner.holding), though it ends
// the wait for the hand-over. A holder's whole copy does, before or
// after the marker.
func TestHandoverDoesNotCompleteADroppedCopy(t *testing.T) {
	for _, copyFirst := range []bool{false, true} {
		t.Run(fmt.Sprintf("copy-first=%v", copyFirst), func(t *testing.T) {
			c := newCluster(t, nil, "a", "b", "c", "d")
			c.form("a", "b", "c")
			y := c.ring(nil, "a", "b", "c", "d")
			v, p := partitionWhere(c, [][]string{{"a", "b"}, {"a", "c"}, {"a", "b", "c"}}, func(v *ring.Ring, q int) bool {
				// a primary of q under v, not an owner under y, whose
				// primary survives into v (a waits for its hand-over).
				ov, oy := names(v, q), names(y, q)
				return !contains(oy, "a") && ov[0] == "a" && contains(ov, oy[0])
			})
			if p < 0 {
				t.Fatal("no partition a is primary of under v and does not own under y")
			}
			r := c.nodes["a"].r
			c.onRing(y, "a")
			if _, err := r.Apply(&proto.Replicate{From: "b", Epoch: c.ring(nil, "a", "b", "c", "d", "e").Epoch(), Done: []uint32{uint32(p)}}); err != nil {
				t.Fatal(err)
			}
			c.onRing(v, "a")
			prim := names(y, p)[0]
			if got := r.parts[p].handoffFrom(); got != prim {
				t.Fatalf("a waits for a hand-over from %q, want %q", got, prim)
			}
			whole := func() {
				if _, err := r.Apply(&proto.Replicate{From: "c", Epoch: v.Epoch(), Done: []uint32{uint32(p)}}); err != nil {
					t.Fatal(err)
				}
			}
			if copyFirst {
				whole()
				if r.Holds(p) {
					t.Fatal("a holds the partition before its hand-over")
				}
			}
			if _, err := r.Apply(&proto.Replicate{From: prim, Epoch: v.Epoch(), Handoff: []uint32{uint32(p)}}); err != nil {
				t.Fatal(err)
			}
			if copyFirst {
				if !r.Holds(p) {
					t.Fatal("a does not hold the partition after a whole copy and its hand-over")
				}
				return
			}
			if r.Holds(p) {
				t.Fatal("a hand-over made whole a copy a had dropped")
			}
			whole()
			if !r.Holds(p) {
				t.Fatal("a does not hold the partition after a holder's whole copy")
			}
		})
	}
}

// A whole copy sent under the very ring this node routes by, which does
// not make it an owner (an answer to a claim's ask that lands after the
// ring moved the partition away), is not current at the next ring that
// makes it one: the partition's owners went on writing after it was
// sent. Held as whole, it served a strict cap without the grants of the
// 2 s before the primary was killed, and granted them again
// (TestKillTwoOfFive).
func TestCopyFromTheRingItLeavesIsNotCurrent(t *testing.T) {
	c := newCluster(t, nil, "a", "b", "c", "d")
	c.form("a", "b", "c", "d")
	y := c.ring(nil, "a", "b", "c", "d")
	v, p := partitionWhere(c, [][]string{{"a", "b"}, {"a", "c"}, {"a", "d"}, {"a", "b", "c"}, {"a", "b", "d"}, {"a", "c", "d"}}, func(v *ring.Ring, q int) bool {
		// a backs q under v (a primary waits for its hand-over anyway), not under y.
		return !contains(names(y, q), "a") && backs(v, q, "a")
	})
	if p < 0 {
		t.Fatal("no partition that a backs under v but does not own under y")
	}
	r := c.nodes["a"].r
	c.onRing(y, "a")
	if r.Holds(p) {
		t.Fatal("a holds a partition its ring does not give it")
	}
	if _, err := r.Apply(&proto.Replicate{From: "b", Epoch: y.Epoch(), Done: []uint32{uint32(p)}}); err != nil {
		t.Fatal(err)
	}
	c.onRing(v, "a")
	if r.Holds(p) {
		t.Fatal("a serves a partition from a copy sent under the ring it left, which did not make it an owner")
	}
}

// partitionWhere returns the first ring of members sets, and the first of
// its partitions, that want accepts; -1 when none does.
func partitionWhere(c *cluster, sets [][]string, want func(v *ring.Ring, q int) bool) (*ring.Ring, int) {
	var v *ring.Ring
	for _, vs := range sets {
		v = c.ring(nil, vs...)
		for q := range c.rcfg.Partitions {
			if want(v, q) {
				return v, q
			}
		}
	}
	return v, -1
}

// backs reports whether name is a backup (an owner, not the primary) of
// partition q under v.
func backs(v *ring.Ring, q int, name string) bool {
	owners := names(v, q)
	return contains(owners, name) && owners[0] != name
}

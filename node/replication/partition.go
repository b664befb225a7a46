package replication

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/fcap-io/fcap/proto"
	"github.com/fcap-io/fcap/ring"
)

// partition is this node's knowledge of one partition.
type partition struct {
	have      atomic.Bool  // this node holds the partition's complete state
	waitSince atomic.Int64 // when it started waiting for it (unix ns), 0 when not waiting
	// from names the previous primary this node waits for a hand-over
	// from; only that node's Handoff marker ends the wait (a Done of an
	// earlier transfer arriving late must not).
	from atomic.Pointer[string]
	// handed is a Handoff that arrived before this node's ring showed it
	// the new primary; a wait starting soon after consumes it.
	handed atomic.Pointer[early]
	lostAt atomic.Int64 // when it stopped owning it (unix ns), 0 while it owns it, -1 once dropped
	// aheadEpoch is the sender's ring epoch of a whole copy that arrived
	// while this node did not own the partition (received): planner.holding
	// keeps the copy at this node's next owning ring unless this node
	// routed by that ring itself.
	aheadEpoch atomic.Uint64
	// needWhole: planner.holding dropped a copy that arrived while this
	// node did not own the partition, so what it holds is not whole: a
	// hand-over marker (which carries only its sender's last changes)
	// does not make it whole, a holder's whole copy does (got). askNow:
	// the next pull asks every likely holder at once for that copy.
	needWhole atomic.Bool
	askNow    atomic.Bool
	pushing   atomic.Int32 // full transfers of it this node is sending
	// wasPrimary: this node has been its primary in a ring since it
	// started; wholeAtLoss: it held it whole when it stopped owning it.
	// Both say whether it may relay a hand-over (sync.go).
	wasPrimary  atomic.Bool
	wholeAtLoss atomic.Bool
	// claimed: it was claimed after SyncTimeout without any holder's
	// copy, so what this node has of it may miss acknowledged writes. It
	// serves soft caps only until a holder's transfer ends (got) or an
	// operator forgets the members that held it (Unclaim).
	claimed atomic.Bool
	// claimAsk is when this node next asks the partition's holders for
	// their copies while it is claimed (unix ns; 0: at the next pull), and
	// claimAsks how often it asked since the last ring change (pull).
	claimAsk  atomic.Int64
	claimAsks atomic.Int32
	// orphan: this node waits for the partition and none of its owners in
	// the ring before the wait began is in the ring any more (failed:
	// cut off or dead). Nobody will push it, so it is claimed after
	// orphanClaimAfter rather than SyncTimeout: soft caps are served
	// (from nothing) sooner, and strict caps stay failed closed.
	orphan atomic.Bool
}

// orphanClaimAfter is how long an orphan partition waits for a pull's
// answer before it is claimed (ClaimStale).
const orphanClaimAfter = 2 * pullAfter

// wait marks the partition as awaited.
func (part *partition) wait(now int64) {
	part.have.Store(false)
	part.waitSince.CompareAndSwap(0, now)
}

// got marks the partition as held.
func (part *partition) got() {
	part.needWhole.Store(false)
	part.askNow.Store(false)
	part.claimed.Store(false)
	part.orphan.Store(false)
	part.have.Store(true)
	part.waitSince.Store(0)
	part.from.Store(nil)
}

// handedOver ends the wait for a hand-over: the previous primary stopped
// writing and sent its last changes. It does not make a copy this node
// claimed (or took back to waiting after a lapse of its quorum) whole:
// the sender's copy may be as old as this one (two nodes of a minority
// handing partitions to each other at a heal). That takes a current
// copy's Done marker (got).
func (part *partition) handedOver() {
	part.from.Store(nil)
	if part.needWhole.Load() {
		// The hand-over's sender took this node to hold the partition
		// (it owned it in the sender's previous ring) and sent only its
		// last changes, but the copy was dropped (planner.holding): the
		// wait goes on until a holder's whole copy comes (pull).
		return
	}
	part.have.Store(true)
	part.waitSince.Store(0)
}

// current reports whether this node's copy of partition p may end a
// peer's wait for it (a whole transfer's Done marker, an answer to a
// pull): it holds p whole and not claimed, or held it so when the ring
// moved p away less than SyncTimeout ago. A claimed copy, or one still
// awaited, may miss acknowledged writes; so may one moved away longer
// ago (its new owners wrote since). A copy moved away just now may be
// the only one with the majority's grants after a split heals.
func (r *Replicator) current(p int) bool {
	part := &r.parts[p]
	if part.claimed.Load() {
		return false
	}
	if lost := part.lostAt.Load(); lost != 0 {
		return lost > 0 && part.wholeAtLoss.Load() && r.now().UnixNano()-lost < int64(r.cfg.SyncTimeout)
	}
	return part.have.Load() && part.waitSince.Load() == 0
}

// early is a hand-over received before it was awaited.
type early struct {
	from string
	at   int64 // unix ns
}

// earlyWindow is how recent an early hand-over must be to end a wait.
const earlyWindow = int64(5 * time.Second)

// awaitHandoff marks the partition as awaited from its previous primary,
// unless a hand-over already arrived. Nodes may have passed through
// different rings on the way, so the node that last wrote the partition
// is not always this node's previous primary: a hand-over from any node
// ends the wait. A Done of a plain transfer never does (its sender may
// still be writing).
func (part *partition) awaitHandoff(now int64, from string) bool {
	if h := part.handed.Swap(nil); h != nil && now-h.at < earlyWindow {
		if part.needWhole.Load() {
			part.wait(now) // handed over, but the copy it completes was dropped
			return false
		}
		part.got()
		return false
	}
	part.from.Store(&from)
	part.wait(now)
	return true
}

// handoffFrom is the node a hand-over is awaited from, or "".
func (part *partition) handoffFrom() string {
	if f := part.from.Load(); f != nil {
		return *f
	}
	return ""
}

// Syncing reports whether this node owns partition p in its ring but does
// not hold it yet.
func (r *Replicator) Syncing(p int) bool {
	return !r.parts[p].have.Load()
}

// SyncingCount counts partitions this node owns but does not hold.
func (r *Replicator) SyncingCount(cur *ring.Ring) int {
	n := 0
	for p := range r.parts {
		if cur.Rank(p, r.cfg.Name) >= 0 && !r.parts[p].have.Load() {
			n++
		}
	}
	return n
}

// received marks partitions whose full transfer, or hand-over, has
// arrived from a peer. A transfer's Done does not end a wait for a
// hand-over; a hand-over counts only from the node it is awaited from.
func (r *Replicator) received(from string, epoch uint64, done, handoff []uint32) {
	for _, p := range done {
		if int(p) >= len(r.parts) {
			continue
		}
		part := &r.parts[p]
		if part.claimed.Load() {
			// A claim ends only by a copy asked for under the quorum
			// (copies.go): a Done of a transfer begun earlier may miss
			// grants an old ring's primary made after it began.
			continue
		}
		if part.handoffFrom() != "" {
			if part.lostAt.Load() == 0 && part.needWhole.Swap(false) {
				// A whole copy for a node that dropped its own and
				// awaits a hand-over too: the hand-over's marker now
				// ends the wait.
				r.log.Debug("partition: whole copy before its hand-over", "partition", p, "from", from)
			}
			continue
		}
		if part.lostAt.Load() != 0 {
			if r.hasLeft(epoch) {
				// Sent under a ring this node has left: a transfer
				// begun before a newer ring moved p away, which this
				// node's writes no longer reach. Its states are
				// merged; it is not a current copy.
				r.log.Debug("partition: whole copy sent under a ring this node left; not current", "partition", p, "from", from)
				continue
			}
			// Ahead of the ring that makes this node its owner, or
			// sent under this node's own ring, which does not (an
			// answer to a claim's ask): planner.holding decides at
			// the next owning ring. The grace before an unowned copy
			// is dropped starts again.
			part.lostAt.Store(r.now().UnixNano())
			part.aheadEpoch.Store(epoch)
		}
		part.got()
		r.log.Debug("partition: received", "partition", p, "from", from, "sent_under", fmt.Sprintf("%016x", epoch))
	}
	for _, p := range handoff {
		if int(p) >= len(r.parts) {
			continue
		}
		part := &r.parts[p]
		if exp := part.handoffFrom(); exp != "" {
			part.handedOver()
			r.log.Debug("partition: handed over", "partition", p, "from", from, "expected", exp)
		} else {
			// Early: this node's ring does not show the move yet (or
			// never will: it may pass over the ring that made it the
			// primary, and then relays it, sync.go).
			// from aliases the frame it came in (proto.Decode): keep a copy.
			part.handed.Store(&early{from: strings.Clone(from), at: r.now().UnixNano()})
			r.log.Debug("partition: hand-over before its ring", "partition", p, "from", from)
		}
	}
	if len(done)+len(handoff) > 0 {
		r.onHoldings() // it may now push them on to owners waiting for it
	}
}

// ClaimStale gives up waiting for partitions whose hand-over did not come
// within timeout (their sender failed in the middle of it): the node
// serves them with what it holds, and says so loudly. It then asks every
// other member that may hold a copy to push it: states merge, so any
// count a survivor kept comes back, late rather than never.
func (r *Replicator) ClaimStale(ctx context.Context, timeout time.Duration) {
	now := r.now().UnixNano()
	var claimed []int
	orphans := 0
	for p := range r.parts {
		part := &r.parts[p]
		since := part.waitSince.Load()
		if since == 0 || part.lostAt.Load() != 0 {
			continue
		}
		switch {
		case now-since > int64(timeout):
			claimed = append(claimed, p)
		case part.orphan.Load() && part.handoffFrom() == "" && now-since > int64(min(timeout, orphanClaimAfter)):
			claimed = append(claimed, p)
			orphans++
		}
	}
	if len(claimed) == 0 {
		return
	}
	if pl := r.plan.Load(); pl != nil && r.aloneWithSeeds(pl.ring) {
		// No hand-over is late: nobody answered. Claiming would form a
		// new cluster, which only Bootstrap allows (the join loop says
		// why each seed failed).
		if !r.cfg.Bootstrap {
			r.declinedClaim.Do(func() {
				r.log.Warn("not forming a cluster alone: this node was given seeds and none answered; it waits for them (start one node with --bootstrap to form a new cluster)",
					"waited", timeout)
			})
			return
		}
		for _, p := range claimed {
			r.parts[p].got()
		}
		r.log.Warn("no seed answered: forming a new cluster alone, as --bootstrap allows", "waited", timeout)
		r.onHoldings()
		return
	}
	pl, prev := r.views()
	// A failed member may hold what nobody pushed, and so may a live one
	// whose copy is not current (it answers no pull): strict caps wait
	// for a current copy's Done, or, once no member is failed, for every
	// member's copy (copies.go). A ring of this node alone with nobody
	// failed (an operator forgot the rest) has nothing more to collect.
	for _, p := range claimed {
		r.parts[p].got()
		r.parts[p].claimed.Store(true)
	}
	r.metrics.Claimed.Add(float64(len(claimed)))
	if orphans > 0 {
		r.log.Warn("partitions claimed early: none of their owners is in the ring any more (failed), so nobody pushes them; soft caps are served from what this node has (possibly nothing), strict caps fail closed until a holder's copy arrives", "partitions", orphans, "waited", orphanClaimAfter)
	}
	if n := len(claimed) - orphans; n > 0 {
		r.log.Warn("partitions claimed without a hand-over: their sender never finished; counts may miss its last writes until other holders' copies arrive; they serve soft caps only, strict caps fail closed until a holder's current copy arrives, every member's copy was merged (no member failed), or an operator forgets the missing members", "partitions", n, "waited", timeout)
	}
	r.onHoldings()
	if pl == nil {
		return
	}
	if len(pl.ring.Members()) == 1 {
		for _, p := range claimed {
			if r.collectable(pl.ring) {
				r.startCopies(p, pl.ring.Epoch())
				r.endClaimIfCopied(p)
			}
		}
	}
	asks := map[string]*proto.SyncRequest{}
	for _, p := range claimed {
		for _, m := range holders(prev, pl.ring, p, r.cfg.Name) {
			if asks[m.Addr] == nil {
				asks[m.Addr] = &proto.SyncRequest{From: r.cfg.Name}
			}
			asks[m.Addr].Partitions = append(asks[m.Addr].Partitions, uint32(p))
		}
	}
	r.askAll(ctx, asks)
}

// Reacquire marks every partition this node holds claimed: its quorum
// lapsed while others routed without it, so they may have granted strict
// writes on its partitions. Strict caps are refused on them until a
// current copy's Done arrives (its holders are asked at once and after
// each ring change: askForClaimed), or every member's copy once nobody
// is failed (copies.go); soft caps are served from what it holds
// meanwhile (before, it refused them too until a copy came, and its ad
// servers failed open for SyncTimeout). A hand-over from another node
// that lapsed with it ends no claim: its copy may be as old as this one.
// It returns how many partitions it marked.
func (r *Replicator) Reacquire() int {
	n := 0
	for p := range r.parts {
		part := &r.parts[p]
		if part.have.Load() && part.lostAt.Load() == 0 {
			part.claimed.Store(true)
			part.claimAsk.Store(0)
			part.claimAsks.Store(0)
			n++
		}
	}
	if n > 0 {
		r.log.Warn("partitions claimed after a lapse of the quorum: strict caps fail closed on them until the current owners' copies arrive; soft caps are served", "partitions", n)
		r.onHoldings()
		select {
		case r.pullKick <- struct{}{}:
		default:
		}
	}
	return n
}

// Kick makes the puller run now rather than at its next tick: the node
// came to hold the quorum, and the copies its claims wait for may be
// asked for only now (askForClaimed). It never blocks.
func (r *Replicator) Kick() {
	select {
	case r.pullKick <- struct{}{}:
	default:
	}
}

// Claimed reports whether partition p was claimed without any holder's
// copy: strict caps must not be served from it.
func (r *Replicator) Claimed(p int) bool { return r.parts[p].claimed.Load() }

// NumClaimed counts the partitions claimed without any holder's copy.
func (r *Replicator) NumClaimed() (n int) {
	for p := range r.parts {
		if r.parts[p].claimed.Load() {
			n++
		}
	}
	return n
}

// Unclaim takes every claimed partition as whole: an operator forgot the
// members that held them, and accepts what this node has.
func (r *Replicator) Unclaim() {
	n := 0
	for p := range r.parts {
		if r.parts[p].claimed.Swap(false) {
			n++
		}
	}
	if n > 0 {
		r.log.Warn("claimed partitions taken as whole after an operator forgot members: strict caps are served from them again", "partitions", n)
	}
}

// Missing counts the partitions this node owns now or will own in the
// future ring but does not hold.
func (r *Replicator) Missing() (missing int) {
	pl := r.plan.Load()
	if pl == nil {
		return len(r.parts)
	}
	for p := range r.parts {
		if (contains(names(pl.ring, p), r.cfg.Name) || contains(names(pl.future, p), r.cfg.Name)) && !r.parts[p].have.Load() {
			missing++
		}
	}
	return missing
}

// dropLost drops the state of partitions this node stopped owning, once
// nothing is being handed over from them and a grace period passed.
func (r *Replicator) dropLost(grace time.Duration) {
	now := r.now().UnixNano()
	var drop []bool
	any := false
	for p := range r.parts {
		part := &r.parts[p]
		lost := part.lostAt.Load()
		d := lost > 0 && now-lost > int64(grace) && part.pushing.Load() == 0
		drop = append(drop, d)
		if d && part.lostAt.CompareAndSwap(lost, -1) { // -1: dropped, do not scan again
			part.have.Store(false)
			any = true
		}
	}
	if !any {
		return
	}
	var keys []uint64
	r.eng.PartitionKeys(drop, func(k uint64) bool {
		keys = append(keys, k)
		return true
	})
	for _, k := range keys {
		r.eng.DeleteViewer(k)
	}
	if len(keys) > 0 {
		r.log.Info("dropped state of partitions no longer owned", "viewers", len(keys))
	}
}

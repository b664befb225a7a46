package replication

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/fcap-io/fcap/ring"
)

// plan is, for one ring, what this node sends where. Client writes
// enter the plan of the view they checked ownership with and mark the
// viewers they changed through it; a hand-over waits until the plan it
// leaves has no write in flight, so every write a node acknowledged as
// the primary reaches the next primary before its Done marker.
type Plan struct {
	ring    *ring.Ring
	future  *ring.Ring
	targets [][]*replica // per partition: who receives this node's changes of it
	// standIn, per partition this node backs: the partition's other
	// owners, who receive the soft writes it takes while the client
	// cannot reach the owner (the node's handler standsIn).
	standIn [][]*replica

	inflight [8]struct {
		n atomic.Int64
		_ [56]byte // one cache line each: writers on different slots do not contend
	}
	// before is the plan this one replaced, until it has drained: a
	// writer that entered it before the swap may still be running.
	before atomic.Pointer[Plan]
	// fenced counts the hand-overs that found a write in flight under
	// this plan and waited for it (drain).
	fenced atomic.Int64
	// holds is the node's count of strict writes waiting for their
	// backups (Replicator.HoldPlans), shared by all its plans.
	holds *atomic.Int64
}

// drain waits until no write is in flight under this plan or any plan
// before it (writers only ever enter the current view's plan, so an idle
// old plan stays idle), or the deadline passes. It stays linked to the
// plans before it while a strict write waits for its backups
// (Replicator.HoldPlans): a take-back is marked through them
// (MarkThrough).
func (pl *Plan) drain(deadline time.Time) {
	for p := pl; p != nil; p = p.before.Load() {
		if !p.idle() {
			p.fenced.Add(1)
		}
		for !p.idle() && time.Now().Before(deadline) {
			time.Sleep(100 * time.Microsecond)
		}
	}
	if pl.idle() && (pl.holds == nil || pl.holds.Load() == 0) {
		pl.before.Store(nil) // everything before it drained: let it go
	}
}

// Mark queues a changed viewer for every target of its partition.
func (pl *Plan) Mark(key uint64) {
	p := ring.PartitionOf(key, len(pl.targets))
	for _, rep := range pl.targets[p] {
		rep.markDirty(key, p)
	}
}

// MarkThrough queues a changed viewer for the targets of this plan and
// of every plan before it back to held, the plan a strict write was made
// under (kept linked by HoldPlans): the write's take-back reaches every
// node the plans since may have sent the write to, among them the
// primary a hand-over went to, which took the grant with the partition.
// A primary merges what its partition's other owners push, so the
// take-back counts there even after the hand-over's Done marker.
func (pl *Plan) MarkThrough(held *Plan, key uint64) {
	for p := pl; p != nil; p = p.before.Load() {
		p.Mark(key)
		if p == held {
			return
		}
	}
	held.Mark(key)
}

// HoldPlans notes a strict write that waits for its backups, and
// ReleasePlans its end, once it stood or was taken back: meanwhile no
// plan lets go of the plans before it (Plan.drain), so the write's
// take-back can be marked through every plan since its own
// (MarkThrough).
func (r *Replicator) HoldPlans() { r.holds.Add(1) }

// ReleasePlans ends a HoldPlans.
func (r *Replicator) ReleasePlans() { r.holds.Add(-1) }

// MarkStandIn queues a viewer this node changed as a stand-in for its
// owner for the partition's other owners: the owner merges the write in
// when it can be reached again, and if it never can, this node, already
// holding the write, becomes the primary.
func (pl *Plan) MarkStandIn(key uint64) {
	p := ring.PartitionOf(key, len(pl.standIn))
	for _, rep := range pl.standIn[p] {
		rep.markDirty(key, p)
	}
}

// Enter and Leave bracket a client write under the plan: a hand-over
// waits until the plan it leaves has no write in flight. slot spreads
// writers over counters on different cache lines.
func (pl *Plan) Enter(slot int) { pl.inflight[slot&7].n.Add(1) }
func (pl *Plan) Leave(slot int) { pl.inflight[slot&7].n.Add(-1) }

// idle reports whether no write is in flight under the plan.
func (pl *Plan) idle() bool {
	var sum int64
	for i := range pl.inflight {
		sum += pl.inflight[i].n.Load()
	}
	return sum == 0
}

// Synced is a changed viewer a write waits for: its key and partition.
type Synced struct {
	Key       uint64
	Partition int
}

// WaitSyncedAll waits until every target of each write's partition under
// the plan has applied the viewer's current state, or the timeout
// passes: the writes of one request wait for the same batches, not one
// after another. It returns, per write, nil or why it was not
// acknowledged.
func (pl *Plan) WaitSyncedAll(ws []Synced, timeout time.Duration) []error {
	errs := make([]error, len(ws))
	if pl == nil {
		return errs
	}
	// Mark every viewer first, then one waiter per target: the next batch
	// to each target carries them all.
	waits := map[*replica]chan error{}
	failed := map[*replica]error{}
	for _, w := range ws {
		for _, rep := range pl.targets[w.Partition] {
			if !rep.markDirty(w.Key, w.Partition) {
				failed[rep] = rep.backlogged()
			}
			if waits[rep] == nil {
				waits[rep] = make(chan error, 1)
			}
		}
	}
	for rep, ch := range waits {
		rep.addWaiter(ch)
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	late := false
	for rep, ch := range waits {
		var err error
		if late { // past the timeout: only answers already there count
			select {
			case err = <-ch:
			default:
				err = fmt.Errorf("replication to %s not acknowledged within %v", rep.name, timeout)
			}
		} else {
			select {
			case err = <-ch:
			case <-t.C:
				late = true
				err = fmt.Errorf("replication to %s not acknowledged within %v", rep.name, timeout)
			}
		}
		if err != nil && failed[rep] == nil {
			failed[rep] = err
		}
	}
	var moved error
	if len(waits) > 0 {
		for rep := range waits {
			if cur := rep.r.plan.Load(); cur != nil && cur.ring.Epoch() != pl.ring.Epoch() {
				moved = fmt.Errorf("%w: the ring changed while the backups applied the writes", ErrOtherRing)
			}
			break
		}
	}
	for i, w := range ws {
		for _, rep := range pl.targets[w.Partition] {
			if err := failed[rep]; err != nil {
				errs[i] = err
			}
		}
		if errs[i] == nil && moved != nil && len(pl.targets[w.Partition]) > 0 {
			errs[i] = moved
		}
	}
	return errs
}

// WaitSynced waits until every target of partition p under the plan has
// applied the viewer's current state (strict writes), or the timeout
// passes.
func (pl *Plan) WaitSynced(key uint64, p int, timeout time.Duration) error {
	if pl == nil || len(pl.targets[p]) == 0 {
		return nil
	}
	var backlog error
	for _, rep := range pl.targets[p] {
		if !rep.markDirty(key, p) {
			backlog = rep.backlogged()
		}
	}
	if backlog != nil {
		return backlog
	}
	done := make(chan error, len(pl.targets[p]))
	for _, rep := range pl.targets[p] {
		rep.addWaiter(done)
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	var errs []error
	for range pl.targets[p] {
		select {
		case err := <-done:
			if err != nil {
				errs = append(errs, err)
			}
		case <-t.C:
			return fmt.Errorf("replication to backups not acknowledged within %v", timeout)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	// The backups acknowledged from this plan's ring (sender.otherRing);
	// a ring change while they did may have moved the partition.
	if cur := pl.targets[p][0].r.plan.Load(); cur != nil && cur.ring.Epoch() != pl.ring.Epoch() {
		return fmt.Errorf("%w: the ring changed while the backups applied the write", ErrOtherRing)
	}
	return nil
}

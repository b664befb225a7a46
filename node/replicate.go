package node

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fcap-io/fcap/ring"
)

// Replication and partition moves.
//
// A node replicates state, not operations. The engine reports every
// viewer a client write changed (Allow, Record, Reserve and Release
// return it); the handler marks it dirty for the other owners of its
// partition, and a sender per peer later exports the viewer's current
// state and ships it (proto.Replicate). Receivers merge it into their
// copy (engine.MergeAll), so nothing either side counted is lost whatever
// the order or number of shipments, or which copy is older.
//
// Every node evaluates the same rules on each ring change:
//
//   - The primary of a partition sends every change of it to the
//     partition's other owners, current and future (the ring computed
//     with Joining members Active and Leaving ones gone).
//   - When a partition gains an owner that does not hold it, exactly one
//     node pushes it whole: the first live member of the partition's
//     previous owners (primary first). The push ends with a Done marker.
//   - A node that owns a partition but does not hold it yet refuses its
//     requests until the Done marker arrives (strict caps fail closed,
//     soft caps ask a backup), so it never serves state older than what
//     the cluster acknowledged.
//   - A node starts Joining and turns Active once it holds every
//     partition it will own; a fresh cluster (no owner anywhere) starts
//     at once. A draining node turns Leaving (it keeps serving), pushes
//     what only it must push, then leaves the gossip pool.
//
// Strict writes are acknowledged only after every target applied them.

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
	handed  atomic.Pointer[early]
	lostAt  atomic.Int64 // when it stopped owning it (unix ns), 0 while it owns it, -1 once dropped
	pushing atomic.Int32 // full transfers of it this node is sending
}

// wait marks the partition as awaited.
func (part *partition) wait(now int64) {
	part.have.Store(false)
	part.waitSince.CompareAndSwap(0, now)
}

// got marks the partition as held.
func (part *partition) got() {
	part.have.Store(true)
	part.waitSince.Store(0)
	part.from.Store(nil)
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

// plan is, for one ring, what this node sends where. Client writes
// enter the plan of the view they checked ownership with and mark the
// viewers they changed through it; a hand-over waits until the plan it
// leaves has no write in flight, so every write a node acknowledged as
// the primary reaches the next primary before its Done marker.
type plan struct {
	ring    *ring.Ring
	future  *ring.Ring
	targets [][]*replica // per partition: who receives this node's changes of it
	// standIn, per partition this node backs: the partition's other
	// owners, who receive the soft writes it takes while the client
	// cannot reach the owner (handlers.go standsIn).
	standIn [][]*replica

	inflight [8]struct {
		n atomic.Int64
		_ [56]byte // one cache line each: writers on different slots do not contend
	}
	// before is the plan this one replaced, until it has drained: a
	// writer that entered it before the swap may still be running.
	before atomic.Pointer[plan]
}

// drain waits until no write is in flight under this plan or any plan
// before it (writers only ever enter the current view's plan, so an idle
// old plan stays idle), or the deadline passes.
func (pl *plan) drain(deadline time.Time) {
	for p := pl; p != nil; p = p.before.Load() {
		for !p.idle() && time.Now().Before(deadline) {
			time.Sleep(100 * time.Microsecond)
		}
	}
	if pl.idle() {
		pl.before.Store(nil) // everything before it drained: let it go
	}
}

// mark queues a changed viewer for every target of its partition.
func (pl *plan) mark(key uint64) {
	p := ring.PartitionOf(key, len(pl.targets))
	for _, rep := range pl.targets[p] {
		rep.markDirty(key, p)
	}
}

// markStandIn queues a viewer this node changed as a stand-in for its
// owner for the partition's other owners: the owner merges the write in
// when it can be reached again, and if it never can, this node, already
// holding the write, becomes the primary.
func (pl *plan) markStandIn(key uint64) {
	p := ring.PartitionOf(key, len(pl.standIn))
	for _, rep := range pl.standIn[p] {
		rep.markDirty(key, p)
	}
}

func (pl *plan) enter(slot int) { pl.inflight[slot&7].n.Add(1) }
func (pl *plan) leave(slot int) { pl.inflight[slot&7].n.Add(-1) }

// idle reports whether no write is in flight under the plan.
func (pl *plan) idle() bool {
	var sum int64
	for i := range pl.inflight {
		sum += pl.inflight[i].n.Load()
	}
	return sum == 0
}

type replicator struct {
	n     *Node
	parts []partition
	plan  atomic.Pointer[plan]

	mu sync.Mutex
	// The fields below are guarded by mu.
	replicas map[string]*replica
	prev     *ring.Ring // the ring before the current one

	throttle *throttle // paces whole-partition transfers

	stop chan struct{}
}

func newReplicator(n *Node, partitions int) *replicator {
	return &replicator{
		n:        n,
		parts:    make([]partition, partitions),
		replicas: map[string]*replica{},
		stop:     make(chan struct{}),
		throttle: newThrottle(n.cfg.TransferRate),
	}
}

// syncing reports whether this node owns partition p in its ring but does
// not hold it yet.
func (r *replicator) syncing(p int) bool {
	return !r.parts[p].have.Load()
}

// future computes the ring as it will be once Joining members are Active
// and Leaving ones are gone.
func (r *replicator) future(cur *ring.Ring) *ring.Ring {
	var ms []ring.Member
	changed := false
	for _, m := range cur.Members() {
		switch m.State {
		case ring.Joining:
			m.State = ring.Active
			changed = true
		case ring.Leaving:
			changed = true
			continue
		}
		ms = append(ms, m)
	}
	if !changed {
		return cur
	}
	f, err := ring.Build(r.n.cfg.Membership.Ring, ms)
	if err != nil {
		r.n.log.Error("future ring", "err", err)
		return cur
	}
	return f
}

// names returns the names of partition p's owners in ring x.
func names(x *ring.Ring, p int) []string {
	if x == nil {
		return nil
	}
	var out []string
	for _, o := range x.Owners(p) {
		out = append(out, x.Member(o).Name)
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// soleSurvivor reports whether self was one of p's previous owners and
// every other one is gone: nobody is left to hand p over to it.
func soleSurvivor(prev, cur *ring.Ring, p int, self string) bool {
	owners := names(prev, p)
	if !contains(owners, self) {
		return false
	}
	for _, name := range owners {
		if name != self && survived(prev, cur, name) {
			return false
		}
	}
	return true
}

// survived reports whether member name of ring prev is still in cur as
// the same process. A node killed and started again faster than gossip
// declares it dead shows up only as a new incarnation of the same name:
// it holds nothing, so it can neither push a partition nor hand one over.
func survived(prev, cur *ring.Ring, name string) bool {
	j, ok := cur.Find(name)
	if !ok {
		return false
	}
	if prev == nil {
		return true
	}
	i, ok := prev.Find(name)
	return !ok || prev.Member(i).Incarnation == cur.Member(j).Incarnation
}

// pusher is the node that pushes partition p whole to its new owners:
// the first member of its previous owners (then its current ones) that
// is still in the ring, and not restarted since.
func pusher(prev, cur *ring.Ring, p int) string {
	for _, list := range [][]string{names(prev, p), names(cur, p)} {
		for _, name := range list {
			if survived(prev, cur, name) {
				return name
			}
		}
	}
	return ""
}

// onRing recomputes the plan for a new ring: targets of ongoing
// replication, full transfers to start, partitions this node now waits
// for, and whether a Joining node may turn Active.
// The transfers and hand-overs it plans are started by the returned
// function, which the caller runs once the view using the new plan is in
// place: a hand-over must not find the old plan idle before writers
// stop entering it.
func (r *replicator) onRing(cur *ring.Ring) (*plan, func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	self := r.n.cfg.Name
	prev := r.prev
	old := r.plan.Load()
	fut := r.future(cur)
	pl := &plan{ring: cur, future: fut, targets: make([][]*replica, len(r.parts)), standIn: make([][]*replica, len(r.parts))}
	if old != nil {
		pl.before.Store(old)
	}
	// A fresh cluster: nobody owns anything, so nobody holds anything
	// anyone could wait for. A node told to join others decides that only
	// once it has joined them: before, its ring holds just itself.
	bootstrap := cur.ActiveMembers() == 0 && r.n.joinedOrAlone(cur)
	// A peer restarted since the last ring holds nothing: forget what
	// was sent to its earlier self before anything asks heldBy.
	for name, rep := range r.replicas {
		if i, ok := cur.Find(name); ok {
			m := cur.Member(i)
			rep.setMember(m.Addr, m.Incarnation)
		}
	}
	now := time.Now().UnixNano()
	wanted := map[string]bool{}
	// Transfers and hand-overs start only after the new plan is in place:
	// a write between a transfer's pass over the engine and the plan
	// would otherwise reach the new owner by neither.
	type move struct {
		rep     *replica
		p       int
		handoff bool
	}
	var moves []move
	for p := range r.parts {
		part := &r.parts[p]
		curOwners, futOwners := names(cur, p), names(fut, p)
		mine := contains(curOwners, self) || contains(futOwners, self)
		push := pusher(prev, cur, p)
		had := part.have.Load()
		switch {
		case !mine:
			// Writes go elsewhere now: this node's copy is stale from
			// here on. It may still push what it had (below), but must
			// never serve it if ownership comes back without a transfer.
			part.have.Store(false)
			part.waitSince.Store(0) // nor wait for it (a joining node's first ring holds only itself)
			part.from.Store(nil)
			part.lostAt.CompareAndSwap(0, now)
		default:
			part.lostAt.Store(0)
			switch {
			case part.have.Load():
			case bootstrap || soleSurvivor(prev, cur, p, self):
				// Nobody else can hand it over: a fresh cluster, or every
				// other previous owner is gone. This node is its authority.
				part.got()
				r.n.log.Debug("partition: authority", "partition", p, "bootstrap", bootstrap)
			default:
				part.wait(now)
			}
		}
		if h := part.handed.Load(); h != nil && len(curOwners) > 0 && curOwners[0] == h.from {
			part.handed.Store(nil) // its sender is primary again: that hand-over is over
		}
		if from := part.handoffFrom(); from != "" {
			if !survived(prev, cur, from) {
				// The previous primary died (or restarted) in the middle
				// of its hand-over: nothing more will come.
				part.got()
				r.n.log.Warn("partition: previous primary gone before its hand-over; serving what arrived", "partition", p, "from", from)
			} else if len(curOwners) == 0 || curOwners[0] != self {
				part.from.Store(nil) // no longer its primary: no hand-over due
			}
		}
		// A primary that moves between two live nodes is handed over: the
		// new one waits (refusing the partition) until the old one, which
		// stops serving it as soon as its ring shows the move, has sent
		// its last changes and a Done marker. One node writes at a time.
		prevOwners := names(prev, p)
		if len(prevOwners) > 0 && len(curOwners) > 0 && prevOwners[0] != curOwners[0] {
			oldAlive := survived(prev, cur, prevOwners[0])
			switch {
			case curOwners[0] == self && oldAlive:
				if part.awaitHandoff(now, prevOwners[0]) {
					r.n.log.Debug("partition: waiting for hand-over", "partition", p, "from", prevOwners[0])
				}
			case prevOwners[0] == self:
				if rep := r.replicaLocked(cur, fut, curOwners[0]); rep != nil {
					moves = append(moves, move{rep, p, true})
					wanted[curOwners[0]] = true
				}
			}
		}
		// A peer that no longer owns p may drop it: if it becomes an
		// owner again it gets p whole again.
		for name, rep := range r.replicas {
			if !contains(curOwners, name) && !contains(futOwners, name) {
				rep.forget(p)
			}
		}
		// Ongoing replication: the primary sends changes to every other
		// current and future owner.
		if len(curOwners) > 0 && curOwners[0] == self {
			for _, name := range append(curOwners[1:], futOwners...) {
				if name == self || contains(namesOf(pl.targets[p]), name) {
					continue
				}
				rep := r.replicaLocked(cur, fut, name)
				if rep == nil {
					continue
				}
				pl.targets[p] = append(pl.targets[p], rep)
				wanted[name] = true
				r.heldBy(prev, cur, name, p) // notes a backup that already held p
			}
		}
		// Stand-in writes: a backup sends the writes it takes for an
		// unreachable owner to every other current and future owner.
		if len(curOwners) > 1 && curOwners[0] != self && contains(curOwners, self) {
			for _, name := range append(append([]string(nil), curOwners...), futOwners...) {
				if name == self || contains(namesOf(pl.standIn[p]), name) {
					continue
				}
				if rep := r.replicaLocked(cur, fut, name); rep != nil {
					pl.standIn[p] = append(pl.standIn[p], rep)
					wanted[name] = true
				}
			}
		}
		// Full transfers: if this node is p's pusher and holds p, it
		// pushes p to every owner that may not hold it: one that was not
		// an owner in the previous ring, or was in an earlier incarnation
		// (a restart holds nothing), unless this node already sent it p
		// since. An owner still waiting for an earlier pusher that died
		// asks for p itself (sync.go).
		if push == self && had {
			for _, name := range append(append([]string(nil), curOwners...), futOwners...) {
				if name == self || r.heldBy(prev, cur, name, p) {
					continue
				}
				rep := r.replicaLocked(cur, fut, name)
				if rep == nil {
					continue
				}
				wanted[name] = true
				moves = append(moves, move{rep, p, false})
			}
		}
	}
	for name, rep := range r.replicas {
		// A peer gone from the ring is sent nothing more: what was queued
		// for it is dropped with its sender (its queue and lag with it),
		// since a member that comes back gets its partitions whole. A
		// peer still in the ring keeps its sender until it has sent what
		// it has.
		if _, member := cur.Find(name); !wanted[name] && (!member || !rep.busy()) {
			rep.close()
			delete(r.replicas, name)
		}
	}
	r.plan.Store(pl)
	r.prev = cur
	return pl, func() {
		for _, m := range moves {
			r.n.log.Debug("partition: sending", "partition", m.p, "to", m.rep.name, "handoff", m.handoff, "owners", names(cur, m.p), "before", names(prev, m.p))
			if m.handoff {
				m.rep.handoff(m.p, old)
			} else {
				m.rep.transfer(m.p)
			}
		}
	}
}

// heldBy reports whether peer name can be taken to hold partition p: this
// node has sent it p since it became an owner, or it was one of p's owners
// in the previous ring in the same incarnation (so it received p then, or
// is still receiving it and asks for it if its pusher dies: sync.go). The
// latter is noted in the peer's sender, so that underReplicated counts it
// held; a peer still receiving p reports the partition as syncing itself.
func (r *replicator) heldBy(prev, cur *ring.Ring, name string, p int) bool {
	rep := r.replicas[name]
	if rep != nil && rep.hasSent(p) {
		return true
	}
	if prev == nil || !contains(names(prev, p), name) {
		return false
	}
	i, ok := prev.Find(name)
	j, ok2 := cur.Find(name)
	if !ok || !ok2 || prev.Member(i).Incarnation != cur.Member(j).Incarnation {
		return false
	}
	if rep != nil {
		rep.markHeld(p)
	}
	return true
}

func namesOf(reps []*replica) []string {
	var out []string
	for _, rep := range reps {
		out = append(out, rep.name)
	}
	return out
}

// replicaLocked returns the sender for a member, creating it.
func (r *replicator) replicaLocked(cur, fut *ring.Ring, name string) *replica {
	var m ring.Member
	for _, x := range []*ring.Ring{cur, fut} {
		if i, ok := x.Find(name); ok {
			m = x.Member(i)
		}
	}
	if m.Addr == "" {
		return nil
	}
	rep := r.replicas[name]
	if rep == nil {
		rep = newReplica(r, name, m.Addr)
		r.replicas[name] = rep
		r.n.goFunc(rep.run)
	}
	rep.setMember(m.Addr, m.Incarnation)
	return rep
}

// syncingCount counts partitions this node owns but does not hold.
func (r *replicator) syncingCount(cur *ring.Ring) int {
	n := 0
	for p := range r.parts {
		if cur.Rank(p, r.n.cfg.Name) >= 0 && !r.parts[p].have.Load() {
			n++
		}
	}
	return n
}

// received marks partitions whose full transfer, or hand-over, has
// arrived from a peer. A transfer's Done does not end a wait for a
// hand-over; a hand-over counts only from the node it is awaited from.
func (r *replicator) received(from string, done, handoff []uint32) {
	for _, p := range done {
		if int(p) < len(r.parts) && r.parts[p].handoffFrom() == "" {
			r.parts[p].got()
			r.n.log.Debug("partition: received", "partition", p, "from", from)
		}
	}
	for _, p := range handoff {
		if int(p) >= len(r.parts) {
			continue
		}
		part := &r.parts[p]
		if exp := part.handoffFrom(); exp != "" {
			part.got()
			r.n.log.Debug("partition: handed over", "partition", p, "from", from, "expected", exp)
		} else {
			// Early: this node's ring does not show the move yet.
			part.handed.Store(&early{from: from, at: time.Now().UnixNano()})
		}
	}
	if len(done)+len(handoff) > 0 {
		r.n.maybeActivate()
		r.n.replan() // it may now push them on to owners waiting for it
	}
}

// claimStale gives up waiting for partitions whose hand-over did not come
// within timeout (their sender failed in the middle of it): the node
// serves them with what it holds, and says so loudly. It then asks every
// other member that may hold a copy to push it: states merge, so any
// count a survivor kept comes back, late rather than never.
func (r *replicator) claimStale(ctx context.Context, timeout time.Duration) {
	now := time.Now().UnixNano()
	var claimed []int
	for p := range r.parts {
		part := &r.parts[p]
		if since := part.waitSince.Load(); since != 0 && now-since > int64(timeout) && part.lostAt.Load() == 0 {
			part.got()
			claimed = append(claimed, p)
		}
	}
	if len(claimed) == 0 {
		return
	}
	r.n.metrics.claimed.Add(float64(len(claimed)))
	r.n.log.Warn("partitions claimed without a hand-over: their sender never finished; counts may miss its last writes until other holders' copies arrive", "partitions", len(claimed), "waited", timeout)
	r.n.replan()
	pl := r.plan.Load()
	if pl == nil {
		return
	}
	r.mu.Lock()
	prev := r.prev
	r.mu.Unlock()
	asks := map[string][]uint32{}
	for _, p := range claimed {
		for _, m := range holders(prev, pl.ring, p, r.n.cfg.Name) {
			asks[m.Addr] = append(asks[m.Addr], uint32(p))
		}
	}
	for addr, ps := range asks {
		if err := r.ask(ctx, addr, ps, nil); err != nil {
			r.n.log.Debug("partition: asking for copies of claimed partitions", "from", addr, "partitions", len(ps), "err", err)
		}
	}
}

// complete reports whether this node holds every partition it owns now
// and will own in the future ring.
func (r *replicator) complete() (missing int) {
	pl := r.plan.Load()
	if pl == nil {
		return len(r.parts)
	}
	for p := range r.parts {
		if (contains(names(pl.ring, p), r.n.cfg.Name) || contains(names(pl.future, p), r.n.cfg.Name)) && !r.parts[p].have.Load() {
			missing++
		}
	}
	return missing
}

// handing counts full transfers being sent.
func (r *replicator) handing() int {
	n := 0
	for p := range r.parts {
		n += int(r.parts[p].pushing.Load())
	}
	return n
}

// queued counts changed viewers not yet sent, and the age of the oldest.
func (r *replicator) queued() (n int, lag time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rep := range r.replicas {
		k, l := rep.backlog()
		n += k
		lag = max(lag, l)
	}
	return n, lag
}

// underReplicated counts partitions this node is primary of whose other
// owners have not all received them.
func (r *replicator) underReplicated() int {
	pl := r.plan.Load()
	if pl == nil {
		return 0
	}
	n := 0
	for p, reps := range pl.targets {
		for _, rep := range reps {
			if !rep.hasSent(p) {
				n++
				break
			}
		}
	}
	return n
}

// waitSynced waits until every target of partition p under plan pl has
// applied the viewer's current state (strict writes), or the timeout
// passes.
func (r *replicator) waitSynced(pl *plan, key uint64, p int, timeout time.Duration) error {
	if pl == nil || len(pl.targets[p]) == 0 {
		return nil
	}
	done := make(chan error, len(pl.targets[p]))
	for _, rep := range pl.targets[p] {
		rep.markDirty(key, p)
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
	return errors.Join(errs...)
}

// janitor drops the state of partitions this node stopped owning, once
// nothing is being handed over from them and a grace period passed.
func (r *replicator) janitor(grace time.Duration) {
	now := time.Now().UnixNano()
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
	r.n.engine.Keys(func(k uint64) bool {
		if drop[ring.PartitionOf(k, len(r.parts))] {
			keys = append(keys, k)
		}
		return true
	})
	for _, k := range keys {
		r.n.engine.DeleteViewer(k)
	}
	if len(keys) > 0 {
		r.n.log.Info("dropped state of partitions no longer owned", "viewers", len(keys))
	}
}

func (r *replicator) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	select {
	case <-r.stop:
	default:
		close(r.stop)
	}
	for _, rep := range r.replicas {
		rep.close()
	}
}

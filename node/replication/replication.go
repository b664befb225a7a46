// Package replication replicates a node's changes to the other owners of
// its partitions and moves partitions between nodes when the ring changes.
//
// A node replicates state, not operations. A client write changes one
// viewer, the one it names (or, for Link, the viewer and the device);
// the handler marks that viewer dirty for the other owners of its
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
package replication

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
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
	handed  atomic.Pointer[early]
	lostAt  atomic.Int64 // when it stopped owning it (unix ns), 0 while it owns it, -1 once dropped
	pushing atomic.Int32 // full transfers of it this node is sending
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
}

// wait marks the partition as awaited.
func (part *partition) wait(now int64) {
	part.have.Store(false)
	part.waitSince.CompareAndSwap(0, now)
}

// got marks the partition as held.
func (part *partition) got() {
	part.claimed.Store(false)
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
}

// drain waits until no write is in flight under this plan or any plan
// before it (writers only ever enter the current view's plan, so an idle
// old plan stays idle), or the deadline passes.
func (pl *Plan) drain(deadline time.Time) {
	for p := pl; p != nil; p = p.before.Load() {
		for !p.idle() && time.Now().Before(deadline) {
			time.Sleep(100 * time.Microsecond)
		}
	}
	if pl.idle() {
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

// Replicator replicates this node's changes to the other owners of its
// partitions, moves partitions on ring changes and tracks which
// partitions this node holds. It knows the node only through its Config
// and Deps.
type Replicator struct {
	cfg     Config
	log     *slog.Logger
	eng     Engine
	wal     Log
	peers   Peers
	metrics Metrics
	hooks   Hooks

	parts []partition
	plan  atomic.Pointer[Plan]

	mu sync.Mutex
	// The fields below are guarded by mu.
	replicas map[string]*replica
	prev     *ring.Ring // the ring before the current one

	throttle  *throttle    // paces whole-partition transfers
	transfers atomic.Int64 // whole partitions and hand-overs sent

	sawPeer       atomic.Bool // some ring held another member: this node has been part of a cluster
	declinedClaim sync.Once   // logs that a node alone with seeds does not claim
	offerPending  atomic.Bool // the node recovered state it has not offered yet (recovery.go)

	stop chan struct{}
	wg   sync.WaitGroup // the senders and Run's loops
}

// New returns a Replicator that holds no partition yet; OnRing gives it
// its first plan.
func New(cfg Config, deps Deps) *Replicator {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Replicator{
		cfg:      cfg,
		log:      cfg.Logger,
		eng:      deps.Engine,
		wal:      deps.Log,
		peers:    deps.Peers,
		metrics:  deps.Metrics,
		hooks:    deps.Hooks,
		parts:    make([]partition, cfg.Ring.Partitions),
		replicas: map[string]*replica{},
		stop:     make(chan struct{}),
		throttle: newThrottle(cfg.TransferRate),
	}
}

// transferred counts whole partitions and hand-overs sent.
func (r *Replicator) transferred(n int) {
	r.transfers.Add(int64(n))
	r.metrics.Transfers.Add(float64(n))
}

// Transfers returns how many whole partitions and hand-overs this node
// has sent since it started.
func (r *Replicator) Transfers() int64 { return r.transfers.Load() }

// onHoldings tells the node that partitions arrived or were claimed: it
// replans (it may now push them on) and may turn Active.
func (r *Replicator) onHoldings() {
	if r.hooks.HoldingsChanged != nil {
		r.hooks.HoldingsChanged()
	}
}

// left reports whether the node has left the gossip pool.
func (r *Replicator) left() bool { return r.hooks.Left != nil && r.hooks.Left() }

// joinedOrAlone reports whether this node may judge the cluster by the
// ring x: it has no seeds to join, or x holds other members. It asks x,
// not gossip: gossip can count the members it just joined while x, the
// ring being planned, was built before they arrived and holds only this
// node, which would look like a fresh cluster with nobody Active.
func (r *Replicator) joinedOrAlone(x *ring.Ring) bool {
	return !r.cfg.Joins || len(x.Members()) > 1
}

// aloneWithSeeds reports whether this node was told to join others, has
// never had a peer, and its ring x holds only itself. Partitions it
// claims then would form a new cluster of one: only Bootstrap allows
// that, so a typo in --join cannot split a cluster.
func (r *Replicator) aloneWithSeeds(x *ring.Ring) bool {
	return r.cfg.Joins && len(x.Members()) <= 1 && !r.sawPeer.Load()
}

// Syncing reports whether this node owns partition p in its ring but does
// not hold it yet.
func (r *Replicator) Syncing(p int) bool {
	return !r.parts[p].have.Load()
}

// future computes the ring as it will be once Joining members are Active
// and Leaving ones are gone.
func (r *Replicator) future(cur *ring.Ring) *ring.Ring {
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
	f, err := ring.Build(r.cfg.Ring, ms)
	if err != nil {
		r.log.Error("future ring", "err", err)
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

// OnRing recomputes the plan for a new ring: targets of ongoing
// replication, full transfers to start, partitions this node now waits
// for, and whether a Joining node may turn Active.
// The transfers and hand-overs it plans are started by the returned
// function, which the caller runs once the view using the new plan is in
// place: a hand-over must not find the old plan idle before writers
// stop entering it.
func (r *Replicator) OnRing(cur *ring.Ring) (*Plan, func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(cur.Members()) > 1 {
		r.sawPeer.Store(true)
	}
	old := r.plan.Load()
	fut := r.future(cur)
	pn := &planner{
		r: r, self: r.cfg.Name, prev: r.prev, cur: cur, fut: fut,
		pl:     &Plan{ring: cur, future: fut, targets: make([][]*replica, len(r.parts)), standIn: make([][]*replica, len(r.parts))},
		now:    time.Now().UnixNano(),
		wanted: map[string]bool{},
	}
	if old != nil {
		pn.pl.before.Store(old)
	}
	// A fresh cluster: nobody owns anything, so nobody holds anything
	// anyone could wait for. A node told to join others decides that only
	// once it has joined them: before, its ring holds just itself.
	pn.bootstrap = cur.ActiveMembers() == 0 && r.joinedOrAlone(cur)
	// A peer restarted since the last ring holds nothing: forget what
	// was sent to its earlier self before anything asks heldBy.
	for name, rep := range r.replicas {
		if i, ok := cur.Find(name); ok {
			m := cur.Member(i)
			rep.setMember(m.Addr, m.Incarnation)
		}
	}
	pn.offer = offering(&r.offerPending, cur, pn.self)
	for p := range r.parts {
		pn.partition(p)
	}
	for name, rep := range r.replicas {
		// A peer gone from the ring is sent nothing more: what was queued
		// for it is dropped with its sender (its queue and lag with it),
		// since a member that comes back gets its partitions whole. A
		// peer still in the ring keeps its sender until it has sent what
		// it has.
		if _, member := cur.Find(name); !pn.wanted[name] && (!member || !rep.busy()) {
			rep.close()
			delete(r.replicas, name)
		}
	}
	r.plan.Store(pn.pl)
	r.prev = cur
	prev, moves, offered := pn.prev, pn.moves, pn.offered
	if pn.offer {
		r.log.Info("offering the recovered state of the partitions it backs to their primaries", "partitions", len(offered))
	}
	return pn.pl, func() {
		for _, m := range offered {
			m.rep.offer(m.p)
		}
		for _, m := range moves {
			r.log.Debug("partition: sending", "partition", m.p, "to", m.rep.name, "handoff", m.handoff, "owners", names(cur, m.p), "before", names(prev, m.p))
			if m.handoff {
				m.rep.handoff(m.p, old)
			} else {
				m.rep.transfer(m.p)
			}
		}
	}
}

// planner is one OnRing pass over the partitions, under Replicator.mu.
type planner struct {
	r              *Replicator
	self           string
	prev, cur, fut *ring.Ring
	pl             *Plan
	now            int64 // unix ns
	bootstrap      bool  // a fresh cluster: this node is every partition's authority
	wanted         map[string]bool
	// moves are the transfers and hand-overs to start. They start only
	// after the new plan is in place: a write between a transfer's pass
	// over the engine and the plan would otherwise reach the new owner by
	// neither.
	moves []move
	// offered are the partitions to offer (recovery.go), when offer is set.
	offer   bool
	offered []move
}

// move is a whole partition to send to a peer, or to hand over.
type move struct {
	rep     *replica
	p       int
	handoff bool
}

// partition plans partition p.
func (pn *planner) partition(p int) {
	curOwners, futOwners := names(pn.cur, p), names(pn.fut, p)
	had := pn.r.parts[p].have.Load()
	pn.holding(p, curOwners, futOwners)
	pn.handover(p, curOwners)
	// A peer that no longer owns p may drop it: if it becomes an owner
	// again it gets p whole again.
	for name, rep := range pn.r.replicas {
		if !contains(curOwners, name) && !contains(futOwners, name) {
			rep.forget(p)
		}
	}
	pn.replicate(p, curOwners, futOwners)
	if pn.offer {
		pn.offers(p, curOwners, futOwners)
	}
	// Full transfers: if this node is p's pusher and holds p, it pushes p
	// to every owner that may not hold it: one that was not an owner in
	// the previous ring, or was in an earlier incarnation (a restart
	// holds nothing), unless this node already sent it p since. An owner
	// still waiting for an earlier pusher that died asks for p itself
	// (sync.go).
	if pusher(pn.prev, pn.cur, p) == pn.self && had {
		for _, name := range append(append([]string(nil), curOwners...), futOwners...) {
			if name == pn.self || pn.r.heldBy(pn.prev, pn.cur, name, p) {
				continue
			}
			if rep := pn.sender(name); rep != nil {
				pn.moves = append(pn.moves, move{rep, p, false})
			}
		}
	}
}

// sender returns the sender to a member, creating it, and notes it wanted.
func (pn *planner) sender(name string) *replica {
	rep := pn.r.replicaLocked(pn.cur, pn.fut, name)
	if rep != nil {
		pn.wanted[name] = true
	}
	return rep
}

// holding updates whether this node holds p, waits for it, or lost it.
func (pn *planner) holding(p int, curOwners, futOwners []string) {
	part := &pn.r.parts[p]
	switch {
	case !contains(curOwners, pn.self) && !contains(futOwners, pn.self):
		// Writes go elsewhere now: this node's copy is stale from here
		// on. It may still push what it had (partition), but must never
		// serve it if ownership comes back without a transfer.
		if part.lostAt.CompareAndSwap(0, pn.now) {
			part.wholeAtLoss.Store(part.have.Load())
		}
		part.have.Store(false)
		part.waitSince.Store(0) // nor wait for it (a joining node's first ring holds only itself)
		part.from.Store(nil)
	default:
		part.lostAt.Store(0)
		part.wholeAtLoss.Store(false)
		if len(curOwners) > 0 && curOwners[0] == pn.self {
			part.wasPrimary.Store(true)
		}
		switch {
		case part.have.Load():
		case pn.bootstrap:
			// A fresh cluster: nobody else has anything to hand over.
			// This node is every partition's authority.
			part.got()
			pn.r.log.Debug("partition: authority", "partition", p, "bootstrap", true)
		default:
			part.wait(pn.now)
		}
	}
	if h := part.handed.Load(); h != nil && len(curOwners) > 0 && curOwners[0] == h.from {
		part.handed.Store(nil) // its sender is primary again: that hand-over is over
	}
	if from := part.handoffFrom(); from != "" {
		if !survived(pn.prev, pn.cur, from) {
			// The previous primary died (or restarted) in the middle of
			// its hand-over: nothing more will come.
			part.got()
			pn.r.log.Warn("partition: previous primary gone before its hand-over; serving what arrived", "partition", p, "from", from)
		} else if len(curOwners) == 0 || curOwners[0] != pn.self {
			part.from.Store(nil) // no longer its primary: no hand-over due
		}
	}
}

// handover plans p's hand-over when its primary moves between two live
// nodes: the new one waits (refusing the partition) until the old one,
// which stops serving it as soon as its ring shows the move, has sent its
// last changes and a Done marker. One node writes at a time.
func (pn *planner) handover(p int, curOwners []string) {
	prevOwners := names(pn.prev, p)
	if len(prevOwners) == 0 || len(curOwners) == 0 || prevOwners[0] == curOwners[0] {
		return
	}
	switch {
	case curOwners[0] == pn.self && survived(pn.prev, pn.cur, prevOwners[0]):
		if pn.r.parts[p].awaitHandoff(pn.now, prevOwners[0]) {
			pn.r.log.Debug("partition: waiting for hand-over", "partition", p, "from", prevOwners[0])
		}
	case prevOwners[0] == pn.self:
		if rep := pn.sender(curOwners[0]); rep != nil {
			pn.moves = append(pn.moves, move{rep, p, true})
		}
	}
}

// replicate plans who receives this node's changes of p: as its primary,
// every other current and future owner; as a backup standing in for an
// unreachable owner, every other current and future owner too.
func (pn *planner) replicate(p int, curOwners, futOwners []string) {
	pl := pn.pl
	if len(curOwners) > 0 && curOwners[0] == pn.self {
		for _, name := range append(curOwners[1:], futOwners...) {
			if name == pn.self || contains(namesOf(pl.targets[p]), name) {
				continue
			}
			if rep := pn.sender(name); rep != nil {
				pl.targets[p] = append(pl.targets[p], rep)
				pn.r.heldBy(pn.prev, pn.cur, name, p) // notes a backup that already held p
			}
		}
	}
	if len(curOwners) > 1 && curOwners[0] != pn.self && contains(curOwners, pn.self) {
		for _, name := range append(append([]string(nil), curOwners...), futOwners...) {
			if name == pn.self || contains(namesOf(pl.standIn[p]), name) {
				continue
			}
			if rep := pn.sender(name); rep != nil {
				pl.standIn[p] = append(pl.standIn[p], rep)
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
func (r *Replicator) heldBy(prev, cur *ring.Ring, name string, p int) bool {
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
func (r *Replicator) replicaLocked(cur, fut *ring.Ring, name string) *replica {
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
		r.wg.Go(rep.run)
	}
	rep.setMember(m.Addr, m.Incarnation)
	return rep
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
func (r *Replicator) received(from string, done, handoff []uint32) {
	for _, p := range done {
		if int(p) < len(r.parts) && r.parts[p].handoffFrom() == "" {
			r.parts[p].got()
			r.log.Debug("partition: received", "partition", p, "from", from)
		}
	}
	for _, p := range handoff {
		if int(p) >= len(r.parts) {
			continue
		}
		part := &r.parts[p]
		if exp := part.handoffFrom(); exp != "" {
			part.got()
			r.log.Debug("partition: handed over", "partition", p, "from", from, "expected", exp)
		} else {
			// Early: this node's ring does not show the move yet (or
			// never will: it may pass over the ring that made it the
			// primary, and then relays it, sync.go).
			part.handed.Store(&early{from: from, at: time.Now().UnixNano()})
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
	now := time.Now().UnixNano()
	var claimed []int
	for p := range r.parts {
		part := &r.parts[p]
		if since := part.waitSince.Load(); since != 0 && now-since > int64(timeout) && part.lostAt.Load() == 0 {
			claimed = append(claimed, p)
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
	failed := r.hooks.Failed != nil && r.hooks.Failed() > 0
	for _, p := range claimed {
		r.parts[p].got()
		// Without a failed member, and with no earlier owner alive to
		// push it, nobody else can hold it: an operator forgot them.
		if failed || (pl != nil && prev != nil && len(holders(prev, pl.ring, p, r.cfg.Name)) > 0) {
			r.parts[p].claimed.Store(true)
		}
	}
	r.metrics.Claimed.Add(float64(len(claimed)))
	r.log.Warn("partitions claimed without a hand-over: their sender never finished; counts may miss its last writes until other holders' copies arrive; they serve soft caps only, strict caps fail closed until a holder's copy arrives or an operator forgets the missing members", "partitions", len(claimed), "waited", timeout)
	r.onHoldings()
	if pl == nil {
		return
	}
	asks := map[string][]uint32{}
	for _, p := range claimed {
		for _, m := range holders(prev, pl.ring, p, r.cfg.Name) {
			asks[m.Addr] = append(asks[m.Addr], uint32(p))
		}
	}
	for addr, ps := range asks {
		if err := r.ask(ctx, addr, &proto.SyncRequest{From: r.cfg.Name, Partitions: ps}); err != nil {
			r.log.Debug("partition: asking for copies of claimed partitions", "from", addr, "partitions", len(ps), "err", err)
		}
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

// Handing counts full transfers being sent.
func (r *Replicator) Handing() int {
	n := 0
	for p := range r.parts {
		n += int(r.parts[p].pushing.Load())
	}
	return n
}

// Queued counts changed viewers not yet sent, and the age of the oldest.
func (r *Replicator) Queued() (n int, lag time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rep := range r.replicas {
		k, l := rep.backlog()
		n += k
		lag = max(lag, l)
	}
	return n, lag
}

// UnderReplicated counts partitions this node is primary of whose other
// owners have not all received them.
func (r *Replicator) UnderReplicated() int {
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

// WaitSynced waits until every target of partition p under the plan has
// applied the viewer's current state (strict writes), or the timeout
// passes.
func (pl *Plan) WaitSynced(key uint64, p int, timeout time.Duration) error {
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

// dropLost drops the state of partitions this node stopped owning, once
// nothing is being handed over from them and a grace period passed.
func (r *Replicator) dropLost(grace time.Duration) {
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
	r.eng.Keys(func(k uint64) bool {
		if drop[ring.PartitionOf(k, len(r.parts))] {
			keys = append(keys, k)
		}
		return true
	})
	for _, k := range keys {
		r.eng.DeleteViewer(k)
	}
	if len(keys) > 0 {
		r.log.Info("dropped state of partitions no longer owned", "viewers", len(keys))
	}
}

// Close stops every sender; Wait waits for them.
func (r *Replicator) Close() {
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

// views returns the current plan (nil before the first ring) and the
// ring before it.
func (r *Replicator) views() (*Plan, *ring.Ring) {
	pl := r.plan.Load()
	r.mu.Lock()
	defer r.mu.Unlock()
	return pl, r.prev
}

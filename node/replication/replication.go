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
//   - The primary of a partition compares its copy with each backup's
//     every AntiEntropyInterval (digests, as fcapctl verify does) and
//     merges the viewers that differ both ways (antientropy.go).
//
// Strict writes are acknowledged only after every target applied them.
package replication

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fcap-io/fcap/ring"
)

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
	clock   func() time.Time

	parts []partition
	// holds counts the strict writes waiting for their backups
	// (HoldPlans).
	holds atomic.Int64

	pullKick chan struct{} // size 1: pull now (claimed partitions after a ring change)

	copyMu sync.Mutex
	// copies is guarded by copyMu: per claimed partition, the members
	// whose whole copy arrived since it was asked for in one epoch.
	copies map[int]*copyAsk
	plan   atomic.Pointer[Plan]

	mu sync.Mutex
	// The fields below are guarded by mu.
	replicas map[string]*replica
	prev     *ring.Ring // the ring before the current one

	// left holds the epochs of the last rings this node routed by and
	// left (OnRing), for received: a whole copy sent under one of them
	// is older than what this node's own ring moved on to.
	leftMu     sync.Mutex
	leftEpochs []uint64

	throttle  *throttle // paces whole-partition transfers and anti-entropy pulls
	ae        antiEntropy
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
	if deps.Clock == nil {
		deps.Clock = time.Now
	}
	return &Replicator{
		cfg:      cfg,
		log:      cfg.Logger,
		eng:      deps.Engine,
		wal:      deps.Log,
		peers:    deps.Peers,
		metrics:  deps.Metrics,
		hooks:    deps.Hooks,
		pullKick: make(chan struct{}, 1),
		clock:    deps.Clock,
		parts:    make([]partition, cfg.Ring.Partitions),
		replicas: map[string]*replica{},
		stop:     make(chan struct{}),
		throttle: newThrottle(cfg.TransferRate),
	}
}

// now is the time by the Replicator's clock.
func (r *Replicator) now() time.Time { return r.clock() }

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

package quorum

import (
	"sync"
	"time"
)

// Promises fence the leases this node backs. When it confirms epoch E to
// a peer (answers its Ping with E while the peer routes by E), the peer
// may count that confirmation for Lease from when it sent the Ping, which
// came before the answer. So the answering node promises to confirm no
// other epoch to anyone until its answer plus Lease plus a drift margin,
// unless the peer itself moved on to another ring first (its next Ping
// names another epoch; a tracker drops its confirmations when its own
// epoch changes, so it no longer counts this one). Without the promise, a
// member that two views of the cluster share could back a quorum for the
// old ring and, a moment later, one for a new ring, and two primaries of
// one partition could grant strict writes for up to a lease.
//
// In a ring change every node moves within milliseconds and asks again at
// once, so the promise releases as fast; a node cut off keeps it until
// its last confirmation ran out, which the majority's failure detector
// takes longer than anyway (ARCHITECTURE.md, "Strict caps under
// partitions").
type Promises struct {
	lease time.Duration // Lease plus the drift margin

	mu sync.Mutex
	// given is guarded by mu: per peer, the epoch last confirmed to it
	// and until when this node stands by it.
	given map[string]promise
}

type promise struct {
	epoch uint64
	until time.Time
}

// DriftMargin is added to the lease a promise lasts: it covers a peer's
// clock running slower than this node's by up to 10% over one lease (real
// clocks drift by parts per million) and a little scheduling delay.
func DriftMargin(lease time.Duration) time.Duration { return lease/10 + 10*time.Millisecond }

// NewPromises returns the promises of a node whose peers count a
// confirmation for lease.
func NewPromises(lease time.Duration) *Promises {
	if lease <= 0 {
		lease = DefaultConfig("").Lease
	}
	return &Promises{lease: lease + DriftMargin(lease), given: map[string]promise{}}
}

// Answer returns the epoch to put in the Pong to a Ping from peer from,
// which routes by fromEpoch, when this node routes by mine: mine, or 0
// while a promise to another peer for another epoch stands (the peer
// then does not count this node). A Ping without a sender (a client's)
// gets mine.
func (p *Promises) Answer(from string, fromEpoch, mine uint64, now time.Time) uint64 {
	if from == "" {
		return mine
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if g, ok := p.given[from]; ok && g.epoch != fromEpoch {
		delete(p.given, from) // it moved on: it no longer counts what it had
	}
	for name, g := range p.given {
		if !now.Before(g.until) {
			delete(p.given, name)
			continue
		}
		if g.epoch != mine {
			return 0 // stand by the other epoch until its lease ran out
		}
	}
	if fromEpoch == mine {
		p.given[from] = promise{epoch: mine, until: now.Add(p.lease)}
	}
	return mine
}

// Release drops the promise to a member that left the cluster (a drain):
// it grants nothing any more (a node that left answers NotOwner), so its
// lease needs no standing by, and the others may confirm their next ring
// at once. Not for a failed member: it may be alive on the other side of
// a partition.
func (p *Promises) Release(name string) {
	p.mu.Lock()
	delete(p.given, name)
	p.mu.Unlock()
}

// Len returns how many peers this node stands by a promise to (expired
// ones included until the next Answer drops them).
func (p *Promises) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.given)
}

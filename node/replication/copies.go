package replication

import (
	"slices"

	"github.com/fcap-io/fcap/ring"
)

// A claimed partition may miss strict grants some other copy holds. While
// a member is failed that copy may be out of reach, and only a current
// copy (its Copied marker with Done beside it) ends the claim. Once no member is failed and this node
// holds the quorum for its ring, no other node grants strict writes on
// the partition (their leases ran out before this node's quorum could
// form: node/quorum) and every node that ever held a copy is a member of
// the ring (a drained member handed its copies over first). Then the
// union of every member's copy, each sent after this node asked for it,
// holds every grant acknowledged anywhere, current copy or not: a claim
// whose every copy is claimed (a 3/2 split in which both owners of a
// partition were on the minority, and both lapsed) ends that way, where
// waiting for a current copy would fail its strict caps closed for good.

// copyAsk is one claimed partition's collection of copies, for one epoch.
type copyAsk struct {
	epoch uint64
	got   map[string]bool // members whose whole copy (a Copied marker) arrived
}

// collectable reports whether claims may be ended by collecting every
// member's copy under ring cur.
func (r *Replicator) collectable(cur *ring.Ring) bool {
	if r.hooks.Failed != nil && r.hooks.Failed() > 0 {
		return false
	}
	return r.holdsQuorum(cur)
}

// startCopies starts (or keeps) the collection of p's copies for epoch.
func (r *Replicator) startCopies(p int, epoch uint64) {
	r.copyMu.Lock()
	defer r.copyMu.Unlock()
	if r.copies == nil {
		r.copies = map[int]*copyAsk{}
	}
	if ca := r.copies[p]; ca == nil || ca.epoch != epoch {
		r.copies[p] = &copyAsk{epoch: epoch, got: map[string]bool{}}
	}
}

// copiesReceived notes the whole copies (Copied markers) that arrived
// from a member, and ends the claims they complete.
//
// A copy sent with both markers is current (its sender held it whole and
// unclaimed): it alone ends the claim. The markers answer an ask this
// node made while it held the quorum, and the transfer began after the
// ask (sendPartitions), so no grant made under another ring is missing.
func (r *Replicator) copiesReceived(from string, done, copied []uint32) {
	pl := r.plan.Load()
	if pl == nil {
		return
	}
	var check, current []int
	r.copyMu.Lock()
	for _, p := range copied {
		ca := r.copies[int(p)]
		if ca == nil || ca.epoch != pl.ring.Epoch() {
			continue // not asked for under this ring's quorum
		}
		if slices.Contains(done, p) {
			current = append(current, int(p))
			continue
		}
		ca.got[string([]byte(from))] = true // from may alias a frame
		check = append(check, int(p))
	}
	r.copyMu.Unlock()
	for _, p := range current {
		r.endClaim(p, "a current copy arrived")
	}
	for _, p := range check {
		r.endClaimIfCopied(p)
	}
}

// holdsQuorum reports whether this node holds the quorum for ring cur.
func (r *Replicator) holdsQuorum(cur *ring.Ring) bool {
	return r.hooks.Quorum == nil || r.hooks.Quorum(cur.Epoch())
}

// endClaimIfCopied ends partition p's claim if every other member of the
// current ring sent its whole copy since it was asked in this epoch,
// and the collection still may end it (collectable).
func (r *Replicator) endClaimIfCopied(p int) {
	pl := r.plan.Load()
	if pl == nil || !r.parts[p].claimed.Load() || !r.collectable(pl.ring) {
		return
	}
	r.copyMu.Lock()
	ca := r.copies[p]
	complete := ca != nil && ca.epoch == pl.ring.Epoch()
	if complete {
		for _, m := range pl.ring.Members() {
			if m.Name != r.cfg.Name && !ca.got[m.Name] {
				complete = false
				break
			}
		}
	}
	r.copyMu.Unlock()
	if complete {
		r.endClaim(p, "no member is failed and every member's copy was merged")
	}
}

// endClaim ends partition p's claim: strict caps are served from it again.
func (r *Replicator) endClaim(p int, why string) {
	r.copyMu.Lock()
	delete(r.copies, p)
	r.copyMu.Unlock()
	part := &r.parts[p]
	if !part.claimed.Load() {
		return
	}
	if part.handoffFrom() != "" {
		part.claimed.Store(false) // the hand-over still ends its own wait
	} else {
		part.got()
	}
	r.log.Debug("claim ended: strict caps are served from the partition again", "partition", p, "why", why)
	r.onHoldings()
}

package replication

import (
	"github.com/fcap-io/fcap/ring"
)

// A claimed partition may miss strict grants some other copy holds. While
// a member is failed that copy may be out of reach, and only a current
// copy's Done ends the claim. Once no member is failed and this node
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
	got   map[string]bool // members whose whole copy (Copied or Done) arrived
}

// collectable reports whether claims may be ended by collecting every
// member's copy under ring cur.
func (r *Replicator) collectable(cur *ring.Ring) bool {
	if r.hooks.Failed != nil && r.hooks.Failed() > 0 {
		return false
	}
	return r.hooks.Quorum == nil || r.hooks.Quorum(cur.Epoch())
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

// copiesReceived notes the whole copies (Done or Copied markers) that
// arrived from a member, and ends the claims they complete.
func (r *Replicator) copiesReceived(from string, done, copied []uint32) {
	var check []int
	r.copyMu.Lock()
	for _, list := range [][]uint32{done, copied} {
		for _, p := range list {
			if ca := r.copies[int(p)]; ca != nil {
				ca.got[string([]byte(from))] = true // from may alias a frame
				check = append(check, int(p))
			}
		}
	}
	r.copyMu.Unlock()
	for _, p := range check {
		r.endClaimIfCopied(p)
	}
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
	if complete {
		delete(r.copies, p)
	}
	r.copyMu.Unlock()
	if !complete {
		return
	}
	r.parts[p].got()
	r.log.Info("claim ended: no member is failed and every member's copy of the partition was merged; strict caps are served from it again", "partition", p)
	r.onHoldings()
}

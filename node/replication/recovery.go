package replication

import (
	"sync/atomic"

	"github.com/fcap-io/fcap/ring"
)

// Offering what a restart recovered. A node that comes back from its data
// dir holds, in its log, every write it acknowledged, but replication
// flows from a partition's primary to its backups: a soft write a backup
// took while standing in for an unreachable owner, and had not yet sent
// on when the whole cluster was killed, would stay on that backup's disk
// and never reach the primary that answers for the viewer. So the first
// ring in which such a node is Active sends every partition it backs
// (current ring) or will back, as its state is, to the partition's primary
// now and in the future ring: plain states, merged like any replication
// (merges never take away what the primary counted), with no Done or
// Handoff marker, so no wait ends on them. Paced like a transfer, between
// the node's own changes.

// OfferRecovered makes this node offer the state it recovered from its
// data dir once it is Active (the node calls it when the replay found
// any).
func (r *Replicator) OfferRecovered() { r.offerPending.Store(true) }

// offering reports, once, whether this plan is the one to make the
// offers in: the node recovered state and is Active in cur.
func offering(pending *atomic.Bool, cur *ring.Ring, self string) bool {
	i, ok := cur.Find(self)
	if !ok || cur.Member(i).State != ring.Active {
		return false
	}
	return pending.CompareAndSwap(true, false)
}

// offers plans partition p's offers: to its primary in the current and
// in the future ring, when this node owns p but is not that primary.
func (pn *planner) offers(p int, curOwners, futOwners []string) {
	if !contains(curOwners, pn.self) && !contains(futOwners, pn.self) {
		return
	}
	for _, owners := range [][]string{curOwners, futOwners} {
		if len(owners) == 0 || owners[0] == pn.self {
			continue
		}
		if rep := pn.sender(owners[0]); rep != nil {
			pn.offered = append(pn.offered, move{rep: rep, p: p})
		}
	}
}

// offer queues partition p's state for the peer.
func (rep *replica) offer(p int) {
	rep.mu.Lock()
	if !rep.closed {
		rep.offers = append(rep.offers, p)
	}
	rep.mu.Unlock()
	rep.poke()
}

// sendOffers sends the offered partitions' states, each paced by the
// node's transfer rate and followed by the changes queued meanwhile, with
// no marker. It returns how many partitions were sent.
func (s *sender) sendOffers(ps []int) (int, error) {
	want := s.rep.r.keysOf(ps)
	for i, p := range ps {
		if _, err := s.sendKeys(want[p], nil, s.rep.r.throttle); err != nil {
			return i, err
		}
		if err := s.sendDirty(); err != nil {
			return i, err
		}
		s.rep.r.log.Debug("partition: offered its recovered state", "peer", s.rep.name, "partition", p, "viewers", len(want[p]))
	}
	return len(ps), nil
}

// keysOf lists the viewers the engine holds in each of the partitions ps
// (one pass over the engine for all of them).
func (r *Replicator) keysOf(ps []int) map[int][]uint64 {
	want := make(map[int][]uint64, len(ps))
	asked := make([]bool, len(r.parts))
	for _, p := range ps {
		want[p] = nil
		asked[p] = true
	}
	r.eng.PartitionKeys(asked, func(k uint64) bool {
		p := ring.PartitionOf(k, len(r.parts))
		want[p] = append(want[p], k)
		return true
	})
	return want
}

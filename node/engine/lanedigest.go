package engine

import (
	"github.com/cespare/xxhash/v2"
)

// Lane digests, for the region links' digest catch-up (node/region): a
// region compares its own counters of a viewer (LocalDigest) with the
// lane a peer region holds of them (LaneDigest of that region), so that
// it ships again only the viewers whose lane differs. Both digest the
// same thing the same way: every counter that counts anything at now,
// in the order of its cap key hash, by that hash, its kind and window
// and what it counts (as Digest does), then the viewer's identity
// decisions. A lane does not keep identity apart from the viewer's own:
// every region merges every decision it is shipped (last write wins),
// and ships what it holds (ExportLocal carries it), so once the regions
// have exchanged a viewer's links they digest them alike; until then
// the viewer differs and is shipped again, which merges idempotently.
// Left out, a link made during an outage long enough to overflow the
// queue, on a device with no impressions of its own, was never shipped
// again: its digest was 0 on both sides (TestDigestShipsAnIdentityLink).
// Void marks and reservations are left out: a void takes the impression
// out of the lane that counted it (regionVoids), which the counters
// show, and a reservation is a region's own.
//
// A node cannot tell one region's lane counters from another's: a lane
// key (laneKey) mixes the cap key with the region's tag, and the mix is
// undone for any tag. So LaneDigest takes the cap keys the origin holds
// (has): a lane counter is the origin's when its key, unmixed with the
// origin's tag, is one of them (another region's counter unmixes to one
// of them by a 64-bit accident only).

// LocalDigest returns the digest of the viewer's own counters at now
// (what ExportLocal ships), as a peer region's LaneDigest of this region
// reckons it, and calls keys (when not nil) with the cap key hash of
// each counter it covers. 0: nothing of its own counts and it holds no
// identity decision.
func (e *Engine) LocalDigest(key uint64, now int64, keys func(kh uint64)) uint64 {
	s := e.stripeOf(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.lookup(key)
	if v == nil {
		return 0
	}
	return v.regionDigest(key, now, func(h *header) (uint64, bool) { return h.hash, !h.lane }, keys)
}

// LaneDigest returns the digest of the named region's lane of the
// viewer at now, over the lane counters whose cap key hash has accepts
// (has runs under the viewer's stripe lock: keep it short), then the
// viewer's identity decisions. 0: the lane counts nothing and the viewer
// holds no identity decision.
func (e *Engine) LaneDigest(key uint64, region string, now int64, has func(kh uint64) bool) uint64 {
	tag := regionTag(region)
	s := e.stripeOf(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.lookup(key)
	if v == nil {
		return 0
	}
	return v.regionDigest(key, now, func(h *header) (uint64, bool) {
		if !h.lane {
			return 0, false
		}
		kh := unlaneKey(h.hash, tag)
		return kh, has(kh)
	}, nil)
}

// regionDigest digests the counters pick selects, each under the cap key
// hash pick returns, that count anything at now (digestCounters).
func (v *viewer) regionDigest(key uint64, now int64, pick func(h *header) (uint64, bool), keys func(kh uint64)) uint64 {
	var d xxhash.Digest
	d.Reset()
	n := v.digestCounters(&d, key, now, pick, keys)
	id := idOf(v)
	if id != nil && !id.empty() {
		id.digest(&d)
	} else if n == 0 {
		return 0
	}
	return nonZero(d.Sum64())
}

// The multiplicative inverses (mod 2^64) of laneKey's two constants.
var laneInv1, laneInv2 = inverse64(0xff51afd7ed558ccd), inverse64(0xc4ceb9fe1a85ec53)

// inverse64 returns the inverse of odd a modulo 2^64 (Newton's method:
// each step doubles the bits that are right; a is right to 3 bits).
func inverse64(a uint64) uint64 {
	x := a
	for range 5 {
		x *= 2 - a*x
	}
	return x
}

// unlaneKey undoes laneKey: the cap key hash whose lane of region tag has
// key hash lk.
func unlaneKey(lk, tag uint64) uint64 {
	x := lk
	x ^= x >> 33
	x *= laneInv2
	x ^= x >> 33
	x *= laneInv1
	x ^= x >> 33
	return x ^ tag
}

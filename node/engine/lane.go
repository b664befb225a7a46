package engine

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/cespare/xxhash/v2"
)

// Lanes: what other regions counted (ARCHITECTURE.md, "Regions").
//
// The copy merge (merge.go) unites two copies of ONE history: a
// timestamp held by both is one impression. Regions' histories are
// disjoint: an impression at t in region a and another at t in region b
// are two. So a region's shipped state is never united with this
// region's counters nor with another region's: each peer region's
// counters of a viewer are kept in a lane of their own, counters of the
// same arena whose key hashes derive from the cap key and the origin
// region (laneKey), marked by laneFlag in their header. A region's
// re-shipped state is merged only into its own lane, by the copy merge
// (idempotent, commutative: both are copies of that region's history),
// and a cap counts its local counter plus every lane. What a region
// ships is its local counters alone (ExportLocal): a lane is never
// passed on.
//
// Lanes are counters like any other for everything else: replication
// inside the region, the log, snapshots, digests, sweeping and erasure
// carry and age them. A viewer that holds (or held) a lane has lanesBit
// set in arena[0], so a check pays one bit test for a viewer without
// lanes, and the engine of a single region never looks a lane up.

const (
	// laneFlag marks a lane counter in its header's offset word: offsets
	// stay far below 2^31 (a state of more than 2^26 words does not even
	// import, and the memory limit bounds a viewer long before).
	laneFlag = uint32(1) << 31
	// lanesBit in arena[0] says the viewer may hold lanes. It is set
	// when a lane is made and cleared when a check of the whole arena
	// finds none (checkState, sweep).
	lanesBit = uint32(1) << 31
	// maxLaneRegions bounds the lanes per cap key a state may hold (the
	// peer regions one node may have: proto.MaxPeerRegions).
	maxLaneRegions = 64
)

// hasLanes reports whether v may hold lane counters.
func (v *viewer) hasLanes() bool { return len(v.arena) > 0 && v.arena[0]&lanesBit != 0 }

// regionTag is the 64-bit name of a region in lane keys.
func regionTag(region string) uint64 { return xxhash.Sum64String("fcap region lane\x00" + region) }

// laneKey is the key hash of the lane of region tag for the counter kh:
// a bijective mix (of kh for a given tag), so two counters of a viewer
// never share a lane.
func laneKey(kh, tag uint64) uint64 {
	x := kh ^ tag
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

// laneKeys maps counter keys to their lanes of region tag.
func laneKeys(khs []uint64, tag uint64) []uint64 {
	out := make([]uint64, len(khs))
	for i, kh := range khs {
		out[i] = laneKey(kh, tag)
	}
	return out
}

// laneTags is the set of regions whose lanes a check counts: the peer
// regions the node was configured with (AddRegion) and any region a
// merge came from. Copy on write; read with one atomic load, and only for
// a viewer that holds lanes.
type laneTags struct {
	mu   sync.Mutex
	tags atomic.Pointer[[]uint64]
}

// AddRegion makes checks count the lanes of the named region. Adding a
// region twice is a no-op; past maxLaneRegions regions it is refused
// with ErrTooManyRegions (what peers send cannot grow the list, and the
// cost of a check, without bound).
func (e *Engine) AddRegion(region string) error {
	_, err := e.addRegion(region)
	return err
}

func (e *Engine) addRegion(region string) (uint64, error) {
	tag := regionTag(region)
	if p := e.lanes.tags.Load(); p != nil && slices.Contains(*p, tag) {
		return tag, nil
	}
	e.lanes.mu.Lock()
	defer e.lanes.mu.Unlock()
	var cur []uint64
	if p := e.lanes.tags.Load(); p != nil {
		cur = *p
	}
	if !slices.Contains(cur, tag) {
		if len(cur) >= maxLaneRegions {
			return 0, fmt.Errorf("%w: region %q would be the %dth", ErrTooManyRegions, region, len(cur)+1)
		}
		next := append(slices.Clip(cur), tag)
		e.lanes.tags.Store(&next)
	}
	return tag, nil
}

// lanesUsed counts what the lanes of counter kh hold at now for a cap of
// the given window.
func (e *Engine) lanesUsed(v *viewer, kh uint64, now, window int64) int64 {
	p := e.lanes.tags.Load()
	if p == nil {
		return 0
	}
	var n int64
	for _, tag := range *p {
		if i, ok := v.find(laneKey(kh, tag)); ok {
			h := v.header(i)
			n += v.count(&h, now, window)
		}
	}
	return n
}

// localKeys counts v's own counters (not lanes): the per-viewer counter
// limit bounds these; each lane mirrors a region that bounds its own.
func (v *viewer) localKeys() int {
	k := v.nkeys()
	if !v.hasLanes() {
		return k
	}
	n := 0
	for i := range k {
		if v.arena[hdrPos(i)+hOff]&laneFlag == 0 {
			n++
		}
	}
	return n
}

// dropLanesBit clears v's lane bit once no lane is left (the sweep).
func (v *viewer) dropLanesBit() {
	if v.hasLanes() && v.localKeys() == v.nkeys() {
		v.arena[0] &^= lanesBit
	}
}

// ensureLane creates the lane counter nh (nh.lane set) in v if v lacks
// it, like record creates a counter, and marks v as holding lanes. A
// bucketed lane takes the origin's number of buckets, not this engine's:
// the copy merge matches buckets only between counters of one size, and
// regions may be configured apart.
func (e *Engine) ensureLane(v *viewer, nh *header) {
	i, ok := v.find(nh.hash)
	if ok {
		return
	}
	words := 0
	if !KeepsTimes(nh.algo) {
		words = nh.n
	}
	h := header{hash: nh.hash, limit: nh.limit, window: nh.window, algo: nh.algo, lane: true}
	v.insertKey(i, h, words)
	v.arena[0] |= lanesBit
}

// local returns v without its lanes: v itself when it has none, else a
// copy sharing v's extras whose arena holds v's own counters only.
func (v *viewer) local() *viewer {
	if v == nil || !v.hasLanes() {
		return v
	}
	k, words := 0, 0
	for i := range v.nkeys() {
		if h := v.header(i); !h.lane {
			k++
			words += v.dataWords(&h)
		}
	}
	c := &viewer{key: v.key, base: v.base, ext: v.ext}
	if k == 0 {
		return c
	}
	c.arena = allocWords(hdrPos(k) + words)
	c.arena[0] = uint32(k)
	j, off := 0, hdrPos(k)
	for i := range v.nkeys() {
		h := v.header(i)
		if h.lane {
			continue
		}
		n := v.dataWords(&h)
		copy(c.arena[off:off+n], v.arena[h.off:h.off+n])
		h.off = off
		c.setHeader(j, h)
		j++
		off += n
	}
	return c
}

// ExportLocal is Export of the viewer's own counters only, without its
// lanes: what a region ships to its peer regions (a region passes on
// nothing it received from another).
func (e *Engine) ExportLocal(key uint64, dst []byte) []byte {
	s := e.stripeOf(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	return exportViewer(dst, key, s.lookup(key).local())
}

// MergeRegionAll merges a concatenation of states exported by a node of
// the named peer region (ExportLocal's) into each viewer's lane of that
// region, all or nothing as MergeAll; accept is asked of each state as
// ImportAll asks it. Checks count the region's lanes from then on.
func (e *Engine) MergeRegionAll(data []byte, region string, accept func(key uint64) bool) (applied, refused int, err error) {
	var states []decodedState
	for rest := data; len(rest) > 0; {
		st, n, err := e.decodeState(rest)
		if err != nil {
			return 0, 0, fmt.Errorf("state %d at byte %d: %w", len(states), len(data)-len(rest), err)
		}
		states = append(states, st)
		rest = rest[n:]
	}
	tag, err := e.addRegion(region)
	if err != nil {
		return 0, 0, err
	}
	for i := range states {
		st := &states[i]
		if accept != nil && !accept(st.key) {
			refused++
			continue
		}
		applied++
		if st.absent {
			continue // the sender holds nothing: nothing to merge
		}
		e.applyRegion(st, tag)
	}
	return applied, refused, nil
}

// applyRegion merges a decoded state of region tag into its viewer.
func (e *Engine) applyRegion(st *decodedState, tag uint64) {
	s := e.stripeOf(st.key)
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.lookup(st.key)
	if v == nil {
		v = s.add(st.key)
		e.viewers.Add(1)
		e.charge(s, 0, v.bytes())
	}
	before, keys := v.bytes(), v.nkeys()
	e.mergeRegionViewer(v, &st.v, tag)
	e.settle(s, v, before, keys)
	if v.nkeys() == 0 && v.ext == nil {
		slot, _ := s.find(st.key)
		e.charge(s, v.bytes(), 0)
		s.remove(slot)
		e.viewers.Add(-1)
	}
}

// mergeRegionViewer merges nv, region tag's own state of the viewer, into
// v: an erasure applies to the whole viewer (every lane too), void marks
// take the impression out of the lane that counted it (regionVoids), the
// counters are merged into their lanes, identity decisions and
// reservations as the copy merge does. The remembered ids stay the
// origin's: this node's ids say what its own counters counted.
func (e *Engine) mergeRegionViewer(v, nv *viewer, tag uint64) {
	floor := e.eraseMerge(v, nv)
	e.regionVoids(v, nv, floor, tag)
	for i := range nv.nkeys() {
		nh := nv.header(i)
		if nh.lane {
			continue // a lane is never passed on
		}
		lh := nh
		lh.hash, lh.lane = laneKey(nh.hash, tag), true
		e.mergeCounter(v, nv, &lh, floor)
	}
	if nv.ext == nil {
		return
	}
	if floor >= 0 {
		if nv.ext.id != nil {
			if id := nv.ext.id.after(floor); id != nil {
				v.ensureID().merge(id)
			}
		}
		return
	}
	if nv.ext.id != nil {
		v.ensureID().merge(nv.ext.id)
	}
	e.mergeReservations(v, nv)
}

// regionVoids brings the void marks of v and of nv (region tag's state)
// to the lane before the counters are merged. Of every impression voided
// on either side that the origin counted (nv remembers its id), one
// timestamp is taken out of nv's counters if nv has not voided it yet,
// and out of the origin's lane in v: the merge then gives the lane what
// the origin counts now, and re-shipping the same state gives the same
// lane. nv's marks new to v are kept as a Void here keeps them (and take
// the impression out of v's own counters if v counted it too).
func (e *Engine) regionVoids(v, nv *viewer, floor int64, tag uint64) {
	if nv.ext == nil {
		return // the origin remembers no id: it counted nothing to void
	}
	clean := func(m *voidMark) {
		if !nv.voided(m.id) {
			nv.unrecord(m.keys, m.at)
		}
		v.unrecord(laneKeys(m.keys, tag), m.at)
	}
	if v.ext != nil && v.ext.voids != nil {
		for i := range v.ext.voids.marks {
			if m := &v.ext.voids.marks[i]; nv.ext.hasSeen(m.id) {
				clean(m)
			}
		}
	}
	if nv.ext.voids == nil {
		return
	}
	hw := e.hw.Load()
	for i := range nv.ext.voids.marks {
		m := &nv.ext.voids.marks[i]
		if m.at <= floor || m.until <= hw || v.voided(m.id) || !v.recordable(m.at) {
			continue
		}
		if nv.ext.hasSeen(m.id) {
			clean(m)
		}
		e.applyVoid(v, *m)
	}
}

package engine

import (
	"cmp"
	"encoding/binary"
	"slices"

	"github.com/cespare/xxhash/v2"
)

// Digests, for reconciliation (fcapctl verify): two copies of a viewer
// (a primary and its backup, or a node's RAM and what its log replays
// to) must count the same. Their bytes need not match: layouts differ
// with the order writes arrived in, one copy may have swept what the
// other still holds after it expired, and merges keep the newest
// timestamps of the larger limit. So a digest covers only what the
// viewer's counters count at a given time: every counter still counting
// (in key-hash order), its kind and window, and the impressions inside
// its window: a sliding counter's timestamps, a fixed counter's count, a
// bucketed counter's counts bucket by bucket. Reservations and remembered
// impression ids are not covered; identity links are (identity.go), and
// so are void marks still in force (void.go): a copy that lacks one could
// count its impression again.

// Digest returns the digest of what the viewer with the given key counts
// at time now, and the number of counters that count anything. A viewer
// the engine does not hold, or whose counters all count nothing at now,
// has digest 0.
func (e *Engine) Digest(key uint64, now int64) (sum uint64, counters int) {
	s := e.stripeOf(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.lookup(key)
	if v == nil {
		return 0, 0
	}
	return v.digest(key, now)
}

func (v *viewer) digest(key uint64, now int64) (uint64, int) {
	var d xxhash.Digest
	d.Reset()
	n := v.digestCounters(&d, key, now, func(h *header) (uint64, bool) { return h.hash, true }, nil)
	id := idOf(v)
	if id != nil && id.empty() {
		id = nil
	}
	var marks []voidMark // in force at now, sorted by id
	if v.ext != nil && v.ext.voids != nil {
		for _, m := range v.ext.voids.marks {
			if m.until > now {
				marks = append(marks, m)
			}
		}
	}
	if n == 0 && id == nil && len(marks) == 0 {
		return 0, 0
	}
	if id != nil { // links are compared too (tombstones included)
		id.digest(&d)
	}
	for _, m := range marks {
		digestWord(&d, m.id)
		digestWord(&d, uint64(m.at))
	}
	return nonZero(d.Sum64()), n
}

// digestCounters writes key to d, then every counter pick selects that
// counts anything at now, in the order of the cap key hash pick gives it
// (the hash it is digested under): that hash, its kind and window, and
// what it counts. It calls keys (when not nil) with each hash, and
// returns how many counters it wrote. Digest and the region links' lane
// digests (lanedigest.go) share it, so what they cover is reckoned one
// way.
func (v *viewer) digestCounters(d *xxhash.Digest, key uint64, now int64, pick func(h *header) (uint64, bool), keys func(kh uint64)) int {
	type live struct {
		kh uint64
		i  int
	}
	var buf [16]live
	ls := buf[:0]
	for i := range v.nkeys() {
		h := v.header(i)
		if kh, ok := pick(&h); ok && v.count(&h, now, h.window) > 0 {
			ls = append(ls, live{kh, i})
		}
	}
	slices.SortFunc(ls, func(a, b live) int { return cmp.Compare(a.kh, b.kh) })
	word := func(x uint64) { digestWord(d, x) }
	word(key)
	for _, l := range ls {
		h := v.header(l.i)
		if keys != nil {
			keys(l.kh)
		}
		word(l.kh)
		word(uint64(h.algo))
		word(uint64(h.window))
		v.digestCounter(&h, now, word)
	}
	return len(ls)
}

// digest writes the identity decisions to d, tombstones included.
func (id *identity) digest(d *xxhash.Digest) {
	d.WriteString(id.viewer)
	digestWord(d, uint64(id.linkAt))
	for _, dl := range id.devices {
		d.WriteString(dl.name)
		digestWord(d, uint64(dl.at))
		if dl.gone {
			digestWord(d, 1)
		}
	}
}

// digestWord writes x to d, little-endian.
func digestWord(d *xxhash.Digest, x uint64) {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], x)
	d.Write(b[:])
}

// nonZero is a digest's sum, never 0: 0 means "counts nothing".
func nonZero(sum uint64) uint64 {
	if sum == 0 {
		return 1
	}
	return sum
}

// CombineDigests folds a viewer's digest into a partition's: the result
// does not depend on the order viewers are folded in, so two nodes that
// walk the same viewers in different orders agree.
func CombineDigests(acc, viewerDigest uint64) uint64 {
	if viewerDigest == 0 {
		return acc
	}
	// Mixed before adding, so that two viewers' digests cannot cancel out
	// in an obvious way.
	return acc + xxhash.Sum64(binary.LittleEndian.AppendUint64(nil, viewerDigest))
}

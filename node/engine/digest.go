package engine

import (
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
	type live struct {
		hash uint64
		i    int
	}
	var keys [16]live
	ls := keys[:0]
	for i := range v.nkeys() {
		h := v.header(i)
		if v.count(&h, now, h.window) > 0 {
			ls = append(ls, live{h.hash, i})
		}
	}
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
	if len(ls) == 0 && id == nil && len(marks) == 0 {
		return 0, 0
	}
	slices.SortFunc(ls, func(a, b live) int {
		switch {
		case a.hash < b.hash:
			return -1
		case a.hash > b.hash:
			return 1
		}
		return 0
	})
	var d xxhash.Digest
	d.Reset()
	var b [8]byte
	word := func(x uint64) {
		binary.LittleEndian.PutUint64(b[:], x)
		d.Write(b[:])
	}
	word(key)
	for _, l := range ls {
		h := v.header(l.i)
		word(l.hash)
		word(uint64(h.algo))
		word(uint64(h.window))
		v.digestCounter(&h, now, word)
	}
	if id != nil { // links are compared too (tombstones included)
		d.WriteString(id.viewer)
		word(uint64(id.linkAt))
		for _, dl := range id.devices {
			d.WriteString(dl.name)
			word(uint64(dl.at))
			if dl.gone {
				word(1)
			}
		}
	}
	for _, m := range marks {
		word(m.id)
		word(uint64(m.at))
	}
	sum := d.Sum64()
	if sum == 0 {
		sum = 1 // 0 means "counts nothing"
	}
	return sum, len(ls)
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

package proto

import "fmt"

// MaxRegionDigestKeys bounds the cap key hashes a RegionDigest names
// (128 KiB of them).
const MaxRegionDigestKeys = 1 << 14

// MaxRegionDigests bounds the viewer digests a RegionDigestResult
// carries (384 KiB of them, within the smallest frame a peer reads);
// past it the answer says Truncated and the sender asks for a smaller
// slice.
const MaxRegionDigests = 24000

// MaxRegionDigestSlices bounds the slices a partition is compared in.
const MaxRegionDigestSlices = 1024

// RegionDigest asks a node of a peer region for the digests of one
// origin region's lane (the origin's own counters as the peer holds
// them, engine.LaneDigest) of the viewers of one partition, or of one
// slice of them (Verify.InSlice), at Now. The region link's digest
// catch-up (node/region) sends it to the peer region's primary of the
// partition and compares the answer with its own counters
// (engine.LocalDigest): viewers whose digests differ, or that the peer
// lacks, are shipped again. Only a peer (a peer token) may send it. It
// is answered with a RegionDigestResult, or an Error: a BadRequest when
// the partition counts of the two regions differ (viewers are not
// partitioned alike there), a NotOwner when the node is not the
// partition's primary now.
//
// Wire: [origin str, now int, partitions uint, partition uint, slices
// uint, slice uint, keys bin], keys the little-endian uint64 cap key
// hashes in ascending order.
type RegionDigest struct {
	// Origin is the sending node's region, at most MaxRegionNameLen
	// bytes: the lane compared.
	Origin string
	// Now is the time the digests count at (the sender's clock).
	Now int64
	// Partitions is the sender's ring's partition count; the answering
	// node refuses a count that is not its own.
	Partitions uint32
	// Partition is the partition whose viewers are digested.
	Partition uint32
	// Slices and Slice narrow the viewers to one slice of the
	// partition's, as Verify's do; Slices 0 or 1: every viewer.
	Slices, Slice uint32
	// Keys are the cap key hashes of the origin's counters of those
	// viewers, ascending, at most MaxRegionDigestKeys: a lane counter
	// is digested when its cap key is among them (a node cannot tell
	// one region's lanes from another's without them).
	Keys []uint64
}

// Type returns TypeRegionDigest.
func (*RegionDigest) Type() Type { return TypeRegionDigest }

func (m *RegionDigest) encode(e *encoder) {
	e.array(7)
	if len(m.Origin) > MaxRegionNameLen {
		e.fail(fmt.Errorf("region name of %d bytes, limit %d", len(m.Origin), MaxRegionNameLen))
	}
	e.str(m.Origin)
	e.int(m.Now)
	e.uint(uint64(m.Partitions))
	e.uint(uint64(m.Partition))
	e.uint(uint64(m.Slices))
	e.uint(uint64(m.Slice))
	if len(m.Keys) > MaxRegionDigestKeys {
		e.fail(errTooMany("digest keys", len(m.Keys), MaxRegionDigestKeys))
	}
	e.buf = appendUint64s(e, m.Keys)
}

func (m *RegionDigest) decode(d *decoder) {
	extra := d.array(7)
	m.Origin = string(d.bytes(MaxRegionNameLen))
	m.Now = d.int()
	m.Partitions = uint32(d.uintN(0xFFFFFFFF))
	m.Partition = uint32(d.uintN(0xFFFFFFFF))
	m.Slices = uint32(d.uintN(0xFFFFFFFF))
	m.Slice = uint32(d.uintN(0xFFFFFFFF))
	m.Keys = readUint64s(d, m.Keys, MaxRegionDigestKeys)
	d.end(extra)
	if d.err != nil {
		return
	}
	if err := m.Check(); err != nil {
		d.fail(err)
	}
}

// Check reports what makes m unanswerable, whatever the answering
// node's ring: a partition outside the count, a slice outside the
// slices, keys not ascending.
func (m *RegionDigest) Check() error {
	switch {
	case m.Partitions == 0 || m.Partition >= m.Partitions:
		return fmt.Errorf("partition %d of %d", m.Partition, m.Partitions)
	case m.Slices > MaxRegionDigestSlices:
		return fmt.Errorf("%d slices, at most %d", m.Slices, MaxRegionDigestSlices)
	case m.Slices > 1 && m.Slice >= m.Slices:
		return fmt.Errorf("slice %d of %d", m.Slice, m.Slices)
	}
	for i := 1; i < len(m.Keys); i++ {
		if m.Keys[i] <= m.Keys[i-1] {
			return fmt.Errorf("digest keys not ascending at %d", i)
		}
	}
	return nil
}

// InSlice reports whether the viewer with key is in the partition and
// slice m asks for.
func (m *RegionDigest) InSlice(key uint64) bool {
	if m.Partitions == 0 || key%uint64(m.Partitions) != uint64(m.Partition) {
		return false
	}
	v := Verify{Slices: m.Slices, Slice: m.Slice}
	return v.InSlice(key, int(m.Partitions))
}

// HasKey reports whether kh is among m's Keys.
func (m *RegionDigest) HasKey(kh uint64) bool {
	lo, hi := 0, len(m.Keys)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if m.Keys[mid] < kh {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo < len(m.Keys) && m.Keys[lo] == kh
}

// RegionDigestResult answers RegionDigest: the digest of the origin's
// lane of every viewer of the slice whose lane counts anything (a
// viewer left out holds nothing of the origin's there), and the
// answering node's ring epoch.
//
// Wire: [epoch uint, digests bin, truncated bool], digests pairs of
// little-endian uint64 (viewer key, digest).
type RegionDigestResult struct {
	Epoch   uint64
	Digests []ViewerDigest // Log unused
	// Truncated: the slice holds more than MaxRegionDigests such
	// viewers; Digests are some of them. Ask for a smaller slice.
	Truncated bool
}

// Type returns TypeRegionDigestResult.
func (*RegionDigestResult) Type() Type { return TypeRegionDigestResult }

func (m *RegionDigestResult) encode(e *encoder) {
	e.array(3)
	e.uint(m.Epoch)
	if len(m.Digests) > MaxRegionDigests {
		e.fail(errTooMany("viewer digests", len(m.Digests), MaxRegionDigests))
	}
	pairs := make([]uint64, 0, 2*len(m.Digests))
	for _, v := range m.Digests {
		pairs = append(pairs, v.Key, v.Sum)
	}
	e.buf = appendUint64s(e, pairs)
	e.bool(m.Truncated)
}

func (m *RegionDigestResult) decode(d *decoder) {
	extra := d.array(3)
	m.Epoch = d.uint()
	pairs := readUint64s(d, nil, 2*MaxRegionDigests)
	if len(pairs)%2 != 0 {
		d.fail(fmt.Errorf("digests: %d words is not a list of pairs", len(pairs)))
		pairs = nil
	}
	m.Digests = resize(m.Digests, len(pairs)/2)
	for i := range m.Digests {
		m.Digests[i] = ViewerDigest{Key: pairs[2*i], Sum: pairs[2*i+1]}
	}
	m.Truncated = d.bool()
	d.end(extra)
}

// appendUint64s writes vs as a bin of little-endian uint64s.
func appendUint64s(e *encoder, vs []uint64) []byte {
	e.binHeader(8 * len(vs))
	b := e.buf
	for _, k := range vs {
		b = append(b, byte(k), byte(k>>8), byte(k>>16), byte(k>>24), byte(k>>32), byte(k>>40), byte(k>>48), byte(k>>56))
	}
	return b
}

// readUint64s reads a bin of at most limit little-endian uint64s into
// dst's storage.
func readUint64s(d *decoder, dst []uint64, limit int) []uint64 {
	b := d.bytes(8 * limit)
	if len(b)%8 != 0 {
		d.fail(fmt.Errorf("bin of %d bytes is not a list of uint64", len(b)))
		b = nil
	}
	dst = resize(dst, len(b)/8)
	for i := range dst {
		c := b[8*i : 8*i+8]
		dst[i] = uint64(c[0]) | uint64(c[1])<<8 | uint64(c[2])<<16 | uint64(c[3])<<24 | uint64(c[4])<<32 | uint64(c[5])<<40 | uint64(c[6])<<48 | uint64(c[7])<<56
	}
	return dst
}

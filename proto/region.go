package proto

import "fmt"

// MaxRegionNameLen is the longest region name a RegionMerge carries
// (node/region: 1-32 of [a-z0-9-]).
const MaxRegionNameLen = 32

// MaxRegionRefused bounds the keys a RegionMergeResult lists: no more
// than the states a RegionMerge can hold (the smallest exported state,
// an absent viewer, is 10 bytes).
const MaxRegionRefused = MaxReplicateBytes / 10

// RegionMerge carries viewer states from a node of one region to the
// owner of those viewers in another region (the region link,
// node/region). The states are the engine's exports, the encoding
// Replicate ships; the receiver merges each into the copy it holds
// (union with expiry: idempotent and commutative), logs it and
// replicates it to its backups, but never ships it on to other regions.
// Only a peer (a peer token) may send it. It is answered with a
// RegionMergeResult, or an Error (a state that does not decode changes
// nothing).
//
// Wire: [region str, high_water int, states bin].
type RegionMerge struct {
	// Region is the sending node's region name, at most
	// MaxRegionNameLen bytes.
	Region string
	// HighWater is the newest time the sender's engine has seen; the
	// receiver observes it (clamped to its own clock plus the skew it
	// allows).
	HighWater int64
	// States are engine exports, concatenated; at most
	// MaxReplicateBytes. They alias the frame body when decoded.
	States []byte
}

// Type returns TypeRegionMerge.
func (*RegionMerge) Type() Type { return TypeRegionMerge }

func (m *RegionMerge) encode(e *encoder) {
	e.array(3)
	if len(m.Region) > MaxRegionNameLen {
		e.fail(fmt.Errorf("region name of %d bytes, limit %d", len(m.Region), MaxRegionNameLen))
	}
	e.str(m.Region)
	e.int(m.HighWater)
	if len(m.States) > MaxReplicateBytes {
		e.fail(errTooMany("state bytes", len(m.States), MaxReplicateBytes))
	}
	e.binHeader(len(m.States))
	e.buf = append(e.buf, m.States...)
}

func (m *RegionMerge) decode(d *decoder) {
	extra := d.array(3)
	b := d.bytes(MaxRegionNameLen)
	m.Region = string(b)
	m.HighWater = d.int()
	m.States = d.bytes(MaxReplicateBytes)
	d.end(extra)
}

// RegionMergeResult answers RegionMerge: the states merged, and the keys
// of those the receiver did not take because it is not their primary
// owner now (or does not hold their partition yet): the sender's view of
// the ring is behind, and it sends them again to the right owner.
//
// Wire: [epoch uint, applied uint, refused bin], refused the
// little-endian uint64 viewer keys.
type RegionMergeResult struct {
	// Epoch is the receiver's ring epoch.
	Epoch uint64
	// Applied is the number of states merged.
	Applied uint64
	// Refused are the keys of the states not merged, at most
	// MaxRegionRefused.
	Refused []uint64
}

// Type returns TypeRegionMergeResult.
func (*RegionMergeResult) Type() Type { return TypeRegionMergeResult }

func (m *RegionMergeResult) encode(e *encoder) {
	e.array(3)
	e.uint(m.Epoch)
	e.uint(m.Applied)
	if len(m.Refused) > MaxRegionRefused {
		e.fail(errTooMany("refused keys", len(m.Refused), MaxRegionRefused))
	}
	e.binHeader(8 * len(m.Refused))
	b := e.buf
	for _, k := range m.Refused {
		b = append(b, byte(k), byte(k>>8), byte(k>>16), byte(k>>24), byte(k>>32), byte(k>>40), byte(k>>48), byte(k>>56))
	}
	e.buf = b
}

func (m *RegionMergeResult) decode(d *decoder) {
	extra := d.array(3)
	m.Epoch = d.uint()
	m.Applied = d.uint()
	b := d.bytes(8 * MaxRegionRefused)
	if len(b)%8 != 0 {
		d.fail(fmt.Errorf("bin of %d bytes is not a list of uint64", len(b)))
		b = nil
	}
	m.Refused = resize(m.Refused, len(b)/8)
	for i := range m.Refused {
		c := b[8*i : 8*i+8]
		m.Refused[i] = uint64(c[0]) | uint64(c[1])<<8 | uint64(c[2])<<16 | uint64(c[3])<<24 | uint64(c[4])<<32 | uint64(c[5])<<40 | uint64(c[6])<<48 | uint64(c[7])<<56
	}
	d.end(extra)
}

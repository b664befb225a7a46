package proto

import "fmt"

// Verify asks a node for digests of what its viewers count at Now
// (engine.Digest), per partition and optionally per viewer, from its RAM
// and, when it keeps a log and Log is set, from what its log and
// snapshots replay to. fcapctl verify compares them across a partition's
// owners and between a node's RAM and its log. It is answered with a
// VerifyResult.
//
// Wire: [now int, partitions bin (little-endian uint32), viewers bool,
// log bool, slices uint?, slice uint?] (the last two only when Slices
// is more than 1; older nodes skip them and digest every viewer).
type Verify struct {
	Now int64
	// Partitions to digest; empty: every partition the node holds.
	Partitions []uint32
	// Viewers asks for every viewer's digest in those partitions too.
	Viewers bool
	// Log asks the node to replay its log and digest what it says too.
	Log bool
	// Slices, when more than 1, narrows the digests to one slice of
	// each partition's viewers: those InSlice puts in slice Slice (so a
	// partition too large for one answer's per-viewer digests is
	// compared a slice at a time, by anti-entropy).
	Slices, Slice uint32
}

// InSlice reports whether the viewer with the given key is in the slice
// m asks for, of a ring with the given number of partitions: every
// viewer when Slices is at most 1, else those whose key divided by the
// partition count (which picks the partition: ring.PartitionOf) leaves
// Slice modulo Slices.
func (m *Verify) InSlice(key uint64, partitions int) bool {
	if m.Slices <= 1 || partitions <= 0 {
		return true
	}
	return (key/uint64(partitions))%uint64(m.Slices) == uint64(m.Slice)
}

// Type returns TypeVerify.
func (*Verify) Type() Type { return TypeVerify }

func (m *Verify) encode(e *encoder) {
	if m.Slices > 1 {
		if m.Slice >= m.Slices {
			e.fail(fmt.Errorf("slice %d of %d", m.Slice, m.Slices))
		}
		e.array(6)
	} else {
		e.array(4)
	}
	e.int(m.Now)
	e.uint32s(m.Partitions)
	e.bool(m.Viewers)
	e.bool(m.Log)
	if m.Slices > 1 {
		e.uint(uint64(m.Slices))
		e.uint(uint64(m.Slice))
	}
}

func (m *Verify) decode(d *decoder) {
	extra := d.array(4)
	m.Now = d.int()
	m.Partitions = d.uint32s(m.Partitions, 1<<16)
	m.Viewers = d.bool()
	m.Log = d.bool()
	m.Slices, m.Slice = 0, 0
	if extra >= 2 {
		m.Slices = uint32(d.uintN(0xFFFFFFFF))
		m.Slice = uint32(d.uintN(0xFFFFFFFF))
		extra -= 2
		if d.err == nil && m.Slices > 1 && m.Slice >= m.Slices {
			d.fail(fmt.Errorf("slice %d of %d", m.Slice, m.Slices))
		}
	}
	d.end(extra)
}

// MaxVerifyViewers bounds the viewer digests one VerifyResult carries;
// past it the result says Truncated and the caller asks for fewer
// partitions at a time.
const MaxVerifyViewers = 1 << 17

// PartitionDigest is one partition's digest on one node: the number of
// viewers that count anything at the request's Now and their combined
// digest (engine.CombineDigests), in RAM and, when the log was replayed,
// in the log.
//
// Wire: [partition uint, held bool, viewers uint, sum uint, log_viewers
// uint, log_sum uint].
type PartitionDigest struct {
	Partition uint32
	// Held: the node holds the partition's complete state (it owns it
	// and is not waiting for it).
	Held       bool
	Viewers    uint64
	Sum        uint64
	LogViewers uint64
	LogSum     uint64
}

// ViewerDigest is one viewer's digest in RAM and in the log (0: counts
// nothing there).
//
// Wire: [key uint, sum uint, log uint].
type ViewerDigest struct {
	Key uint64
	Sum uint64
	Log uint64
}

// VerifyResult answers Verify.
//
// Wire: [node str, epoch uint, logged bool, log_error str, changed uint,
// partitions [[partition digest]...], viewers [[viewer digest]...],
// truncated bool].
type VerifyResult struct {
	Node  string
	Epoch uint64
	// Logged: the log was replayed and LogViewers, LogSum and Log are
	// filled. False when the node keeps no log or Log was not asked.
	Logged bool
	// LogError is why the log could not be replayed, if it could not.
	LogError string
	// Changed counts viewers written while the log was replayed: they
	// are left out of the log figures (their RAM and log may differ for
	// that reason alone).
	Changed    uint64
	Partitions []PartitionDigest
	Viewers    []ViewerDigest
	// Truncated: more viewers than MaxVerifyViewers; ask for fewer
	// partitions.
	Truncated bool
}

// Type returns TypeVerifyResult.
func (*VerifyResult) Type() Type { return TypeVerifyResult }

func (m *VerifyResult) encode(e *encoder) {
	e.array(8)
	e.str(m.Node)
	e.uint(m.Epoch)
	e.bool(m.Logged)
	e.str(m.LogError)
	e.uint(m.Changed)
	e.list("partitions", len(m.Partitions), 1<<16)
	for i := range m.Partitions {
		p := &m.Partitions[i]
		e.array(6)
		e.uint(uint64(p.Partition))
		e.bool(p.Held)
		e.uint(p.Viewers)
		e.uint(p.Sum)
		e.uint(p.LogViewers)
		e.uint(p.LogSum)
	}
	e.list("viewers", len(m.Viewers), MaxVerifyViewers)
	for i := range m.Viewers {
		v := &m.Viewers[i]
		e.array(3)
		e.uint(v.Key)
		e.uint(v.Sum)
		e.uint(v.Log)
	}
	e.bool(m.Truncated)
}

func (m *VerifyResult) decode(d *decoder) {
	extra := d.array(8)
	m.Node = d.str()
	m.Epoch = d.uint()
	m.Logged = d.bool()
	m.LogError = d.str()
	m.Changed = d.uint()
	n := d.list("partitions", 1<<16, 7)
	m.Partitions = m.Partitions[:0]
	for range n {
		var p PartitionDigest
		px := d.array(6)
		p.Partition = uint32(d.uintN(0xFFFFFFFF))
		p.Held = d.bool()
		p.Viewers = d.uint()
		p.Sum = d.uint()
		p.LogViewers = d.uint()
		p.LogSum = d.uint()
		d.end(px)
		if d.err != nil {
			return
		}
		m.Partitions = append(m.Partitions, p)
	}
	n = d.list("viewers", MaxVerifyViewers, 4)
	m.Viewers = m.Viewers[:0]
	for range n {
		var v ViewerDigest
		vx := d.array(3)
		v.Key = d.uint()
		v.Sum = d.uint()
		v.Log = d.uint()
		d.end(vx)
		if d.err != nil {
			return
		}
		m.Viewers = append(m.Viewers, v)
	}
	m.Truncated = d.bool()
	d.end(extra)
}

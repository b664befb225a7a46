package proto

// MaxPullKeys bounds the viewers one Pull asks for.
const MaxPullKeys = 4096

// Pull asks a peer for its copies of some viewers: anti-entropy found
// them different from the asker's (node/replication, antientropy.go).
// The asker merges the states it gets as it merges a Replicate's, and
// pushes its own copies of the same viewers to the peer, so both copies
// end up holding what either counted. It is answered with a PullResult.
//
// Wire: [from str, keys [uint...]].
type Pull struct {
	// From is the asking node's name.
	From string
	// Keys are the viewers asked for; at most MaxPullKeys.
	Keys []uint64
}

// Type returns TypePull.
func (*Pull) Type() Type { return TypePull }

func (m *Pull) encode(e *encoder) {
	e.array(2)
	e.str(m.From)
	e.list("keys", len(m.Keys), MaxPullKeys)
	for _, k := range m.Keys {
		e.uint(k)
	}
}

func (m *Pull) decode(d *decoder) {
	extra := d.array(2)
	m.From = d.str()
	n := d.list("keys", MaxPullKeys, 1)
	m.Keys = m.Keys[:0]
	for range n {
		m.Keys = append(m.Keys, d.uint())
	}
	d.end(extra)
}

// PullResult answers Pull with the peer's copies of the viewers asked
// for, in the order asked, as many as fit.
//
// Wire: [from str, high_water int, states bin, left uint].
type PullResult struct {
	// From is the answering node's name.
	From string
	// HighWater is the newest time the answering engine has seen (as
	// in Replicate).
	HighWater int64
	// States are engine exports (engine.Engine.Export), concatenated;
	// at most MaxReplicateBytes. A viewer the peer does not hold is
	// exported as absent, which a merge ignores. They alias the frame
	// body when decoded.
	States []byte
	// Left counts the viewers asked for, at the end of Keys, whose
	// states did not fit; the asker asks for them again.
	Left uint64
}

// Type returns TypePullResult.
func (*PullResult) Type() Type { return TypePullResult }

func (m *PullResult) encode(e *encoder) {
	e.array(4)
	e.str(m.From)
	e.int(m.HighWater)
	if len(m.States) > MaxReplicateBytes {
		e.fail(errTooMany("state bytes", len(m.States), MaxReplicateBytes))
	}
	e.binHeader(len(m.States))
	e.buf = append(e.buf, m.States...)
	e.uint(m.Left)
}

func (m *PullResult) decode(d *decoder) {
	extra := d.array(4)
	m.From = d.str()
	m.HighWater = d.int()
	m.States = d.bytes(MaxReplicateBytes)
	m.Left = d.uint()
	d.end(extra)
}

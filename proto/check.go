package proto

import (
	"fmt"
	"time"

	"github.com/fcap-io/fcap"
)

// Check asks for read-only verdicts on many candidates of one viewer at
// once (an ad request checks about 100). It is answered with a
// CheckResult, or an Error.
//
// The candidates travel as an fcap.CheckTable: each distinct cap once,
// and each candidate as indexes into them, so the caps the candidates
// share (one advertiser cap across ten creatives) are sent and counted
// once. proto checks only the table's size; the engine checks that the
// indexes and ends make sense.
//
// Wire: [viewer str, now int|nil, caps [cap...], refs bin, ends bin,
// backup bool, budget uint], where refs is 2 bytes per index and ends 4
// bytes per candidate, both little-endian. backup was added after the
// first five fields, and budget after backup: a body without them
// decodes with Backup false and Budget 0 (no deadline).
type Check struct {
	// Viewer is the canonical viewer id: the routing key.
	Viewer string
	// Now is the time of the check, when HasNow is set.
	Now int64
	// HasNow says the request carries its time. When false, the node
	// uses its clock; Now is then ignored (an omitted time is not tick
	// 0, which is a valid time).
	HasNow bool
	// Table holds the distinct caps (at most MaxCheckCaps) and the
	// candidates (at most MaxCandidates) as indexes into them.
	Table fcap.CheckTable
	// Encoded, when not nil, is sent in place of Table.Caps: the same
	// caps, encoded by the sender as it read them (see EncodedCaps).
	// Decode never sets it.
	Encoded *EncodedCaps
	// Backup says the client accepts an answer from a backup owner of
	// the viewer (its owner did not answer in time). A backup answers
	// with CheckResult.Stale set; a node that is neither owner nor
	// backup still answers NotOwner.
	Backup bool
	// Budget is how long the sender will wait for the answer, counted
	// from when it sent the request (see the budget field in doc.go).
	// 0: the sender set no deadline.
	Budget time.Duration
}

// Type returns TypeCheck.
func (*Check) Type() Type { return TypeCheck }

func (m *Check) encode(e *encoder) {
	e.array(7)
	e.str(m.Viewer)
	e.time(m.Now, m.HasNow)
	if m.Encoded != nil {
		e.list("caps", m.Encoded.Len(), MaxCheckCaps)
		e.buf = append(e.buf, m.Encoded.buf...)
	} else {
		e.caps(m.Table.Caps, MaxCheckCaps)
	}
	e.uint16s(m.Table.Refs)
	if len(m.Table.Ends) > MaxCandidates {
		e.fail(errTooMany("candidates", len(m.Table.Ends), MaxCandidates))
	}
	e.uint32s(m.Table.Ends)
	e.bool(m.Backup)
	e.budget(m.Budget)
}

func (m *Check) decode(d *decoder) {
	extra := d.array(5)
	m.Viewer = d.str()
	m.Now, m.HasNow = d.time()
	m.Table.Caps = d.caps(m.Table.Caps, MaxCheckCaps)
	m.Table.Refs = d.uint16s(m.Table.Refs, noLimit)
	m.Table.Ends = d.uint32s(m.Table.Ends, MaxCandidates)
	m.Backup = false
	if extra > 0 { // optional: added after the first five fields
		m.Backup = d.bool()
		extra--
	}
	m.Budget, extra = d.budget(extra) // optional: added after backup
	d.end(extra)
}

// EncodedCaps is a list of caps in their wire form, for a sender that
// reads a Check's caps from elsewhere: the client reads them from the
// caller's candidates, and encoding each as it reads it replaces copying
// it into Table.Caps and encoding the copy (issue 21: the client shares
// its core with the ad server). A Check sends the list with the same
// bytes as the caps themselves. The zero value is an empty list.
type EncodedCaps struct {
	buf  []byte
	ends []uint32 // where each cap's encoding ends in buf
}

// Reset empties the list, keeping its storage.
func (l *EncodedCaps) Reset() { l.buf, l.ends = l.buf[:0], l.ends[:0] }

// Len returns the number of caps.
func (l *EncodedCaps) Len() int { return len(l.ends) }

// Append encodes c at the end of the list; a cap with a string over
// MaxStringLen or a window that is not a whole number of milliseconds
// is refused (as AppendFrame refuses it in Table.Caps).
func (l *EncodedCaps) Append(c *fcap.Cap) error {
	// The check and encoding of AppendCapForm, written out: this runs
	// for every cap of every CheckInto, where a call more shows.
	ms, whole := wireWindow(c)
	if len(c.Scope) > MaxStringLen || len(c.ID) > MaxStringLen || !whole {
		return capUnencodable(c, whole)
	}
	l.buf = appendCap(l.buf, c, ms)
	l.ends = append(l.ends, uint32(len(l.buf)))
	return nil
}

// AppendCapForm appends c's wire form to b: the bytes Append adds to a
// list for it, and Form returns. A cap with a string over MaxStringLen
// or a window that is not a whole number of milliseconds is refused.
func AppendCapForm(b []byte, c *fcap.Cap) ([]byte, error) {
	ms, whole := wireWindow(c)
	if len(c.Scope) > MaxStringLen || len(c.ID) > MaxStringLen || !whole {
		return b, capUnencodable(c, whole)
	}
	return appendCap(b, c, ms), nil
}

// capUnencodable is the error for a cap the wire cannot carry: whole
// reports whether its window is a whole number of milliseconds; if it
// is, a string is over MaxStringLen.
func capUnencodable(c *fcap.Cap, whole bool) error {
	if !whole {
		return windowNotMillis(c)
	}
	return fmt.Errorf("cap %q/%q: string of %d bytes, limit %d", trim(c.Scope), trim(c.ID), max(len(c.Scope), len(c.ID)), MaxStringLen)
}

// AppendForm appends a cap already in its wire form, as AppendCapForm
// made it: a sender that encodes its caps once, ahead of the requests
// that carry them, copies them in (see client.PreparedCandidate).
func (l *EncodedCaps) AppendForm(form []byte) {
	l.buf = append(l.buf, form...)
	l.ends = append(l.ends, uint32(len(l.buf)))
}

// Form returns the encoding of cap i: two caps are equal exactly when
// their encodings are, so it serves as a key for the cap.
func (l *EncodedCaps) Form(i int) []byte {
	start := uint32(0)
	if i > 0 {
		start = l.ends[i-1]
	}
	return l.buf[start:l.ends[i]]
}

// trim shortens s for an error message.
func trim(s string) string {
	if len(s) > 32 {
		return s[:32] + "..."
	}
	return s
}

// CheckResult answers a Check: one verdict per candidate, in order, and
// optionally how many impressions each cap of the table has left.
//
// Wire: [epoch uint, now int, verdicts bin, left bin], where verdicts is
// packed 4 bytes each: remaining uint16 little-endian (clamped to
// 65535), blocking+1 uint8 (0: none) and flags uint8 (bit 0: allowed;
// bit 1: bit 8 of blocking+1, for a candidate's 256th cap); and left is
// 2 bytes per cap, little-endian; stale bool. left and stale were added
// after the first three fields: a body without them decodes with Left
// empty and Stale false.
type CheckResult struct {
	// Epoch is the epoch of the ring the node used.
	Epoch uint64
	// Now is the time the verdicts are for: the request's, or the
	// node's clock when the request had none.
	Now int64
	// Verdicts holds one verdict per candidate, in the request's order.
	// Remaining is clamped to [0, 65535] (fcap.MaxLimit) and Blocking
	// must be in [-1, 510].
	Verdicts []fcap.Verdict
	// Left holds, for every cap of the request's table in order, how
	// many impressions it has left (limit minus count, at least 0;
	// engine.Engine.CheckTableCaps), so a client can place several ads
	// from one answer. Empty when the node did not say; at most
	// MaxCheckCaps.
	Left []uint16
	// Stale says a backup owner answered (the request allowed it): its
	// counts may lag the owner's by the replication delay.
	Stale bool
}

// Type returns TypeCheckResult.
func (*CheckResult) Type() Type { return TypeCheckResult }

func (m *CheckResult) encode(e *encoder) {
	e.array(5)
	e.uint(m.Epoch)
	e.int(m.Now)
	e.verdicts(m.Verdicts)
	if len(m.Left) > MaxCheckCaps {
		e.fail(errTooMany("left", len(m.Left), MaxCheckCaps))
	}
	e.uint16s(m.Left)
	e.bool(m.Stale)
}

func (m *CheckResult) decode(d *decoder) {
	extra := d.array(3)
	m.Epoch = d.uint()
	m.Now = d.int()
	m.Verdicts = d.verdicts(m.Verdicts)
	m.Left = m.Left[:0]
	if extra > 0 { // optional: added after the first three fields
		m.Left = d.uint16s(m.Left, MaxCheckCaps)
		extra--
	}
	m.Stale = false
	if extra > 0 {
		m.Stale = d.bool()
		extra--
	}
	d.end(extra)
}

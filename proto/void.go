package proto

import "github.com/fcap-io/fcap"

// Void takes one recorded impression back (invalid-traffic refunds): it
// stops counting on every counter it was recorded on, on the viewer's
// owner and every backup. The owner keeps a void mark (logged and
// replicated to every backup before it answers) so that no older copy,
// log replay or late Record of the same id counts it again. Counters
// hold no ids, so the impression is named as it was recorded: its id,
// time and caps; the owner refuses (CodeBadRequest) one whose time and
// caps do not match what it remembers of the id. Voiding again is safe
// and answers the same. It is answered with a VoidResult, or an Error.
//
// Wire: [viewer str, id str, time int, caps [cap...]].
type Void struct {
	// Viewer is the canonical viewer id: the routing key.
	Viewer string
	// Impression is the impression as recorded: ID, Time (required:
	// the time it was recorded with) and Caps (at most
	// MaxCapsPerMessage). Its Reservation is not sent.
	Impression fcap.Impression
}

// Type returns TypeVoid.
func (*Void) Type() Type { return TypeVoid }

func (m *Void) encode(e *encoder) {
	e.array(4)
	e.str(m.Viewer)
	e.str(m.Impression.ID)
	e.int(m.Impression.Time)
	e.caps(m.Impression.Caps, MaxCapsPerMessage)
}

func (m *Void) decode(d *decoder) {
	extra := d.array(4)
	m.Viewer = d.str()
	m.Impression.ID = d.str()
	m.Impression.Time = d.int()
	m.Impression.Caps = d.caps(m.Impression.Caps, MaxCapsPerMessage)
	m.Impression.Reservation = 0
	d.end(extra)
}

// VoidResult answers a Void.
//
// Wire: [epoch uint, voided bool].
type VoidResult struct {
	// Epoch is the epoch of the ring the node used.
	Epoch uint64
	// Voided says the owner had recorded the impression and it no
	// longer counts (by this Void or an earlier one). False: the owner
	// holds no record of the id (never recorded, or forgotten): nothing
	// was taken back, and the id will not count if it arrives later.
	Voided bool
}

// Type returns TypeVoidResult.
func (*VoidResult) Type() Type { return TypeVoidResult }

func (m *VoidResult) encode(e *encoder) {
	e.array(2)
	e.uint(m.Epoch)
	e.bool(m.Voided)
}

func (m *VoidResult) decode(d *decoder) {
	extra := d.array(2)
	m.Epoch = d.uint()
	m.Voided = d.bool()
	d.end(extra)
}

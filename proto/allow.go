package proto

import (
	"errors"
	"time"

	"github.com/fcap-io/fcap"
)

// Allow atomically checks a viewer's caps and, if every one has room,
// records an impression on each (engine.Engine.Allow). It is answered
// with an AllowResult, or an Error.
//
// Wire: [viewer str, now int|nil, caps [cap...], budget uint, backup
// bool]. budget and backup were added after the first three fields: a
// body without them decodes with Budget 0 (no deadline) and Backup false.
type Allow struct {
	// Viewer is the canonical viewer id: the routing key.
	Viewer string
	// Now is the time of the impression, when HasNow is set.
	Now int64
	// HasNow says the request carries its time. When false, the node
	// uses its clock; Now is then ignored.
	HasNow bool
	// Caps are the caps to check and count against. At most
	// MaxCapsPerMessage.
	Caps []fcap.Cap
	// Budget is how long the sender will wait for the answer, counted
	// from when it sent the request (see the budget field in doc.go).
	// 0: the sender set no deadline.
	Budget time.Duration
	// Backup says the client could not reach the viewer's owner and
	// accepts a backup owner in its place. A backup owner then applies
	// the Allow if every cap is soft, and replicates the impression to
	// the other owners, whose copies merge it in; a strict cap, or a
	// node that is neither owner nor backup, still gets NotOwner.
	Backup bool
}

// Type returns TypeAllow.
func (*Allow) Type() Type { return TypeAllow }

func (m *Allow) encode(e *encoder) {
	e.array(5)
	e.str(m.Viewer)
	e.time(m.Now, m.HasNow)
	e.caps(m.Caps, MaxCapsPerMessage)
	e.budget(m.Budget)
	e.bool(m.Backup)
}

func (m *Allow) decode(d *decoder) {
	extra := d.array(3)
	m.Viewer = d.str()
	m.Now, m.HasNow = d.time()
	m.Caps = d.caps(m.Caps, MaxCapsPerMessage)
	m.Budget, extra = d.budget(extra) // optional: added after the first three fields
	m.Backup = false
	if extra > 0 { // optional: added after budget
		m.Backup = d.bool()
		extra--
	}
	d.end(extra)
}

// AllowResult answers an Allow.
//
// Wire: [epoch uint, now int, verdict [allowed bool, remaining int,
// blocking int], grant uint]. grant was added after the first three
// fields: a body without it decodes with Grant 0.
type AllowResult struct {
	// Epoch is the epoch of the ring the node used.
	Epoch uint64
	// Now is the time the node used: the request's, or its clock.
	Now int64
	// Verdict says whether the impression was allowed (and recorded),
	// what remains after it, and which cap blocked.
	Verdict fcap.Verdict
	// Grant names a strict grant the node will take back on an Undo
	// (see Undo), for a short while after it answers; 0 when there is
	// nothing to undo (refused, soft caps only, or a node that does not
	// remember grants). Sent only when not 0.
	Grant uint64
}

// Type returns TypeAllowResult.
func (*AllowResult) Type() Type { return TypeAllowResult }

func (m *AllowResult) encode(e *encoder) {
	if m.Grant == 0 {
		e.array(3) // the common answer stays as short as it was
	} else {
		e.array(4)
	}
	e.uint(m.Epoch)
	e.int(m.Now)
	e.verdict(&m.Verdict)
	if m.Grant != 0 {
		e.uint(m.Grant)
	}
}

func (m *AllowResult) decode(d *decoder) {
	extra := d.array(3)
	m.Epoch = d.uint()
	m.Now = d.int()
	d.verdict(&m.Verdict)
	m.Grant = 0
	if extra > 0 { // optional: added after the first three fields
		m.Grant = d.uint()
		extra--
	}
	d.end(extra)
}

// Reserve atomically checks a viewer's caps and, if every one has room,
// takes a reservation that counts against each of them until it
// expires, is released, or an impression naming it is recorded
// (engine.Engine.Reserve). Strict caps reserve at decision time. It is
// answered with a ReserveResult, or an Error.
//
// Wire: [viewer str, now int|nil, ttl int, caps [cap...], budget uint].
// budget was added after the first four fields: a body without it
// decodes with Budget 0 (no deadline).
type Reserve struct {
	// Viewer is the canonical viewer id: the routing key.
	Viewer string
	// Now is the time of the reservation, when HasNow is set.
	Now int64
	// HasNow says the request carries its time. When false, the node
	// uses its clock; Now is then ignored.
	HasNow bool
	// TTL is how long the reservation counts, in ticks from Now.
	TTL int64
	// Caps are the caps of the candidate to reserve. At most
	// MaxCapsPerMessage.
	Caps []fcap.Cap
	// Budget is how long the sender will wait for the answer, counted
	// from when it sent the request (see the budget field in doc.go).
	// 0: the sender set no deadline.
	Budget time.Duration
}

// Type returns TypeReserve.
func (*Reserve) Type() Type { return TypeReserve }

func (m *Reserve) encode(e *encoder) {
	e.array(5)
	e.str(m.Viewer)
	e.time(m.Now, m.HasNow)
	e.int(m.TTL)
	e.caps(m.Caps, MaxCapsPerMessage)
	e.budget(m.Budget)
}

func (m *Reserve) decode(d *decoder) {
	extra := d.array(4)
	m.Viewer = d.str()
	m.Now, m.HasNow = d.time()
	m.TTL = d.int()
	m.Caps = d.caps(m.Caps, MaxCapsPerMessage)
	m.Budget, extra = d.budget(extra) // optional: added after the first four fields
	d.end(extra)
}

// ReserveResult answers a Reserve.
//
// Wire: [epoch uint, now int, verdict [allowed bool, remaining int,
// blocking int], id uint].
type ReserveResult struct {
	// Epoch is the epoch of the ring the node used.
	Epoch uint64
	// Now is the time the node used: the request's, or its clock.
	Now int64
	// Verdict says whether the reservation was taken, what remains
	// after it, and which cap blocked.
	Verdict fcap.Verdict
	// ID names the reservation when Verdict.Allowed (never 0 then), for
	// Release and fcap.Impression.Reservation; 0 otherwise.
	ID uint64
}

// Type returns TypeReserveResult.
func (*ReserveResult) Type() Type { return TypeReserveResult }

func (m *ReserveResult) encode(e *encoder) {
	e.array(4)
	e.uint(m.Epoch)
	e.int(m.Now)
	e.verdict(&m.Verdict)
	e.uint(m.ID)
}

func (m *ReserveResult) decode(d *decoder) {
	extra := d.array(4)
	m.Epoch = d.uint()
	m.Now = d.int()
	d.verdict(&m.Verdict)
	m.ID = d.uint()
	d.end(extra)
}

// Release drops a reservation before it expires
// (engine.Engine.Release). It is answered with a ReleaseResult, or an
// Error of CodeUnknownReservation if the viewer holds no such
// reservation.
//
// Wire: [viewer str, id uint].
type Release struct {
	// Viewer is the canonical viewer id the reservation was taken for.
	Viewer string
	// ID is the reservation's id, from ReserveResult.ID.
	ID uint64
}

// Type returns TypeRelease.
func (*Release) Type() Type { return TypeRelease }

func (m *Release) encode(e *encoder) {
	e.array(2)
	e.str(m.Viewer)
	e.uint(m.ID)
}

func (m *Release) decode(d *decoder) {
	extra := d.array(2)
	m.Viewer = d.str()
	m.ID = d.uint()
	d.end(extra)
}

// ReleaseResult answers a Release that dropped its reservation.
//
// Wire: [epoch uint].
type ReleaseResult struct {
	// Epoch is the epoch of the ring the node used.
	Epoch uint64
}

// Type returns TypeReleaseResult.
func (*ReleaseResult) Type() Type { return TypeReleaseResult }

func (m *ReleaseResult) encode(e *encoder) {
	e.array(1)
	e.uint(m.Epoch)
}

func (m *ReleaseResult) decode(d *decoder) {
	extra := d.array(1)
	m.Epoch = d.uint()
	d.end(extra)
}

// Undo gives back a strict Allow grant whose answer reached the caller
// after it had given up (it decided by policy, failed closed, and showed
// no ad): the owner takes the impression back exactly as it does a
// strict grant it could not answer in time, so the slot is free again.
// The node remembers each strict grant it answers, by AllowResult.Grant,
// for a short while; an Undo for a grant it does not remember (unknown,
// soft, already undone, forgotten, or for another viewer) changes
// nothing and answers Undone false, so an Undo may be sent again safely.
// A strict Reserve is given back with Release. It is answered with an
// UndoResult, or an Error.
//
// Wire: [viewer str, grant uint].
type Undo struct {
	// Viewer is the canonical viewer id the grant was for: the routing
	// key. It must be the grant's own viewer.
	Viewer string
	// Grant is AllowResult.Grant of the grant to give back; never 0.
	Grant uint64
}

// Type returns TypeUndo.
func (*Undo) Type() Type { return TypeUndo }

func (m *Undo) encode(e *encoder) {
	e.array(2)
	e.str(m.Viewer)
	e.uint(m.Grant)
}

func (m *Undo) decode(d *decoder) {
	extra := d.array(2)
	m.Viewer = d.str()
	m.Grant = d.uint()
	if d.err == nil && m.Grant == 0 {
		d.fail(errors.New("undo of grant 0"))
	}
	d.end(extra)
}

// UndoResult answers an Undo.
//
// Wire: [epoch uint, undone bool].
type UndoResult struct {
	// Epoch is the epoch of the ring the node used.
	Epoch uint64
	// Undone says this Undo took the grant back; false when there was
	// nothing to take back (already undone, unknown, or forgotten).
	Undone bool
}

// Type returns TypeUndoResult.
func (*UndoResult) Type() Type { return TypeUndoResult }

func (m *UndoResult) encode(e *encoder) {
	e.array(2)
	e.uint(m.Epoch)
	e.bool(m.Undone)
}

func (m *UndoResult) decode(d *decoder) {
	extra := d.array(2)
	m.Epoch = d.uint()
	m.Undone = d.bool()
	d.end(extra)
}

package proto

import "github.com/fcap-io/fcap"

// RecordItem is one impression that played, for one viewer.
//
// Wire: [viewer str, id str, time int|nil, caps [cap...], reservation
// uint], the impression's fields flattened into the item.
type RecordItem struct {
	// Viewer is the canonical viewer id: the routing key.
	Viewer string
	// Impression is what played: its ID (for idempotency), Time (when
	// HasTime is set), Caps (at most MaxCapsPerMessage) and the
	// Reservation it confirms (0 for none).
	Impression fcap.Impression
	// HasTime says Impression.Time is set. When false, the node uses
	// its clock; Impression.Time is then ignored.
	HasTime bool
}

// Record reports impressions that played. The items are independent: a
// batch may hold several viewers, and each item succeeds or fails on its
// own. It is answered with a RecordResult (an Error only when the whole
// request fails: malformed, not owner of any, overloaded).
//
// Wire: [items [item...], backup bool]. backup was added after the
// first field: a body without it decodes with Backup false.
type Record struct {
	// Items are the impressions, at most MaxRecordItems.
	Items []RecordItem
	// Backup says the client could not reach the items' owners and
	// accepts a backup owner in their place: a backup owner applies an
	// item whose caps are all soft and replicates it to the other
	// owners (the impression id keeps a copy that reaches the owner
	// twice from counting twice); other items get CodeNotOwner.
	Backup bool
	// Replicated asks for each item to be acknowledged only once every
	// owner of its viewer applied it, whatever its caps' mode (a
	// consumer of a durable stream commits past it only then). The items
	// ride the replication batches that flow anyway: the owner answers
	// when the batch carrying them was applied. No backup stands in for
	// such items (Backup is ignored).
	Replicated bool
}

// Type returns TypeRecord.
func (*Record) Type() Type { return TypeRecord }

func (m *Record) encode(e *encoder) {
	if m.Replicated {
		e.array(3)
	} else {
		e.array(2)
	}
	e.list("items", len(m.Items), MaxRecordItems)
	for i := range m.Items {
		it := &m.Items[i]
		e.array(5)
		e.str(it.Viewer)
		e.str(it.Impression.ID)
		e.time(it.Impression.Time, it.HasTime)
		e.caps(it.Impression.Caps, MaxCapsPerMessage)
		e.uint(it.Impression.Reservation)
	}
	e.bool(m.Backup)
	if m.Replicated {
		e.bool(true)
	}
}

func (m *Record) decode(d *decoder) {
	extra := d.array(1)
	m.Items = resize(m.Items, d.list("items", MaxRecordItems, minRecordItemSize))
	for i := range m.Items {
		it := &m.Items[i]
		fields := d.array(5)
		it.Viewer = d.str()
		it.Impression.ID = d.str()
		it.Impression.Time, it.HasTime = d.time()
		it.Impression.Caps = d.caps(it.Impression.Caps, MaxCapsPerMessage)
		it.Impression.Reservation = d.uint()
		d.end(fields)
	}
	m.Backup, m.Replicated = false, false
	if extra > 0 { // optional: added after the first field
		m.Backup = d.bool()
		extra--
	}
	if extra > 0 { // optional: added after Backup
		m.Replicated = d.bool()
		extra--
	}
	d.end(extra)
}

// ItemResult is the outcome of one RecordItem.
//
// Wire: [status uint8, code uint16].
type ItemResult struct {
	// Status says what the engine did with the impression (Recorded,
	// Duplicate, Stale) when Code is 0.
	Status fcap.RecordStatus
	// Code is 0 when the item was applied as Status says. Otherwise the
	// item failed with that code (CodeBadRequest, CodeNotOwner,
	// CodeCapacity, ...) and changed nothing; Status is then 0.
	Code Code
}

// RecordResult answers a Record: one result per item, in order.
//
// Wire: [epoch uint, results [[status, code]...]].
type RecordResult struct {
	// Epoch is the epoch of the ring the node used.
	Epoch uint64
	// Results holds one result per item of the request, in order; at
	// most MaxRecordItems.
	Results []ItemResult
}

// Type returns TypeRecordResult.
func (*RecordResult) Type() Type { return TypeRecordResult }

func (m *RecordResult) encode(e *encoder) {
	e.array(2)
	e.uint(m.Epoch)
	e.list("results", len(m.Results), MaxRecordItems)
	for i := range m.Results {
		r := &m.Results[i]
		e.array(2)
		e.uint(uint64(r.Status))
		e.uint(uint64(r.Code))
	}
}

func (m *RecordResult) decode(d *decoder) {
	extra := d.array(2)
	m.Epoch = d.uint()
	m.Results = resize(m.Results, d.list("results", MaxRecordItems, minItemResultSize))
	for i := range m.Results {
		r := &m.Results[i]
		fields := d.array(2)
		r.Status = fcap.RecordStatus(d.uintN(0xFF))
		r.Code = Code(d.uintN(0xFFFF))
		d.end(fields)
	}
	d.end(extra)
}

package engine

import (
	"fmt"

	"github.com/cespare/xxhash/v2"
)

// Impression is an ad that played: it counts once on every counter its
// caps name.
type Impression struct {
	// ID names the impression for idempotency: a second Record with the
	// same ID inside the impression's longest window changes nothing.
	ID string
	// Time is when it played.
	Time int64
	// Caps are the caps it counts against (creative, campaign,
	// advertiser, ...). Their limits set how much each sliding counter
	// retains; their windows set how long the impression matters.
	Caps []Cap
	// Reservation, when not 0, is the reservation this impression
	// confirms; it stops counting as the impression starts to.
	Reservation uint64
}

// RecordStatus says what Record did with a well-formed impression.
type RecordStatus uint8

const (
	// Recorded: the impression now counts.
	Recorded RecordStatus = iota
	// Duplicate: an impression with the same ID was already recorded;
	// nothing changed.
	Duplicate
	// Stale: the impression is at least its longest window older than
	// the newest time the engine has seen, so it could never count;
	// nothing changed.
	Stale
)

var recordStatusNames = [...]string{Recorded: "recorded", Duplicate: "duplicate", Stale: "stale"}

func (s RecordStatus) String() string {
	if int(s) < len(recordStatusNames) {
		return recordStatusNames[s]
	}
	return fmt.Sprintf("status(%d)", uint8(s))
}

// Record counts an impression on every counter of its caps, under one
// lock. It is idempotent on the impression's ID for at least the
// impression's longest window. An impression out of time order is
// inserted in order. One older than its longest window (judged against
// the high-water mark) is ignored and reported Stale. A reservation the
// impression names is dropped in every case.
func (e *Engine) Record(viewer string, imp Impression) (RecordStatus, error) {
	if err := e.validateViewer(viewer); err != nil {
		return 0, err
	}
	if imp.ID == "" {
		return 0, ErrEmptyImpressionID
	}
	if len(imp.ID) > e.cfg.MaxIDLength {
		return 0, ErrIDTooLong
	}
	mark, err := e.checkTime(imp.Time)
	if err != nil {
		return 0, err
	}
	if err := e.validateCaps(imp.Caps); err != nil {
		return 0, err
	}
	var buf [16]uint64
	khs := keyHashes(buf[:0], imp.Caps)
	var longest int64
	for i := range imp.Caps {
		longest = max(longest, imp.Caps[i].Window)
	}
	idh := xxhash.Sum64String(imp.ID)
	e.observe(mark)

	h := viewerKey(viewer)
	s := e.stripeOf(h)
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.lookup(h)
	if v != nil && v.ext != nil && imp.Reservation != 0 {
		before := v.bytes()
		if v.ext.dropReservation(imp.Reservation) {
		}
		e.settle(s, v, before, v.nkeys())
	}
	if imp.Time <= e.hw.Load()-longest {
		return Stale, nil
	}
	if v != nil && v.ext != nil {
		if v.ext.hasSeen(idh) {
			return Duplicate, nil
		}
	}
	v, err = e.prepare(s, v, h, khs, true)
	if err != nil {
		return 0, err
	}
	before, keys := v.bytes(), v.nkeys()
	e.record(v, imp.Caps, khs, imp.Time)
	e.remember(v, idh, imp.Time+longest)
	e.settle(s, v, before, keys)
	return Recorded, nil
}

// remember keeps impression id hash idh until the given time, forgetting
// the ids closest to expiry first when the viewer holds too many.
func (e *Engine) remember(v *viewer, idh uint64, until int64) {
	if v.ext == nil {
		v.ext = &viewerExt{}
	}
	x := v.ext
	if len(x.seen) >= e.cfg.MaxDedupePerViewer {
		x.pruneSeen(e.hw.Load())
		if len(x.seen) >= e.cfg.MaxDedupePerViewer {
			e.overflow.Add(int64(x.forgetOldest()))
		}
	}
	x.addSeen(idh, until)
}

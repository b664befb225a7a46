package engine

import (
	"github.com/cespare/xxhash/v2"
	"github.com/fcap-io/fcap"
)

// Record counts an impression on every counter of its caps, under one
// lock. It is idempotent on the impression's ID for at least the
// impression's longest window. An impression out of time order is
// inserted in order. One older than its longest window (judged against
// the high-water mark) is ignored and reported Stale. A reservation the
// impression names is dropped in every case.
func (e *Engine) Record(viewer string, imp fcap.Impression) (fcap.RecordStatus, error) {
	return e.RecordWrite(nil, viewer, imp)
}

// RecordWrite is Record that reports the viewer it changed through w
// (see Write): a Recorded impression, or one naming a reservation (which
// is dropped whatever the status).
func (e *Engine) RecordWrite(w *Write, viewer string, imp fcap.Impression) (st fcap.RecordStatus, err error) {
	if err := e.validateViewer(viewer); err != nil {
		return 0, err
	}
	if imp.ID == "" {
		return 0, fcap.ErrEmptyImpressionID
	}
	if len(imp.ID) > e.cfg.MaxIDLength {
		return 0, fcap.ErrIDTooLong
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
		longest = max(longest, imp.Caps[i].WindowMillis())
	}
	idh := xxhash.Sum64String(imp.ID)
	e.observe(mark)

	h, s := e.lockViewer(viewer)
	defer s.mu.Unlock()
	if w != nil {
		defer func() {
			if err == nil && (st == fcap.Recorded || imp.Reservation != 0) {
				w.wrote(e, s, h)
			}
		}()
	}
	v := s.lookup(h)
	if v != nil && v.ext != nil && imp.Reservation != 0 {
		before := v.bytes()
		if v.ext.dropReservation(imp.Reservation) {
		}
		e.settle(s, v, before, v.nkeys())
	}
	if imp.Time <= e.hw.Load()-longest || (v != nil && !v.recordable(imp.Time)) {
		return fcap.Stale, nil
	}
	if v != nil && v.ext != nil {
		if v.ext.hasSeen(idh) || v.voided(idh) {
			return fcap.Duplicate, nil
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
	return fcap.Recorded, nil
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

package engine

import (
	"math/rand/v2"

	"github.com/fcap-io/fcap"
)

// Allow atomically checks the caps at now and, if every one has room,
// records an impression at now on each of their counters. A denial
// records nothing. With one cap this is exactly the conformance contract
// (shared/conformance): concurrent Allow calls on a counter with limit L
// grant exactly L.
//
// Live reservations count against the caps. The verdict's Remaining is
// what is left after this impression.
func (e *Engine) Allow(viewer string, now int64, caps ...fcap.Cap) (fcap.Verdict, error) {
	return e.AllowWrite(nil, viewer, now, caps)
}

// AllowWrite is Allow that reports the viewer it changed, and appends
// its new state to w's journal, through w (see Write).
func (e *Engine) AllowWrite(w *Write, viewer string, now int64, caps []fcap.Cap) (vd fcap.Verdict, err error) {
	if err := e.validateViewer(viewer); err != nil {
		return fcap.Verdict{}, err
	}
	mark, err := e.checkTime(now)
	if err != nil {
		return fcap.Verdict{}, err
	}
	if err := e.validateCaps(caps); err != nil {
		return fcap.Verdict{}, err
	}
	var buf [16]uint64
	khs := keyHashes(buf[:0], caps)
	e.observe(mark)

	h, s := e.lockViewer(viewer)
	defer s.mu.Unlock()
	if w != nil {
		defer func() {
			if err == nil && vd.Allowed {
				w.wrote(e, s, h)
			}
		}()
	}
	v := s.lookup(h)
	vd = e.evaluateWrite(w, v, h, caps, khs, now)
	if !vd.Allowed {
		return vd, nil
	}
	v, err = e.prepare(s, v, h, khs, true)
	if err != nil {
		return fcap.Verdict{}, err
	}
	before, keys := v.bytes(), v.nkeys()
	e.record(v, caps, khs, now)
	if w != nil && w.Grant != 0 {
		e.remember(v, w.Grant, now+longestWindow(caps))
	}
	e.settle(s, v, before, keys)
	vd.Remaining--
	return vd, nil
}

// longestWindow is the longest window of caps.
func longestWindow(caps []fcap.Cap) int64 {
	var longest int64
	for i := range caps {
		longest = max(longest, caps[i].WindowMillis())
	}
	return longest
}

// Reserve atomically checks the candidate's caps at now and, if every one
// has room, takes a reservation that counts against each of them until
// now+ttl, until Release, or until an impression naming it is recorded.
// It returns the reservation id (never 0) when allowed.
func (e *Engine) Reserve(viewer string, c fcap.Candidate, now, ttl int64) (fcap.Verdict, uint64, error) {
	return e.ReserveWrite(nil, viewer, c, now, ttl)
}

// ReserveWrite is Reserve that reports the viewer it changed through w
// (see Write).
func (e *Engine) ReserveWrite(w *Write, viewer string, c fcap.Candidate, now, ttl int64) (vd fcap.Verdict, id uint64, err error) {
	if err := e.validateViewer(viewer); err != nil {
		return fcap.Verdict{}, 0, err
	}
	mark, err := e.checkTime(now)
	if err != nil {
		return fcap.Verdict{}, 0, err
	}
	if ttl < 1 || ttl > fcap.MaxTime {
		return fcap.Verdict{}, 0, fcap.ErrBadTTL
	}
	if err := e.validateCaps(c.Caps); err != nil {
		return fcap.Verdict{}, 0, err
	}
	var buf [16]uint64
	khs := keyHashes(buf[:0], c.Caps)
	e.observe(mark)

	h, s := e.lockViewer(viewer)
	defer s.mu.Unlock()
	if w != nil {
		defer func() {
			if err == nil && vd.Allowed {
				w.wrote(e, s, h)
			}
		}()
	}
	v := s.lookup(h)
	vd = e.evaluateWrite(w, v, h, c.Caps, khs, now)
	if !vd.Allowed {
		return vd, 0, nil
	}
	if v != nil && v.ext != nil {
		before := v.bytes()
		v.ext.pruneReservations(now)
		e.charge(s, before, v.bytes())
		if len(v.ext.res) >= e.cfg.MaxReservationsPerViewer {
			return fcap.Verdict{}, 0, fcap.ErrTooManyReservations
		}
	}
	v, err = e.prepare(s, v, h, khs, false)
	if err != nil {
		return fcap.Verdict{}, 0, err
	}
	before, keys := v.bytes(), v.nkeys()
	if v.ext == nil {
		v.ext = &viewerExt{}
	}
	r := reservation{id: newReservationID(), expires: now + ttl}
	for i, kh := range khs {
		if firstOf(khs, i) {
			r.keys = append(r.keys, kh)
		}
	}
	v.ext.res = append(v.ext.res, r)
	e.settle(s, v, before, keys)
	vd.Remaining--
	return vd, r.id, nil
}

func newReservationID() uint64 {
	for {
		if id := rand.Uint64(); id != 0 {
			return id
		}
	}
}

// Release drops a reservation before it expires. It returns
// ErrUnknownReservation if the viewer holds no live reservation with that
// id: it was released, confirmed, or has expired (swept or not: an
// expired reservation no longer counts, and releasing it is not a
// success). "Now" is the engine's clock when it has one, else the
// high-water mark.
func (e *Engine) Release(viewer string, id uint64) error {
	return e.ReleaseWrite(nil, viewer, id)
}

// ReleaseWrite is Release that reports the viewer it changed through w
// (see Write).
func (e *Engine) ReleaseWrite(w *Write, viewer string, id uint64) (err error) {
	if err := e.validateViewer(viewer); err != nil {
		return err
	}
	if id == 0 {
		return fcap.ErrZeroReservationID
	}
	h, s := e.lockViewer(viewer)
	defer s.mu.Unlock()
	if w != nil {
		defer func() {
			if err == nil {
				w.wrote(e, s, h)
			}
		}()
	}
	v := s.lookup(h)
	if v == nil || v.ext == nil {
		return fcap.ErrUnknownReservation
	}
	before := v.bytes()
	expires, ok := v.ext.takeReservation(id)
	e.settle(s, v, before, v.nkeys())
	if !ok || expires <= e.now() {
		return fcap.ErrUnknownReservation
	}
	return nil
}

// now is the engine's idea of the present for an operation that is given
// no time: its clock, when it has one, else the high-water mark.
func (e *Engine) now() int64 {
	now := e.hw.Load()
	if c := e.cfg.Clock; c != nil {
		now = max(now, c())
	}
	return now
}

// prepare makes sure a write may proceed: it refuses new counters past
// the per-viewer and memory limits, and creates the viewer if needed.
// newKeys says whether the write creates the counters of khs.
func (e *Engine) prepare(s *stripe, v *viewer, h uint64, khs []uint64, newKeys bool) (*viewer, error) {
	grows := v == nil
	if newKeys {
		if miss := v.missing(khs); miss > 0 {
			grows = true
			if v != nil && v.localKeys()+miss > e.cfg.MaxKeysPerViewer {
				return nil, fcap.ErrTooManyKeys
			}
		}
	}
	if grows && e.overLimit() {
		e.refused.Add(1)
		return nil, fcap.ErrMemoryLimit
	}
	if v == nil {
		v = s.add(h)
		e.viewers.Add(1)
		e.charge(s, 0, v.bytes())
	}
	return v, nil
}

// settle accounts for a write to v. A viewer the write left empty is
// freed by the sweeper.
func (e *Engine) settle(s *stripe, v *viewer, before int64, keys int) {
	if v.ext != nil && v.ext.empty() {
		v.ext = nil
	}
	e.charge(s, before, v.bytes())
	s.keys += v.nkeys() - keys
}

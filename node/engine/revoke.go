package engine

import "github.com/fcap-io/fcap"

// Revoke takes back an impression Allow granted at now for caps: the
// node could not tell the caller in time (its deadline passed while the
// grant was being replicated), so the grant must not use up a slot. It
// removes one impression at now from each distinct counter of caps, as
// far as each still holds it, and reports whether it removed any.
//
// Impressions carry no identity in a counter, so Revoke removes one at
// now, whichever Allow or Record put it there: the counts come out as if
// the revoked Allow had never been granted. An impression that already
// aged out of its counter (or a fixed or bucketed counter that moved on
// to a later window) no longer counts, and is left alone. The high-water
// mark does not move back.
func (e *Engine) Revoke(viewer string, now int64, caps ...fcap.Cap) (bool, error) {
	return e.RevokeWrite(nil, viewer, now, caps)
}

// RevokeWrite is Revoke that reports the viewer it changed through w
// (see Write).
func (e *Engine) RevokeWrite(w *Write, viewer string, now int64, caps []fcap.Cap) (removed bool, err error) {
	if err := e.validateViewer(viewer); err != nil {
		return false, err
	}
	if !validTime(now) {
		return false, fcap.ErrBadTime
	}
	if err := e.validateCaps(caps); err != nil {
		return false, err
	}
	var buf [16]uint64
	khs := keyHashes(buf[:0], caps)

	h, s := e.lockViewer(viewer)
	defer s.mu.Unlock()
	if w != nil {
		defer func() {
			if err == nil && removed {
				w.wrote(e, s, h)
			}
		}()
	}
	v := s.lookup(h)
	if v == nil {
		return false, nil
	}
	before, keys := v.bytes(), v.nkeys()
	removed = v.unrecord(khs, now)
	e.settle(s, v, before, keys)
	return removed, nil
}

// ValidateViewer reports why viewer is not a viewer id this engine
// accepts (empty, too long), or nil: for requests that name a viewer
// without going through an engine call that checks it first.
func (e *Engine) ValidateViewer(viewer string) error { return e.validateViewer(viewer) }

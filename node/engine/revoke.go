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
	if err := e.validateRevoke(viewer, now, caps); err != nil {
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

// RevokeGrantWrite takes back the impression an Allow granted at now for
// caps under the tag grant (Write.Grant), on this copy and on every copy
// it reaches: it takes the impression out of the counters as Revoke
// does and keeps a void mark for the tag (void.go), so a merge with a
// copy that holds the grant (a backup that applied it before the owner
// gave it back) takes it out there too, instead of bringing it back. It
// reports whether it removed any impression here; a grant already taken
// back changes nothing.
func (e *Engine) RevokeGrantWrite(w *Write, viewer string, grant uint64, now int64, caps []fcap.Cap) (removed bool, err error) {
	if grant == 0 {
		return e.RevokeWrite(w, viewer, now, caps)
	}
	if err := e.validateRevoke(viewer, now, caps); err != nil {
		return false, err
	}
	var buf [16]uint64
	khs := keyHashes(buf[:0], caps)
	m := voidMark{id: grant, at: now, until: now + longestWindow(caps)}
	for i, kh := range khs {
		if firstOf(khs, i) {
			m.keys = append(m.keys, kh)
		}
	}

	h, s := e.lockViewer(viewer)
	defer s.mu.Unlock()
	v := s.lookup(h)
	if v == nil || v.voided(grant) {
		return false, nil
	}
	changed := false
	if w != nil {
		defer func() {
			if changed {
				w.wrote(e, s, h)
			}
		}()
	}
	before, keys := v.bytes(), v.nkeys()
	seen := v.ext != nil && v.ext.hasSeen(grant)
	if !seen {
		// Its tag was forgotten (the viewer's id memory overflowed):
		// take it out here at least, as Revoke does.
		removed = v.unrecord(khs, now)
	}
	if m.until > e.hw.Load() && v.recordable(m.at) {
		// Taken out of the counters here if the tag is remembered, and
		// marked for every copy the state reaches.
		e.applyVoid(v, m)
		removed = removed || seen
	}
	changed = true
	e.settle(s, v, before, keys)
	return removed, nil
}

// validateRevoke checks a take-back's viewer, time and caps.
func (e *Engine) validateRevoke(viewer string, now int64, caps []fcap.Cap) error {
	if err := e.validateViewer(viewer); err != nil {
		return err
	}
	if !validTime(now) {
		return fcap.ErrBadTime
	}
	return e.validateCaps(caps)
}

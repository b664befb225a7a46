package engine

import (
	"fmt"
	"sync"

	"github.com/fcap-io/fcap"
)

// Check returns, for each candidate, whether every one of its caps has
// room at now, how many impressions remain, and which cap blocks. Live
// reservations count. Check records nothing; its time advances the
// high-water mark like any other. The verdicts are appended to out, in
// candidate order.
//
// A cap equal to the one at the same position of the previous candidate
// (the same advertiser on neighbouring candidates) is counted once; use
// CheckTable to share caps in any order.
func (e *Engine) Check(viewer string, cands []fcap.Candidate, now int64, out []fcap.Verdict) ([]fcap.Verdict, error) {
	if len(cands) > e.cfg.MaxCandidates {
		return out, fcap.ErrTooManyCandidates
	}
	sc := getScratch()
	defer putScratch(sc)
	var prev []fcap.Cap
	for i := range cands {
		caps := cands[i].Caps
		if len(caps) == 0 {
			return out, candidateError(i, fcap.ErrNoCaps)
		}
		if len(caps) > e.cfg.MaxCapsPerCandidate {
			return out, candidateError(i, fcap.ErrTooManyCaps)
		}
		for j := range caps {
			if j < len(prev) && sameCap(&caps[j], &prev[j]) {
				// Counted already: reuse the previous candidate's ref.
				sc.refs = append(sc.refs, sc.refs[len(sc.refs)-len(prev)])
				continue
			}
			sc.refs = append(sc.refs, uint16(len(sc.caps)))
			sc.caps = append(sc.caps, &caps[j])
		}
		sc.ends = append(sc.ends, uint32(len(sc.refs)))
		prev = caps
	}
	ck := e.lim.Checker()
	for i, c := range sc.caps {
		if err := ck.Check(c); err != nil {
			return out, fmt.Errorf("%w (%s)", capError(i, err), c)
		}
	}
	return e.check(viewer, now, out, sc)
}

// sameCap is caps equality, cheapest fields first.
func sameCap(a, b *fcap.Cap) bool {
	return a.Limit == b.Limit && a.Window == b.Window && a.Algorithm == b.Algorithm &&
		a.Mode == b.Mode && a.ID == b.ID && a.Scope == b.Scope
}

// CheckTable is Check for a request in table form.
func (e *Engine) CheckTable(viewer string, t *fcap.CheckTable, now int64, out []fcap.Verdict) ([]fcap.Verdict, error) {
	out, _, err := e.checkTable(viewer, t, now, out, nil, false)
	return out, err
}

// CheckTableCaps is CheckTable that also appends to left, for every cap of
// the table in order, how many impressions it has left (limit minus
// count, at least 0): what a client needs to place several ads from one
// answer without another round trip.
func (e *Engine) CheckTableCaps(viewer string, t *fcap.CheckTable, now int64, out []fcap.Verdict, left []int64) ([]fcap.Verdict, []int64, error) {
	return e.checkTable(viewer, t, now, out, left, true)
}

func (e *Engine) checkTable(viewer string, t *fcap.CheckTable, now int64, out []fcap.Verdict, left []int64, wantLeft bool) ([]fcap.Verdict, []int64, error) {
	if err := e.validateTable(t); err != nil {
		return out, left, err
	}
	sc := getScratch()
	defer putScratch(sc)
	for i := range t.Caps {
		sc.caps = append(sc.caps, &t.Caps[i])
	}
	sc.refs = append(sc.refs, t.Refs...)
	sc.ends = append(sc.ends, t.Ends...)
	out, err := e.check(viewer, now, out, sc)
	if err == nil && wantLeft {
		for i, c := range sc.caps {
			left = append(left, max(c.Limit-sc.used[i], 0))
		}
	}
	return out, left, err
}

// check counts every distinct cap of a validated request once, under the
// viewer's lock, then combines the counts per candidate.
func (e *Engine) check(viewer string, now int64, out []fcap.Verdict, sc *checkScratch) ([]fcap.Verdict, error) {
	if err := e.validateViewer(viewer); err != nil {
		return out, err
	}
	mark, err := e.checkTime(now)
	if err != nil {
		return out, err
	}
	var kh fcap.KeyHasher
	for _, c := range sc.caps {
		sc.khs = append(sc.khs, kh.Key(c))
	}
	e.observe(mark)

	h, s := e.lockViewer(viewer)
	v := s.lookup(h)
	sh := e.cfg.Shares
	for i, c := range sc.caps {
		var used int64
		if v != nil {
			used = e.used(v, c, sc.khs[i], now)
		}
		if sh != nil && c.Mode == fcap.Strict {
			// What the region's share lacks of the limit counts as used:
			// a strict cap has left what the region may still grant.
			used += c.Limit - sh.limitOf(v, h, sc.khs[i], c, now)
		}
		sc.used = append(sc.used, used)
	}
	s.mu.Unlock()

	start := uint32(0)
	for _, end := range sc.ends {
		vd := fcap.Verdict{Allowed: true, Remaining: fcap.MaxLimit, Blocking: -1}
		for j, ref := range sc.refs[start:end] {
			left := max(sc.caps[ref].Limit-sc.used[ref], 0)
			if left == 0 && vd.Allowed {
				vd.Allowed, vd.Blocking = false, j
			}
			vd.Remaining = min(vd.Remaining, left)
		}
		out = append(out, vd)
		start = end
	}
	return out, nil
}

// validateTable checks a table's shape and every cap in it.
func (e *Engine) validateTable(t *fcap.CheckTable) error {
	if len(t.Ends) > e.cfg.MaxCandidates {
		return fcap.ErrTooManyCandidates
	}
	if len(t.Caps) > e.cfg.MaxCandidates*e.cfg.MaxCapsPerCandidate || len(t.Caps) > 1<<16 {
		return fcap.ErrTooManyCaps
	}
	start := uint32(0)
	for i, end := range t.Ends {
		switch {
		case end < start || end > uint32(len(t.Refs)):
			return candidateError(i, fmt.Errorf("%w: cap indexes end at %d, outside [%d, %d]", fcap.ErrInvalid, end, start, len(t.Refs)))
		case end == start:
			return candidateError(i, fcap.ErrNoCaps)
		case end-start > uint32(e.cfg.MaxCapsPerCandidate):
			return candidateError(i, fcap.ErrTooManyCaps)
		}
		for _, ref := range t.Refs[start:end] {
			if int(ref) >= len(t.Caps) {
				return candidateError(i, fmt.Errorf("%w: cap index %d of %d caps", fcap.ErrInvalid, ref, len(t.Caps)))
			}
		}
		start = end
	}
	if start != uint32(len(t.Refs)) {
		return fmt.Errorf("%w: %d cap indexes belong to no candidate", fcap.ErrInvalid, len(t.Refs)-int(start))
	}
	ck := e.lim.Checker()
	for i := range t.Caps {
		if err := ck.Check(&t.Caps[i]); err != nil {
			return capError(i, err)
		}
	}
	return nil
}

// checkScratch holds one Check's working state: the distinct caps, each
// candidate as indexes into them, and per cap its key hash and count.
type checkScratch struct {
	caps []*fcap.Cap
	refs []uint16
	ends []uint32
	khs  []uint64
	used []int64
}

func (sc *checkScratch) reset() {
	clear(sc.caps) // drop references to the caller's caps
	sc.caps, sc.refs, sc.ends = sc.caps[:0], sc.refs[:0], sc.ends[:0]
	sc.khs, sc.used = sc.khs[:0], sc.used[:0]
}

var scratchPool = sync.Pool{New: func() any { return new(checkScratch) }}

func getScratch() *checkScratch { return scratchPool.Get().(*checkScratch) }

func putScratch(sc *checkScratch) {
	sc.reset()
	scratchPool.Put(sc)
}

// keyHashesAppend appends the key hash of every cap to khs.
func keyHashesAppend(khs []uint64, caps []fcap.Cap) []uint64 {
	var kh fcap.KeyHasher
	for i := range caps {
		khs = append(khs, kh.Key(&caps[i]))
	}
	return khs
}

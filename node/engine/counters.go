package engine

import "github.com/fcap-io/fcap"

// Counting and recording across a viewer's counters, shared by every
// operation. All of it runs under the viewer's stripe lock.

// used is how many impressions cap c, whose counter hashes to kh, sees at
// now: recorded impressions plus live reservations, and for a soft cap
// what the lanes of other regions counted (lane.go; a strict cap's limit
// is split between regions, each granting from its own share).
func (e *Engine) used(v *viewer, c *fcap.Cap, kh uint64, now int64) int64 {
	var n int64
	if i, ok := v.find(kh); ok {
		h := v.header(i)
		n = v.count(&h, now, c.WindowMillis())
	}
	if v.ext != nil {
		n += v.ext.reserved(kh, now)
	}
	if v.hasLanes() && c.Mode != fcap.Strict {
		n += e.lanesUsed(v, kh, now, c.WindowMillis())
	}
	return n
}

// evaluate returns the verdict of caps at now; v may be nil (a viewer
// with no state).
func (e *Engine) evaluate(v *viewer, caps []fcap.Cap, khs []uint64, now int64) fcap.Verdict {
	vd := fcap.Verdict{Allowed: true, Remaining: fcap.MaxLimit, Blocking: -1}
	for i := range caps {
		c := &caps[i]
		left := c.Limit
		if v != nil {
			left -= e.used(v, c, khs[i], now)
		}
		if left <= 0 {
			left = 0
			if vd.Allowed {
				vd.Allowed, vd.Blocking = false, i
			}
		}
		vd.Remaining = min(vd.Remaining, left)
	}
	return vd
}

// firstOf reports whether khs[i] is the first occurrence of its hash:
// caps sharing a counter write it once.
func firstOf(khs []uint64, i int) bool {
	for j := range i {
		if khs[j] == khs[i] {
			return false
		}
	}
	return true
}

// missing counts the distinct counters of khs that v lacks.
func (v *viewer) missing(khs []uint64) int {
	n := 0
	for i, kh := range khs {
		if !firstOf(khs, i) {
			continue
		}
		if v == nil {
			n++
		} else if _, ok := v.find(kh); !ok {
			n++
		}
	}
	return n
}

// record writes one impression at t to every distinct counter of caps,
// creating counters as needed. The caller has checked the limits on new
// counters.
func (e *Engine) record(v *viewer, caps []fcap.Cap, khs []uint64, t int64) {
	for i := range caps {
		if !firstOf(khs, i) {
			continue
		}
		c := &caps[i]
		// Caps sharing this counter: it retains for the largest.
		limit, window := c.Limit, c.WindowMillis()
		for j := i + 1; j < len(caps); j++ {
			if khs[j] == khs[i] {
				limit, window = max(limit, caps[j].Limit), max(window, caps[j].WindowMillis())
			}
		}
		if KeepsTimes(c.Algorithm) {
			v.makeRoom(t, e.hw.Load()) // may move every offset: before find
		}
		idx, ok := v.find(khs[i])
		var h header
		if !ok {
			words := newWords(c.Algorithm, window, e.cfg.Buckets)
			h = v.insertKey(idx, header{hash: khs[i], limit: int(limit), window: window, algo: c.Algorithm}, words)
			e.names.note(khs[i], c)
		} else {
			h = v.header(idx)
			if KeepsTimes(h.algo) && (int(limit) > h.limit || window > h.window) {
				h.limit, h.window = max(h.limit, int(limit)), max(h.window, window)
				v.setHeader(idx, h)
			}
		}
		v.recordAt(idx, &h, t)
	}
}

// reserved counts the live reservations at now that count against the
// counter kh.
func (x *viewerExt) reserved(kh uint64, now int64) int64 {
	var n int64
	for i := range x.res {
		r := &x.res[i]
		if r.expires <= now {
			continue
		}
		for _, k := range r.keys {
			if k == kh {
				n++
				break
			}
		}
	}
	return n
}

// dropReservation removes reservation id and reports whether it existed.
func (x *viewerExt) dropReservation(id uint64) bool {
	for i := range x.res {
		if x.res[i].id == id {
			x.res = append(x.res[:i], x.res[i+1:]...)
			return true
		}
	}
	return false
}

// takeReservation drops reservation id and returns when it expired.
func (x *viewerExt) takeReservation(id uint64) (expires int64, ok bool) {
	for i := range x.res {
		if x.res[i].id == id {
			expires = x.res[i].expires
			x.res = append(x.res[:i], x.res[i+1:]...)
			return expires, true
		}
	}
	return 0, false
}

// pruneReservations drops the reservations expired at now.
func (x *viewerExt) pruneReservations(now int64) {
	kept := x.res[:0]
	for _, r := range x.res {
		if r.expires > now {
			kept = append(kept, r)
		}
	}
	clear(x.res[len(kept):])
	x.res = kept
	if len(x.res) == 0 {
		x.res = nil
	}
}

// empty reports whether the extension holds nothing worth keeping.
func (x *viewerExt) empty() bool {
	return !x.wide && len(x.seen) == 0 && len(x.res) == 0 && (x.id == nil || x.id.empty()) && x.erasedAt == 0 && x.voids.count() == 0
}

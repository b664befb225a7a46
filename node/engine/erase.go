package engine

import "github.com/fcap-io/fcap"

// Erasing a viewer (privacy requests). Erase drops everything held for a
// viewer (counters, remembered impression ids, reservations, device
// links) and keeps the viewer as an empty state that carries only when it
// was erased: a tombstone. The tombstone travels like any state (the log,
// snapshots, replication, partition moves), and it is what stops an
// older copy from bringing the viewer back: replicas merge copies by
// union (merge.go), so a plain deletion would be undone by the next
// merge, sync or replay. A merge first takes the later erasure of the two
// copies, and then keeps of a copy that did not know it only what is
// dated after it; a Record of an impression at or before the erasure is
// answered Stale.
//
// What carries no time of its own is judged by the copy it comes from:
// the remembered impression ids and the reservations of a copy that had
// not seen the erasure are dropped, even those added after it (an id
// recorded on a stand-in while the erasure was on its way may then count
// once more; a reservation taken meanwhile is given back). A fixed or
// bucketed counter holds no timestamps: of such a copy, only windows and
// buckets that start after the erasure are kept.
//
// Sweep drops a tombstone once it is EraseRetention older than the
// high-water mark. A copy older than that (a replica cut off for longer,
// an old backup) could bring the viewer back; EraseRetention is longer
// than TombstoneRetention and than the longest window a cluster should
// serve.

// EraseRetention is how long an erasure is remembered (milliseconds).
const EraseRetention = 8 * 24 * 3_600_000

// Erase drops everything held for viewer and keeps a tombstone dated at
// (the erasure's time). It returns the devices linked to the viewer
// (their own slots still name it: the caller unlinks them) and the viewer
// the erased id was linked to as a device ("" if none). Erasing an
// erased viewer again moves its tombstone to the later time. It is
// refused, changing nothing, for an invalid viewer or time; time 0 is
// refused too (0 marks "never erased").
func (e *Engine) Erase(viewer string, at int64) (devices []string, linkedTo string, err error) {
	if err := e.validateViewer(viewer); err != nil {
		return nil, "", err
	}
	if at == 0 {
		return nil, "", fcap.ErrBadTime
	}
	mark, err := e.checkTime(at)
	if err != nil {
		return nil, "", err
	}
	e.observe(mark)
	h, s := e.lockViewer(viewer)
	defer s.mu.Unlock()
	v := s.lookup(h)
	if v == nil {
		v = s.add(h)
		e.viewers.Add(1)
		e.charge(s, 0, v.bytes())
	}
	if id := idOf(v); id != nil {
		for _, d := range id.devices {
			if !d.gone {
				devices = append(devices, d.name)
			}
		}
		linkedTo = id.viewer
	}
	before, keys := v.bytes(), v.nkeys()
	v.arena, v.base = nil, 0
	v.ext = &viewerExt{erasedAt: max(at, v.erasedAt())}
	e.settle(s, v, before, keys)
	return devices, linkedTo, nil
}

// ErasedAt returns when viewer was erased, or 0 if the engine holds no
// erasure of it.
func (e *Engine) ErasedAt(viewer string) int64 {
	h, s := e.lockViewer(viewer)
	defer s.mu.Unlock()
	return s.lookup(h).erasedAt()
}

// erasedAt is when v was erased, 0 if never (v may be nil).
func (v *viewer) erasedAt() int64 {
	if v == nil || v.ext == nil {
		return 0
	}
	return v.ext.erasedAt
}

// eraseMerge applies the later erasure of v and nv to v before nv is
// merged in, and returns the floor at or before which nv's dated content
// is dropped (-1: nv knew every erasure v knows, keep all of it).
func (e *Engine) eraseMerge(v, nv *viewer) (floor int64) {
	va, na := v.erasedAt(), nv.erasedAt()
	if na > va {
		// v had not seen this erasure: rebuild it from what it holds
		// dated after it.
		old := *v
		v.arena, v.base = nil, 0
		v.ext = &viewerExt{erasedAt: na}
		e.mergeCounters(v, &old, na)
		if id := idOf(&old); id != nil {
			if kept := id.after(na); kept != nil {
				v.ext.id = kept
			}
		}
		if old.ext != nil {
			v.ext.voids = old.ext.voids.after(na)
		}
	}
	if na < va {
		return va
	}
	return -1
}

// after returns a copy of the identity decisions dated after t, or nil
// if none is.
func (id *identity) after(t int64) *identity {
	out := &identity{}
	if id.linkAt > t {
		out.viewer, out.linkAt = id.viewer, id.linkAt
	}
	for _, d := range id.devices {
		if d.at > t {
			out.devices = append(out.devices, d)
		}
	}
	if out.empty() {
		return nil
	}
	return out
}

// pruneErasure forgets an erasure EraseRetention old at now.
func (x *viewerExt) pruneErasure(now int64) {
	if x.erasedAt != 0 && x.erasedAt < now-EraseRetention {
		x.erasedAt = 0
	}
}

// tombstone reports whether v holds nothing but an erasure.
func (v *viewer) tombstone() bool {
	x := v.ext
	return v.nkeys() == 0 && x != nil && x.erasedAt != 0 && !x.wide && len(x.seen) == 0 && len(x.res) == 0 && (x.id == nil || x.id.empty()) && x.voids.count() == 0
}

// recordable reports whether an impression at t may count on v: not
// one at or before v's erasure.
func (v *viewer) recordable(t int64) bool {
	at := v.erasedAt()
	return at == 0 || t > at
}

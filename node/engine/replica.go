package engine

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/fcap-io/fcap"
)

// Replication support. A node replicates state, not operations: after a
// client write changes a viewer, the node exports the viewer's current
// state and ships it to the other owners, which replace their copy with
// it. The latest state always wins, so
// replicas converge whatever the order and number of shipments, and a
// partition is moved to a new owner by shipping each of its viewers.

// ErrBadState rejects an exported viewer state that does not decode or
// is not self-consistent. Imports come from peers; a bad one changes
// nothing.
var ErrBadState = errors.New("bad viewer state")

const (
	stateVersion = 1
	// stateVersionErased is the version of a state that carries an
	// erasure (erase.go): the time follows the identity section. Other
	// states keep version 1, so a node that predates erasure still reads
	// them, and refuses (not misreads) one it could not keep.
	stateVersionErased = 2
	// stateVersionVoided is the version of a state that carries void
	// marks (void.go), after the erasure time if any: a node that
	// predates Void refuses it rather than dropping the marks.
	stateVersionVoided = 3

	stateWide     = 1 << 0
	stateIdentity = 1 << 1 // an identity section follows the reservations
	stateErased   = 1 << 2 // the erasure time follows (version 2 or 3)
	stateVoided   = 1 << 3 // void marks follow (version 3 only)
	stateAbsent   = 1 << 7 // the viewer holds nothing: the importer deletes it
)

// Observe advances the high-water mark to t, as if an operation had been
// given time t: replicas use it to age state by the owner's clock, a
// restart to restore the mark from the log. With a Config.Clock the mark
// never passes the clock; Observe reports true when t was further ahead
// of it than Config.MaxFuture (a peer or a log claiming a time no clock
// of the cluster should have reached), so the caller can count it. Such
// a t is clamped, not refused: the state it came with is still applied.
// A t outside [0, MaxTime] is ignored.
func (e *Engine) Observe(t int64) (clamped bool) {
	if !validTime(t) {
		return false
	}
	mark, err := e.checkTime(t)
	if err != nil {
		// Beyond the bound: clamp to the clock, which is not past t.
		mark = e.cfg.Clock()
	}
	e.observe(mark)
	return err != nil
}

// Export appends the current state of the viewer with the given key to
// dst, in a binary form Import takes. A viewer the engine does not hold is
// exported as "absent", so importing it deletes the viewer on a replica.
func (e *Engine) Export(key uint64, dst []byte) []byte {
	s := e.stripeOf(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	return exportViewer(dst, key, s.lookup(key))
}

func exportViewer(dst []byte, key uint64, v *viewer) []byte {
	erased := v.erasedAt()
	var voids *voidSet
	if v != nil && v.ext != nil && v.ext.voids.count() > 0 {
		voids = v.ext.voids
	}
	switch {
	case voids != nil:
		dst = append(dst, stateVersionVoided)
	case erased > 0:
		dst = append(dst, stateVersionErased)
	default:
		dst = append(dst, stateVersion)
	}
	dst = binary.LittleEndian.AppendUint64(dst, key)
	if v == nil || (v.nkeys() == 0 && v.ext == nil) {
		return append(dst, stateAbsent)
	}
	var flags byte
	if v.wide() {
		flags |= stateWide
	}
	id := idOf(v)
	if id != nil && id.empty() {
		id = nil
	}
	if id != nil {
		flags |= stateIdentity
	}
	if erased > 0 {
		flags |= stateErased
	}
	if voids != nil {
		flags |= stateVoided
	}
	dst = append(dst, flags)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(v.base))
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(v.arena)))
	for _, w := range v.arena {
		dst = binary.LittleEndian.AppendUint32(dst, w)
	}
	var seen []seenID
	var res []reservation
	if v.ext != nil {
		seen, res = v.ext.seen, v.ext.res
	}
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(seen)))
	for _, s := range seen {
		dst = binary.LittleEndian.AppendUint64(dst, s.hash())
		dst = binary.LittleEndian.AppendUint64(dst, uint64(s.untilMillis()))
	}
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(res)))
	for _, r := range res {
		dst = binary.LittleEndian.AppendUint64(dst, r.id)
		dst = binary.LittleEndian.AppendUint64(dst, uint64(r.expires))
		dst = binary.LittleEndian.AppendUint16(dst, uint16(len(r.keys)))
		for _, k := range r.keys {
			dst = binary.LittleEndian.AppendUint64(dst, k)
		}
	}
	if id != nil {
		dst = appendString(dst, id.viewer)
		dst = binary.LittleEndian.AppendUint64(dst, uint64(id.linkAt))
		dst = binary.LittleEndian.AppendUint32(dst, uint32(len(id.devices)))
		for _, d := range id.devices {
			dst = appendString(dst, d.name)
			dst = binary.LittleEndian.AppendUint64(dst, uint64(d.at))
			var gone byte
			if d.gone {
				gone = 1
			}
			dst = append(dst, gone)
		}
	}
	if erased > 0 {
		dst = binary.LittleEndian.AppendUint64(dst, uint64(erased))
	}
	if voids != nil {
		dst = binary.LittleEndian.AppendUint32(dst, uint32(len(voids.marks)))
		for _, m := range voids.marks {
			dst = binary.LittleEndian.AppendUint64(dst, m.id)
			dst = binary.LittleEndian.AppendUint64(dst, uint64(m.at))
			dst = binary.LittleEndian.AppendUint64(dst, uint64(m.until))
			dst = binary.LittleEndian.AppendUint16(dst, uint16(len(m.keys)))
			for _, k := range m.keys {
				dst = binary.LittleEndian.AppendUint64(dst, k)
			}
		}
	}
	return dst
}

func appendString(dst []byte, s string) []byte {
	dst = binary.LittleEndian.AppendUint16(dst, uint16(len(s)))
	return append(dst, s...)
}

func (r *stateReader) str(limit int) string {
	n := int(r.u16())
	if r.err == nil && n > limit {
		r.err = fmt.Errorf("%w: id of %d bytes", ErrBadState, n)
	}
	return string(r.take(n))
}

// maxDevicesInState bounds the devices one imported viewer may list.
const maxDevicesInState = 1 << 16

// stateReader decodes an exported state, failing (not panicking) on
// short or inconsistent input.
type stateReader struct {
	b   []byte
	err error
}

func (r *stateReader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b) {
		r.err = fmt.Errorf("%w: truncated", ErrBadState)
		return nil
	}
	b := r.b[:n]
	r.b = r.b[n:]
	return b
}

func (r *stateReader) u8() byte {
	if b := r.take(1); b != nil {
		return b[0]
	}
	return 0
}

func (r *stateReader) u16() uint16 {
	if b := r.take(2); b != nil {
		return binary.LittleEndian.Uint16(b)
	}
	return 0
}

func (r *stateReader) u32() uint32 {
	if b := r.take(4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

func (r *stateReader) u64() uint64 {
	if b := r.take(8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

// count reads a length prefix and checks that many items of size each
// fit in what is left and stay under limit.
func (r *stateReader) count(each, limit int) int {
	n := int(r.u32())
	if r.err == nil && (n > limit || n*each > len(r.b)) {
		r.err = fmt.Errorf("%w: %d items", ErrBadState, n)
	}
	if r.err != nil {
		return 0
	}
	return n
}

// Import replaces a viewer's state with an exported one (creating or
// deleting the viewer), and returns how many bytes of data it consumed,
// so states can be concatenated. The memory limit does not apply: a
// replica must hold what its owner holds. A state that does not decode or
// is not self-consistent changes nothing and returns an error wrapping
// ErrBadState.
func (e *Engine) Import(data []byte) (key uint64, n int, err error) {
	key, n, _, err = e.ImportIf(data, nil)
	return key, n, err
}

// ImportIf is Import that first asks accept (when not nil) whether to
// apply the state of this viewer key; a refused state is decoded, skipped
// and reported with applied false.
func (e *Engine) ImportIf(data []byte, accept func(key uint64) bool) (key uint64, n int, applied bool, err error) {
	key, n, err = e.importState(data, accept, &applied)
	return key, n, applied, err
}

func (e *Engine) importState(data []byte, accept func(uint64) bool, applied *bool) (key uint64, n int, err error) {
	st, n, err := e.decodeState(data)
	if err != nil {
		return 0, 0, err
	}
	if accept == nil || accept(st.key) {
		e.applyState(&st, false)
		*applied = true
	}
	return st.key, n, nil
}

// ImportAll imports a concatenation of exported states (a Replicate's)
// all or nothing: every state is decoded and checked before any is
// applied, so input with a bad state anywhere changes nothing and
// returns an error wrapping ErrBadState. accept, when not nil, is asked
// of each state as Import asks it; it counts the states applied and
// refused. What it decodes is held until all are applied: data bounds it.
func (e *Engine) ImportAll(data []byte, accept func(key uint64) bool) (applied, refused int, err error) {
	return e.importAll(data, accept, false)
}

// MergeAll is ImportAll that merges each state into the one held instead
// of replacing it (merge.go): nothing this node counted is lost to an
// older copy. Replication uses it; an absent state changes nothing.
func (e *Engine) MergeAll(data []byte, accept func(key uint64) bool) (applied, refused int, err error) {
	return e.importAll(data, accept, true)
}

func (e *Engine) importAll(data []byte, accept func(key uint64) bool, merge bool) (applied, refused int, err error) {
	var states []decodedState
	for rest := data; len(rest) > 0; {
		st, n, err := e.decodeState(rest)
		if err != nil {
			return 0, 0, fmt.Errorf("state %d at byte %d: %w", len(states), len(data)-len(rest), err)
		}
		states = append(states, st)
		rest = rest[n:]
	}
	for i := range states {
		if accept != nil && !accept(states[i].key) {
			refused++
			continue
		}
		e.applyState(&states[i], merge)
		applied++
	}
	return applied, refused, nil
}

// decodedState is a viewer state decoded and checked, not yet applied.
type decodedState struct {
	key    uint64
	absent bool
	v      viewer
}

// decodeState decodes and checks the state at the start of data and
// returns it with the number of bytes it took.
func (e *Engine) decodeState(data []byte) (decodedState, int, error) {
	r := &stateReader{b: data}
	version := r.u8()
	if (version < stateVersion || version > stateVersionVoided) && r.err == nil {
		return decodedState{}, 0, fmt.Errorf("%w: unknown version", ErrBadState)
	}
	key := r.u64()
	flags := r.u8()
	if r.err != nil {
		return decodedState{}, 0, r.err
	}
	if !flagsFit(version, flags) {
		return decodedState{}, 0, fmt.Errorf("%w: flags %#x in a version %d state", ErrBadState, flags, version)
	}
	if key == 0 {
		return decodedState{}, 0, fmt.Errorf("%w: viewer key 0", ErrBadState)
	}
	if flags&stateAbsent != 0 {
		return decodedState{key: key, absent: true}, len(data) - len(r.b), nil
	}
	nv := viewer{key: key, base: int64(r.u64())}
	words := r.count(4, 1<<26)
	if words > 0 {
		nv.arena = allocWords(words)
		for i := range nv.arena {
			nv.arena[i] = r.u32()
		}
	}
	x := &viewerExt{wide: flags&stateWide != 0}
	// Lists are sized once: count bounds them by the bytes present.
	seen := r.count(16, e.cfg.MaxDedupePerViewer)
	if seen > 0 {
		x.seen = make([]seenID, 0, seen)
	}
	for range seen {
		x.seen = append(x.seen, newSeen(r.u64(), int64(r.u64())))
	}
	nres := r.count(18, e.cfg.MaxReservationsPerViewer)
	if nres > 0 {
		x.res = make([]reservation, 0, nres)
	}
	for range nres {
		res := reservation{id: r.u64(), expires: int64(r.u64())}
		nk := int(r.u16())
		if nk > e.cfg.MaxCapsPerCandidate || nk*8 > len(r.b) {
			return decodedState{}, 0, fmt.Errorf("%w: reservation of %d keys", ErrBadState, nk)
		}
		res.keys = make([]uint64, 0, nk)
		for range nk {
			res.keys = append(res.keys, r.u64())
		}
		x.res = append(x.res, res)
	}
	if flags&stateIdentity != 0 {
		id := &identity{viewer: r.str(e.cfg.MaxIDLength), linkAt: int64(r.u64())}
		nd := r.count(11, maxDevicesInState)
		for range nd {
			d := deviceLink{name: r.str(e.cfg.MaxIDLength), at: int64(r.u64()), gone: r.u8() != 0}
			if r.err == nil && (d.name == "" || !validTime(d.at)) {
				r.err = fmt.Errorf("%w: bad device link", ErrBadState)
			}
			id.devices = append(id.devices, d)
		}
		if r.err == nil && (id.linkAt < 0 || id.linkAt > fcap.MaxTime) {
			r.err = fmt.Errorf("%w: bad link time", ErrBadState)
		}
		slices.SortFunc(id.devices, func(a, b deviceLink) int { return strings.Compare(a.name, b.name) })
		for i := 1; r.err == nil && i < len(id.devices); i++ {
			if id.devices[i].name == id.devices[i-1].name {
				r.err = fmt.Errorf("%w: device listed twice", ErrBadState)
			}
		}
		if !id.empty() {
			x.id = id
		}
	}
	if flags&stateErased != 0 {
		x.erasedAt = int64(r.u64())
		if r.err == nil && (x.erasedAt <= 0 || x.erasedAt > fcap.MaxTime) {
			r.err = fmt.Errorf("%w: bad erasure time", ErrBadState)
		}
	}
	if flags&stateVoided != 0 {
		x.voids = e.decodeVoids(r)
	}
	if r.err != nil {
		return decodedState{}, 0, r.err
	}
	if x.wide || len(x.seen) > 0 || len(x.res) > 0 || x.id != nil || x.erasedAt != 0 || x.voids != nil {
		nv.ext = x
	}
	if err := e.checkState(&nv); err != nil {
		return decodedState{}, 0, err
	}
	slices.SortFunc(x.seen, cmpSeenIDs)
	return decodedState{key: key, v: nv}, len(data) - len(r.b), nil
}

// applyState replaces the viewer's state with a decoded one.
func (e *Engine) applyState(st *decodedState, merge bool) {
	if st.absent {
		if !merge {
			e.DeleteViewer(st.key)
		}
		// Merging, an absent state (the sender swept the viewer, or never
		// held it) leaves what this node holds.
		return
	}
	nv := &st.v
	s := e.stripeOf(st.key)
	s.mu.Lock()
	defer s.mu.Unlock()
	v := s.lookup(st.key)
	fresh := v == nil
	if fresh {
		v = s.add(st.key)
		e.viewers.Add(1)
		e.charge(s, 0, v.bytes())
	}
	before, keys := v.bytes(), v.nkeys()
	if fresh || !merge {
		v.base, v.arena, v.ext = nv.base, nv.arena, nv.ext
	} else {
		e.mergeViewer(v, nv)
	}
	e.settle(s, v, before, keys)
	if v.nkeys() == 0 && v.ext == nil {
		slot, _ := s.find(st.key)
		e.charge(s, v.bytes(), 0)
		s.remove(slot)
		e.viewers.Add(-1)
	}
}

// checkState verifies an imported viewer is one the engine could have
// built: counters sorted by hash, data laid out in header order, sizes
// and algorithms valid, timestamps ascending and in range.
func (e *Engine) checkState(v *viewer) error {
	bad := badState
	if len(v.arena) == 0 {
		return nil
	}
	k := v.nkeys()
	if k == 0 || k > e.cfg.MaxKeysPerViewer*(1+maxLaneRegions) || hdrPos(k) > len(v.arena) {
		return bad("%d counters in %d words", k, len(v.arena))
	}
	off := hdrPos(k)
	lanes := 0
	for i := range k {
		h := v.header(i)
		if h.lane {
			lanes++
		}
		if i > 0 && v.hashAt(i-1) >= h.hash {
			return bad("counters not sorted by hash")
		}
		if h.off != off {
			return bad("counter %d data at %d, want %d", i, h.off, off)
		}
		if h.window < 1 || h.window > fcap.MaxTime {
			return bad("counter %d window %d", i, h.window)
		}
		if h.algo >= fcap.NumAlgorithms {
			return bad("counter %d algorithm %d", i, h.algo)
		}
		size, err := v.checkCounter(i, &h)
		if err != nil {
			return err
		}
		if off+size > len(v.arena) {
			return bad("counter %d data past the end", i)
		}
		if KeepsTimes(h.algo) {
			prev := int64(-1)
			for j := range h.n {
				t := v.at(h.off, j)
				if t < prev || t < 0 || t > fcap.MaxTime {
					return bad("counter %d timestamps out of order or range", i)
				}
				prev = t
			}
		}
		off += size
	}
	if off != len(v.arena) {
		return bad("%d words of data, %d expected", len(v.arena)-hdrPos(k), off-hdrPos(k))
	}
	if k-lanes > e.cfg.MaxKeysPerViewer || lanes > e.cfg.MaxKeysPerViewer*maxLaneRegions {
		return bad("%d counters and %d lanes", k-lanes, lanes)
	}
	// The viewer's lane bit says what its headers say (lane.go).
	v.arena[0] = uint32(k)
	if lanes > 0 {
		v.arena[0] |= lanesBit
	}
	return nil
}

// DeleteViewer drops everything held for a viewer key (a partition this
// node no longer owns, or an "absent" import).
func (e *Engine) DeleteViewer(key uint64) {
	s := e.stripeOf(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	slot, v := s.find(key)
	if v == nil {
		return
	}
	s.keys -= v.nkeys()
	e.charge(s, v.bytes(), 0)
	s.remove(slot)
	e.viewers.Add(-1)
}

// Keys calls fn with the key of every viewer held, a stripe at a time
// (each stripe's keys are collected under its lock, fn runs outside it),
// until fn returns false.
func (e *Engine) Keys(fn func(key uint64) bool) {
	var keys []uint64
	for i := range e.stripes {
		var ok bool
		if keys, ok = e.stripes[i].visitKeys(keys, nil, fn); !ok {
			return
		}
	}
}

// visitKeys collects the stripe's keys (of the partitions want marks, a
// key's partition being key % len(want); all with want nil) into buf
// under its lock, then calls fn with each outside it. It returns buf for
// reuse, and false once fn does.
func (s *stripe) visitKeys(buf []uint64, want []bool, fn func(key uint64) bool) ([]uint64, bool) {
	P := uint64(len(want))
	buf = buf[:0]
	s.mu.Lock()
	for _, ch := range s.chunks {
		if ch == nil {
			continue // freed
		}
		for j := range ch {
			if k := ch[j].key; k != 0 && (want == nil || want[k%P]) {
				buf = append(buf, k)
			}
		}
	}
	s.mu.Unlock()
	for _, k := range buf {
		if !fn(k) {
			return buf, false
		}
	}
	return buf, true
}

// StateKey returns the viewer key of an exported state (Export's
// output) without decoding the rest, and false if data is not one.
func StateKey(data []byte) (uint64, bool) {
	if len(data) < 9 || data[0] < stateVersion || data[0] > stateVersionVoided {
		return 0, false
	}
	return binary.LittleEndian.Uint64(data[1:9]), true
}

// flagsFit reports whether a state's flags agree with its version: an
// erasure in version 2 or 3 only (2 requires one), void marks in version
// 3 only (3 requires them), neither in an absent state.
func flagsFit(version, flags byte) bool {
	erased, voided := flags&stateErased != 0, flags&stateVoided != 0
	if flags&stateAbsent != 0 {
		return !erased && !voided && version == stateVersion
	}
	switch version {
	case stateVersion:
		return !erased && !voided
	case stateVersionErased:
		return erased && !voided
	}
	return voided
}

// decodeVoids reads a state's void marks: at most MaxDedupePerViewer,
// each with valid times and at most MaxCapsPerCandidate keys, ids
// distinct.
func (e *Engine) decodeVoids(r *stateReader) *voidSet {
	n := r.count(26, e.cfg.MaxDedupePerViewer)
	if r.err != nil || n == 0 {
		if r.err == nil {
			r.err = fmt.Errorf("%w: void flag without marks", ErrBadState)
		}
		return nil
	}
	vs := &voidSet{marks: make([]voidMark, 0, n)}
	for range n {
		m := voidMark{id: r.u64(), at: int64(r.u64()), until: int64(r.u64())}
		nk := int(r.u16())
		if r.err == nil && (nk < 1 || nk > e.cfg.MaxCapsPerCandidate || nk*8 > len(r.b) || !validTime(m.at) || m.until < m.at || m.until-m.at > fcap.MaxTime) {
			r.err = fmt.Errorf("%w: bad void mark", ErrBadState)
		}
		if r.err != nil {
			return nil
		}
		m.keys = make([]uint64, nk)
		for i := range m.keys {
			m.keys[i] = r.u64()
		}
		vs.marks = append(vs.marks, m)
	}
	slices.SortFunc(vs.marks, func(a, b voidMark) int { return cmpMark(a, b.id) })
	for i := 1; i < len(vs.marks); i++ {
		if vs.marks[i].id == vs.marks[i-1].id {
			r.err = fmt.Errorf("%w: impression voided twice", ErrBadState)
			return nil
		}
	}
	return vs
}

// PartitionKeys calls fn with the key of every viewer held in the
// partitions want marks, a key's partition being key % len(want) (as
// ring.PartitionOf), until fn returns false. When the engine's stripes
// are laid out by that many partitions (Config.Partitions) it visits
// only their stripes; otherwise it walks every viewer (Keys).
func (e *Engine) PartitionKeys(want []bool, fn func(key uint64) bool) {
	P := uint64(len(want))
	if P == 0 {
		return
	}
	if e.parts != P {
		e.Keys(func(k uint64) bool { return !want[k%P] || fn(k) })
		return
	}
	var keys []uint64
	seen := make([]bool, len(e.stripes)) // fewer stripes than partitions share them
	for p, w := range want {
		if !w {
			continue
		}
		for _, i := range e.partitionStripes(uint64(p)) {
			if seen[i] {
				continue
			}
			seen[i] = true
			var ok bool
			if keys, ok = e.stripes[i].visitKeys(keys, want, fn); !ok {
				return
			}
		}
	}
}

// partitionStripes lists the stripes that hold partition p's viewers
// when the stripes are laid out by partition (stripeIndex): p + parts*j
// for j < spread, or p's one stripe, shared with other partitions, when
// there are fewer stripes than partitions.
func (e *Engine) partitionStripes(p uint64) []uint64 {
	if e.spread == 0 {
		return []uint64{p & e.mask}
	}
	out := make([]uint64, e.spread)
	for j := range out {
		out[j] = p + e.parts*uint64(j)
	}
	return out
}

// PartitionSizes counts the viewers held in each of parts partitions (a
// key's partition being key % parts): from the stripes' counts when they
// are laid out by that many partitions, by a walk otherwise.
func (e *Engine) PartitionSizes(parts int) []int {
	out := make([]int, max(parts, 0))
	if parts <= 0 {
		return out
	}
	P := uint64(parts)
	if e.parts == P && e.spread > 0 {
		for p := range out {
			for _, i := range e.partitionStripes(uint64(p)) {
				s := &e.stripes[i]
				s.mu.Lock()
				out[p] += s.count
				s.mu.Unlock()
			}
		}
		return out
	}
	e.Keys(func(k uint64) bool {
		out[k%P]++
		return true
	})
	return out
}

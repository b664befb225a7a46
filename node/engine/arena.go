package engine

import "github.com/fcap-io/fcap"

// A viewer keeps all its counters in one []uint32, the arena, so that a
// viewer costs one allocation and a counter holding five sliding-window
// timestamps costs 44 bytes:
//
//	arena[0]                number of counters k; the top bit (lanesBit)
//	                        is set while the viewer may hold lanes (lane.go)
//	arena[1 : 1+k*hdrWords] counter headers, sorted by key hash
//	arena[1+k*hdrWords : ]  counter data, in header order
//
// A header is hdrWords words:
//
//	[0] [1]  key hash, low and high halves
//	[2]      n (low 16 bits) | retention limit (high 16 bits)
//	[3]      offset of the counter's data in the arena; the top bit
//	         (laneFlag) marks a lane: another region's counter (lane.go)
//	[4] [5]  window, low and high halves; the top two bits of [5] hold
//	         the algorithm (windows are below 2^62)
//
// n counts timestamps for a Sliding counter and data words otherwise.
// A Sliding counter's data is its timestamps in ascending order, each one
// word (an offset from viewer.base) while the viewer is narrow, or two
// words (the full int64) once it is wide. A viewer turns wide only when
// its timestamps span 2^32 ticks or more (about 50 days of milliseconds).
// Fixed and Buckets data are described in fixed.go and buckets.go.

const (
	hdrWords = 6

	hHashLo = 0
	hHashHi = 1
	hMeta   = 2
	hOff    = 3
	hWinLo  = 4
	hWinHi  = 5

	narrowSpan = int64(1) << 32
)

// viewer is one viewer's state. It lives by value in a stripe's chunk and
// is guarded by the stripe's lock.
type viewer struct {
	key   uint64 // fcap.ViewerKey of the viewer id; 0 marks a free slot
	base  int64  // origin of narrow timestamps
	arena []uint32
	ext   *viewerExt // nil for the common viewer with no extras
}

// viewerExt holds what few viewers need, kept out of line so the common
// viewer stays small.
type viewerExt struct {
	wide bool          // timestamps are stored as two words
	seen []seenID      // remembered impression ids, sorted by hash
	res  []reservation // live (and not yet swept) reservations
	id   *identity     // device link and linked devices (identity.go)
	// erasedAt is when the viewer was last erased (erase.go), 0 if never
	// or forgotten.
	erasedAt int64
	voids    *voidSet // impressions voided (void.go), nil if none
}

type reservation struct {
	id      uint64
	expires int64    // stops counting at this time
	keys    []uint64 // key hashes it counts against
}

// header is a decoded counter header.
type header struct {
	hash   uint64
	n      int
	limit  int
	off    int
	window int64
	algo   fcap.Algorithm
	lane   bool // another region's counter (lane.go)
}

func (v *viewer) nkeys() int {
	if len(v.arena) == 0 {
		return 0
	}
	return int(v.arena[0] &^ lanesBit)
}

func (v *viewer) wide() bool { return v.ext != nil && v.ext.wide }

// width is the number of words of one sliding timestamp.
func (v *viewer) width() int {
	if v.wide() {
		return 2
	}
	return 1
}

func hdrPos(i int) int { return 1 + i*hdrWords }

func (v *viewer) hashAt(i int) uint64 {
	p := hdrPos(i)
	return uint64(v.arena[p+hHashHi])<<32 | uint64(v.arena[p+hHashLo])
}

func (v *viewer) header(i int) header {
	a := v.arena[hdrPos(i):]
	a = a[:hdrWords]
	return header{
		hash:   uint64(a[hHashHi])<<32 | uint64(a[hHashLo]),
		n:      int(a[hMeta] & 0xffff),
		limit:  int(a[hMeta] >> 16),
		off:    int(a[hOff] &^ laneFlag),
		window: int64(a[hWinHi]&(1<<30-1))<<32 | int64(a[hWinLo]),
		algo:   fcap.Algorithm(a[hWinHi] >> 30),
		lane:   a[hOff]&laneFlag != 0,
	}
}

func (v *viewer) setHeader(i int, h header) {
	a := v.arena[hdrPos(i):]
	a = a[:hdrWords]
	a[hHashLo] = uint32(h.hash)
	a[hHashHi] = uint32(h.hash >> 32)
	a[hMeta] = uint32(h.n) | uint32(h.limit)<<16
	a[hOff] = uint32(h.off)
	if h.lane {
		a[hOff] |= laneFlag
	}
	a[hWinLo] = uint32(h.window)
	a[hWinHi] = uint32(h.window>>32) | uint32(h.algo)<<30
}

// setN updates a counter's n in place.
func (v *viewer) setN(i, n int) {
	p := hdrPos(i) + hMeta
	v.arena[p] = v.arena[p]&0xffff0000 | uint32(n)
}

// dataWords is the size of counter h's data.
func (v *viewer) dataWords(h *header) int {
	if KeepsTimes(h.algo) {
		return h.n * v.width()
	}
	return h.n
}

// find returns the index of the counter with the given hash, or the index
// where it would be inserted and false. The search is branchless (the
// compiler turns the step into a conditional move): with random hashes
// every branch of a classic binary search would be a coin flip.
func (v *viewer) find(hash uint64) (int, bool) {
	n := v.nkeys()
	if n == 0 {
		return 0, false
	}
	base := 0
	for n > 1 {
		half := n >> 1
		if v.hashAt(base+half) <= hash {
			base += half
		}
		n -= half
	}
	h := v.hashAt(base)
	if h == hash {
		return base, true
	}
	if h < hash {
		base++
	}
	return base, false
}

// allocWords returns a zeroed slice of n words whose capacity fills the
// allocator's size class, so growth reuses the slack the allocator would
// waste anyway instead of doubling.
func allocWords(n int) []uint32 {
	return append([]uint32(nil), make([]uint32, n)...)
}

// splice replaces del words at position at with ins zero words, moving
// the tail. It reallocates only when the arena lacks capacity. It does
// not fix offsets; callers do.
func (v *viewer) splice(at, del, ins int) {
	a := v.arena
	n := len(a)
	newLen := n - del + ins
	if newLen > cap(a) {
		b := allocWords(newLen)
		copy(b, a[:at])
		copy(b[at+ins:], a[at+del:])
		v.arena = b
		return
	}
	if ins > del {
		a = a[:newLen]
	}
	copy(a[at+ins:], a[at+del:n])
	clear(a[at : at+ins])
	v.arena = a[:newLen]
}

// shiftOffsets adds d to the data offsets of counters from..k-1.
func (v *viewer) shiftOffsets(from, d int) {
	for j := from; j < v.nkeys(); j++ {
		p := hdrPos(j) + hOff
		v.arena[p] = uint32(int(v.arena[p]) + d)
	}
}

// insertKey adds a counter at index i (from find) with words zeroed data
// words, and returns its decoded header.
func (v *viewer) insertKey(i int, h header, words int) header {
	if len(v.arena) == 0 {
		v.arena = allocWords(1)
	}
	k := v.nkeys()
	// Where the new counter's data starts, before the header grows.
	var off int
	if i < k {
		off = v.header(i).off
	} else {
		off = len(v.arena)
	}
	// Data first (so header positions stay valid), then the header.
	v.splice(off, 0, words)
	v.shiftOffsets(i, words)
	v.splice(hdrPos(i), 0, hdrWords)
	v.arena[0] = v.arena[0]&lanesBit | uint32(k+1)
	v.shiftOffsets(0, hdrWords)
	h.off = off + hdrWords
	h.n = 0
	if !KeepsTimes(h.algo) {
		h.n = words
	}
	v.setHeader(i, h)
	return h
}

// removeKey deletes counter i and its data.
func (v *viewer) removeKey(i int) {
	h := v.header(i)
	words := v.dataWords(&h)
	v.splice(h.off, words, 0)
	v.shiftOffsets(i+1, -words)
	v.splice(hdrPos(i), hdrWords, 0)
	v.arena[0]--
	v.shiftOffsets(0, -hdrWords)
	if v.nkeys() == 0 {
		v.arena = nil
		if v.ext != nil {
			v.ext.wide = false
		}
	}
}

// get64 and put64 read and write a two-word int64.
func get64(a []uint32, p int) int64 { return int64(uint64(a[p+1])<<32 | uint64(a[p])) }

func put64(a []uint32, p int, x int64) {
	a[p] = uint32(x)
	a[p+1] = uint32(uint64(x) >> 32)
}

// compact reallocates the arena to its length when its capacity is well
// past it, returning memory after counters shrink.
func (v *viewer) compact() {
	if n := len(v.arena); cap(v.arena) > n+n/2+8 {
		b := allocWords(n)
		copy(b, v.arena)
		v.arena = b
	}
}

// bytes estimates the memory the viewer holds, for the memory limit.
func (v *viewer) bytes() int64 {
	b := int64(viewerSlotBytes) + int64(cap(v.arena))*4
	if x := v.ext; x != nil {
		b += extBytes + int64(cap(x.seen))*seenEntryBytes
		for i := range x.res {
			b += reservationBytes + int64(cap(x.res[i].keys))*8
		}
		if x.id != nil {
			b += x.id.bytes()
		}
		if x.voids != nil {
			b += x.voids.bytes()
		}
	}
	return b
}

// Estimated sizes, in bytes, for the memory accounting.
const (
	viewerSlotBytes  = 56 // the viewer struct in its chunk plus its table slot
	extBytes         = 80
	seenEntryBytes   = 12 // one seenID
	reservationBytes = 48
)

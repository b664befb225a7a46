package proto

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"time"
	"unsafe"

	"github.com/fcap-io/fcap"
)

// The engine's types as they travel inside messages. proto does not
// validate caps (the engine does, and answers fcap.ErrInvalid, which
// travels as CodeBadRequest); it only makes sure that decoding them
// cannot panic or allocate more than the body backs, and refuses to
// encode what the wire cannot carry: a string over MaxStringLen, a
// window that is not a whole number of milliseconds.

// cap: [scope str, id str, limit int, window int (milliseconds),
// algorithm uint8, mode uint8]
func (e *encoder) cap(c *fcap.Cap) {
	ms, whole := wireWindow(c)
	if len(c.Scope) > MaxStringLen || len(c.ID) > MaxStringLen || !whole { // tested inline: a Check encodes 100 caps
		e.strLimit(len(c.Scope))
		e.strLimit(len(c.ID))
		if !whole {
			e.fail(windowNotMillis(c))
		}
	}
	e.buf = appendCap(e.buf, c, ms)
}

// wireWindow returns c's window in milliseconds, as the wire carries it,
// and whether that is all of it.
func wireWindow(c *fcap.Cap) (ms int64, whole bool) {
	m := c.Window / time.Millisecond
	return int64(m), m*time.Millisecond == c.Window
}

// windowNotMillis is the error for a cap whose window the wire cannot
// carry.
func windowNotMillis(c *fcap.Cap) error {
	return fmt.Errorf("cap %q/%q: %w: %v is not a whole number of milliseconds", trim(c.Scope), trim(c.ID), fcap.ErrBadWindow, c.Window)
}

// appendCap appends c, its window ms milliseconds, in a slice the
// compiler keeps in registers, where the encoder's methods would load
// and store e.buf for every value. A cap in the form every client sends
// (capFastForm) takes appendCapFast; the rest goes value by value, the
// same bytes either way.
func appendCap(b []byte, c *fcap.Cap, ms int64) []byte {
	if capFastForm(c, ms) {
		return appendCapFast(b, c, ms)
	}
	return appendCapValues(b, c, ms)
}

// appendCapValues appends c value by value: every form.
func appendCapValues(b []byte, c *fcap.Cap, ms int64) []byte {
	b = appendArrayLen(b, 6)
	b = appendStr(b, c.Scope)
	b = appendStr(b, c.ID)
	b = appendInt(b, c.Limit)
	b = appendInt(b, ms)
	b = appendUint(b, uint64(c.Algorithm))
	return appendUint(b, uint64(c.Mode))
}

// capFastForm reports whether c, its window ms milliseconds, encodes in
// the form capFast decodes: scope and id of up to 31 bytes (fixstrs),
// limit and window in [0, 2^32), algorithm and mode positive fixints.
func capFastForm(c *fcap.Cap, ms int64) bool {
	return len(c.Scope) <= 31 && len(c.ID) <= 31 && uint64(c.Limit) <= math.MaxUint32 &&
		uint64(ms) <= math.MaxUint32 && c.Algorithm <= 0x7f && c.Mode <= 0x7f
}

// capFastRoom is the most bytes a cap in capFastForm takes besides its
// strings: the fixarray, two fixstr headers, limit and window as uint32,
// algorithm and mode.
const capFastRoom = 1 + 1 + 1 + 5 + 5 + 1 + 1

// appendCapFast appends a cap in capFastForm with one check of b's room,
// where the value-by-value path checks it for each of the eight values
// (BenchmarkCheckCPU/warm: the encoding is half of the client's CPU for a
// check).
func appendCapFast(b []byte, c *fcap.Cap, ms int64) []byte {
	n := len(b)
	b = slices.Grow(b, capFastRoom+len(c.Scope)+len(c.ID))
	d := b[n : n+capFastRoom+len(c.Scope)+len(c.ID)]
	d[0], d[1] = 0x96, 0xa0|byte(len(c.Scope))
	i := 2 + copy(d[2:], c.Scope)
	d[i] = 0xa0 | byte(len(c.ID))
	i += 1 + copy(d[i+1:], c.ID)
	i = putUint32Form(d, i, uint32(c.Limit))
	i = putUint32Form(d, i, uint32(ms))
	d[i], d[i+1] = byte(c.Algorithm), byte(c.Mode)
	return b[:n+i+2]
}

// putUint32Form writes v at d[i] in the shortest form (as appendUint)
// and returns the index after it; d has room for the longest.
func putUint32Form(d []byte, i int, v uint32) int {
	switch {
	case v <= 0x7f:
		d[i] = byte(v)
		return i + 1
	case v <= math.MaxUint8:
		d[i], d[i+1] = 0xcc, byte(v)
		return i + 2
	case v <= math.MaxUint16:
		d[i] = 0xcd
		binary.BigEndian.PutUint16(d[i+1:], uint16(v))
		return i + 3
	default:
		d[i] = 0xce
		binary.BigEndian.PutUint32(d[i+1:], v)
		return i + 5
	}
}

func (d *decoder) cap(c *fcap.Cap) {
	if d.err == nil && d.capFast(c) {
		return
	}
	d.capSlow(c)
}

// capSlow decodes a cap field by field: every form msgpack allows.
func (d *decoder) capSlow(c *fcap.Cap) {
	extra := d.array(6)
	c.Scope = d.str()
	c.ID = d.str()
	c.Limit = d.int()
	c.Window = fcap.Millis(d.int())
	c.Algorithm = fcap.Algorithm(d.uintN(0xFF))
	c.Mode = fcap.Mode(d.uintN(0xFF))
	d.end(extra)
}

// capFast decodes the cap at d.off if it has the form every client
// writes (appendCap) for ids of up to 31 bytes: a fixarray of six, two
// fixstrs, limit and window a positive fixint or a uint8, uint16 or
// uint32, algorithm and mode positive fixints. It reads the body once,
// with one bounds check per field, where the general path goes through
// a function per field. Any other form, well-formed or not, it leaves
// unread (false) for the general path, which decodes or rejects it
// exactly as before. A scope equal to the previous cap's takes that
// cap's string (d.scope).
func (d *decoder) capFast(c *fcap.Cap) bool {
	b := d.body[d.off:]
	if len(b) < minCapSize || b[0] != 0x96 {
		return false
	}
	i := 1
	n := int(b[i] - 0xa0) // fixstr: 0xa0 | length; other bytes wrap past 31
	if n > 31 || len(b) < i+1+n+1 {
		return false
	}
	scope := b[i+1 : i+1+n]
	i += 1 + n
	m := int(b[i] - 0xa0)
	if m > 31 || len(b) < i+1+m {
		return false
	}
	id := b[i+1 : i+1+m]
	i += 1 + m
	limit, i, ok := uintAt(b, i)
	if !ok {
		return false
	}
	window, i, ok := uintAt(b, i)
	if !ok || len(b) < i+2 || b[i] > 0x7f || b[i+1] > 0x7f {
		return false
	}
	switch {
	case n == 0:
		c.Scope = ""
	case string(scope) == d.scope:
		c.Scope = d.scope
	default:
		c.Scope = unsafe.String(&scope[0], n)
		d.scope = c.Scope
	}
	c.ID = ""
	if m > 0 {
		c.ID = unsafe.String(&id[0], m)
	}
	c.Limit, c.Window = limit, time.Duration(window)*time.Millisecond // under 2^32 ms: no overflow
	c.Algorithm, c.Mode = fcap.Algorithm(b[i]), fcap.Mode(b[i+1])
	d.off += i + 2
	return true
}

// uintAt reads, at b[i], a positive fixint or a uint8, uint16 or uint32,
// and returns it with the index after it; false for any other form or a
// value b does not hold whole.
func uintAt(b []byte, i int) (int64, int, bool) {
	if i >= len(b) {
		return 0, i, false
	}
	switch c := b[i]; {
	case c <= 0x7f:
		return int64(c), i + 1, true
	case c == 0xcc && i+2 <= len(b):
		return int64(b[i+1]), i + 2, true
	case c == 0xcd && i+3 <= len(b):
		return int64(binary.BigEndian.Uint16(b[i+1:])), i + 3, true
	case c == 0xce && i+5 <= len(b):
		return int64(binary.BigEndian.Uint32(b[i+1:])), i + 5, true
	}
	return 0, i, false
}

// caps: [cap...]
func (e *encoder) caps(caps []fcap.Cap, limit int) {
	e.list("caps", len(caps), limit)
	for i := range caps {
		e.cap(&caps[i])
	}
}

func (d *decoder) caps(dst []fcap.Cap, limit int) []fcap.Cap {
	dst = resize(dst, d.list("caps", limit, minCapSize))
	for i := range dst {
		d.cap(&dst[i])
	}
	return dst
}

// verdict, one on its own: [allowed bool, remaining int, blocking int]
func (e *encoder) verdict(v *fcap.Verdict) {
	e.array(3)
	e.bool(v.Allowed)
	e.int(v.Remaining)
	e.int(int64(v.Blocking))
}

func (d *decoder) verdict(v *fcap.Verdict) {
	extra := d.array(3)
	v.Allowed = d.bool()
	v.Remaining = d.int()
	v.Blocking = int(d.int())
	d.end(extra)
}

// The packed form of a CheckResult's verdicts: one bin of 4 bytes each,
//
//	[0:2] remaining, uint16 little-endian, clamped to [0, 65535]
//	[2]   blocking+1, low 8 bits (0: no cap blocks)
//	[3]   flags: bit 0 allowed; bit 1 bit 8 of blocking+1
//
// fcap.MaxLimit is 65535, so the clamp loses nothing the engine can
// say. A candidate may have up to 256 caps (engine.Config allows
// MaxCapsPerCandidate 256), so blocking+1 reaches 256 and needs the 9th
// bit that flags bit 1 carries: blocking is at most 510 on the wire. A
// reader ignores the flag bits it does not know.
const (
	verdictSize   = 4
	flagAllowed   = 1 << 0
	flagBlocking8 = 1 << 1
	maxBlocking   = 1<<9 - 2
)

func (e *encoder) verdicts(vs []fcap.Verdict) {
	if len(vs) > MaxCandidates {
		e.fail(errTooMany("verdicts", len(vs), MaxCandidates))
	}
	e.binHeader(verdictSize * len(vs))
	b := e.buf
	for i := range vs {
		v := &vs[i]
		rem := uint16(min(max(v.Remaining, 0), 0xFFFF))
		if v.Blocking < -1 || v.Blocking > maxBlocking {
			e.fail(fmt.Errorf("verdict %d: blocking cap %d outside [-1, %d]", i, v.Blocking, maxBlocking))
		}
		blocking := uint(v.Blocking + 1)
		flags := byte(blocking>>8&1) << 1
		if v.Allowed {
			flags |= flagAllowed
		}
		b = append(b, byte(rem), byte(rem>>8), byte(blocking), flags)
	}
	e.buf = b
}

func (d *decoder) verdicts(dst []fcap.Verdict) []fcap.Verdict {
	b := d.bytes(verdictSize * MaxCandidates)
	if len(b)%verdictSize != 0 {
		d.fail(fmt.Errorf("verdicts: bin of %d bytes is not a list of %d-byte verdicts", len(b), verdictSize))
		return dst[:0]
	}
	dst = resize(dst, len(b)/verdictSize)
	for i := range dst {
		p := b[verdictSize*i : verdictSize*i+verdictSize]
		flags := p[3]
		dst[i] = fcap.Verdict{
			Allowed:   flags&flagAllowed != 0,
			Remaining: int64(p[0]) | int64(p[1])<<8,
			Blocking:  (int(p[2]) | int(flags&flagBlocking8)<<7) - 1,
		}
	}
	return dst
}

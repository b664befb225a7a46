package proto

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"
	"time"
	"unsafe"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// The smallest encodings of the list elements, in bytes: a list of n
// elements needs at least n times as many bytes of body, so a length is
// checked against the rest of the body before anything is allocated for
// it.
const (
	minCapSize        = 7 // fixarray, 2 fixstr, 4 fixint
	minMemberSize     = 6 // fixarray, 3 fixstr, 2 fixint
	minRecordItemSize = 6 // fixarray, 2 fixstr, nil, fixarray, fixint
	minItemResultSize = 3 // fixarray, 2 fixint
)

// errTruncated reports a length that runs past the end of the body.
var errTruncated = fmt.Errorf("truncated body: %w", io.ErrUnexpectedEOF)

// encoder appends the msgpack encoding of a message to buf. err holds
// the first limit a message broke: the encode methods run to the end and
// AppendFrame reports it.
//
// Every form is appended here directly (the append functions below), in
// the forms msgpack's Encoder chooses for the same value (shortest
// integer, fixstr/str8/str16/str32, fixarray/array16/array32, ...):
// TestEncoderForms holds each to the Encoder's bytes at every boundary
// between two forms, and TestWireForm checks whole messages against
// msgpack's own generic decoding. A Check is mostly small forms (a cap
// is about 30 bytes in 8 values), and writing them into a slice held in
// registers costs a fraction of a call through an io.Writer per value.
// The decoder mirrors it.
type encoder struct {
	buf []byte
	err error
}

var encoders = sync.Pool{New: func() any { return new(encoder) }}

// fail records the first encoding error.
func (e *encoder) fail(err error) {
	if e.err == nil {
		e.err = err
	}
}

// array writes the header of a positional array of n fields.
func (e *encoder) array(n int) { e.buf = appendArrayLen(e.buf, n) }

// list writes the header of a list of n elements, refusing more than
// limit.
func (e *encoder) list(what string, n, limit int) {
	if n > limit {
		e.fail(errTooMany(what, n, limit))
	}
	e.array(n)
}

func (e *encoder) str(s string) {
	e.strLimit(len(s))
	e.buf = appendStr(e.buf, s)
}

// strLimit refuses a string of n bytes over MaxStringLen.
func (e *encoder) strLimit(n int) {
	if n > MaxStringLen {
		e.fail(fmt.Errorf("string of %d bytes, limit %d", n, MaxStringLen))
	}
}

func (e *encoder) int(v int64) { e.buf = appendInt(e.buf, v) }

func (e *encoder) uint(v uint64) { e.buf = appendUint(e.buf, v) }

func (e *encoder) bool(v bool) {
	if v {
		e.buf = append(e.buf, msgpcode.True)
		return
	}
	e.buf = append(e.buf, msgpcode.False)
}

// time writes t, or nil when the sender leaves the time to the node.
func (e *encoder) time(t int64, ok bool) {
	if !ok {
		e.buf = append(e.buf, msgpcode.Nil)
		return
	}
	e.int(t)
}

// budget writes a request's budget in whole microseconds, rounded up so
// that a positive budget never travels as 0 (none), and clamped to
// MaxBudget; 0 or less is written as 0.
func (e *encoder) budget(b time.Duration) {
	if b <= 0 {
		e.uint(0)
		return
	}
	us := (min(b, MaxBudget) + time.Microsecond - 1) / time.Microsecond
	e.uint(uint64(us))
}

// binHeader writes the header of a bin of n bytes; the caller appends
// them to buf.
func (e *encoder) binHeader(n int) {
	switch {
	case n <= math.MaxUint8:
		e.buf = append(e.buf, msgpcode.Bin8, byte(n))
	case n <= math.MaxUint16:
		e.buf = binary.BigEndian.AppendUint16(append(e.buf, msgpcode.Bin16), uint16(n))
	default:
		e.buf = binary.BigEndian.AppendUint32(append(e.buf, msgpcode.Bin32), uint32(n))
	}
}

// uint16s writes a bin of vs, 2 bytes each, little-endian.
func (e *encoder) uint16s(vs []uint16) {
	e.binHeader(2 * len(vs))
	b := e.buf
	for _, v := range vs {
		b = append(b, byte(v), byte(v>>8))
	}
	e.buf = b
}

// uint32s writes a bin of vs, 4 bytes each, little-endian.
func (e *encoder) uint32s(vs []uint32) {
	e.binHeader(4 * len(vs))
	b := e.buf
	for _, v := range vs {
		b = append(b, byte(v), byte(v>>8), byte(v>>16), byte(v>>24))
	}
	e.buf = b
}

// appendArrayLen appends the header of an array of n elements.
func appendArrayLen(b []byte, n int) []byte {
	switch {
	case n <= int(msgpcode.FixedArrayMask):
		return append(b, msgpcode.FixedArrayLow|byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, msgpcode.Array16), uint16(n))
	default:
		return binary.BigEndian.AppendUint32(append(b, msgpcode.Array32), uint32(n))
	}
}

// appendStr appends s as a msgpack str. The caller checks its length
// against MaxStringLen.
func appendStr(b []byte, s string) []byte {
	switch n := len(s); {
	case n <= int(msgpcode.FixedStrMask):
		b = append(b, msgpcode.FixedStrLow|byte(n))
	case n <= math.MaxUint8:
		b = append(b, msgpcode.Str8, byte(n))
	case n <= math.MaxUint16:
		b = binary.BigEndian.AppendUint16(append(b, msgpcode.Str16), uint16(n))
	default:
		b = binary.BigEndian.AppendUint32(append(b, msgpcode.Str32), uint32(n))
	}
	return append(b, s...)
}

// appendInt appends v in the shortest form, as msgpack.Encoder.EncodeInt
// does.
func appendInt(b []byte, v int64) []byte {
	if v >= 0 {
		return appendUint(b, uint64(v))
	}
	return appendNegative(b, v)
}

func appendNegative(b []byte, v int64) []byte {
	switch {
	case v >= int64(int8(msgpcode.NegFixedNumLow)):
		return append(b, byte(v))
	case v >= math.MinInt8:
		return append(b, msgpcode.Int8, byte(v))
	case v >= math.MinInt16:
		return binary.BigEndian.AppendUint16(append(b, msgpcode.Int16), uint16(v))
	case v >= math.MinInt32:
		return binary.BigEndian.AppendUint32(append(b, msgpcode.Int32), uint32(v))
	default:
		return binary.BigEndian.AppendUint64(append(b, msgpcode.Int64), uint64(v))
	}
}

// appendUint appends v in the shortest form, as msgpack.Encoder.EncodeUint
// does.
func appendUint(b []byte, v uint64) []byte {
	switch {
	case v <= uint64(msgpcode.PosFixedNumHigh):
		return append(b, byte(v))
	case v <= math.MaxUint8:
		return append(b, msgpcode.Uint8, byte(v))
	case v <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, msgpcode.Uint16), uint16(v))
	case v <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(b, msgpcode.Uint32), uint32(v))
	default:
		return binary.BigEndian.AppendUint64(append(b, msgpcode.Uint64), v)
	}
}

// decoder reads one message from body. It is the io.Reader and
// io.ByteScanner under its msgpack.Decoder, so the Decoder does no
// buffering of its own and off is always where the next value starts:
// strings and bins are taken straight from body at off, without a copy.
//
// Like encoder, it keeps the first error: once err is set every method
// returns zero values without reading, so decode methods read as a plain
// sequence of fields and Decode reports the error at the end.
type decoder struct {
	body []byte
	off  int
	dec  *msgpack.Decoder
	err  error
	// scope is the scope of the cap decoded last (capFast): the next
	// cap naming the same scope shares its string, so checks of it
	// downstream (the known scopes, its hash) compare a pointer.
	scope string
}

var decoders = sync.Pool{New: func() any {
	d := new(decoder)
	d.dec = msgpack.NewDecoder(d)
	return d
}}

// Read implements io.Reader for the msgpack.Decoder.
func (d *decoder) Read(p []byte) (int, error) {
	if d.off >= len(d.body) {
		return 0, io.EOF
	}
	n := copy(p, d.body[d.off:])
	d.off += n
	return n, nil
}

// ReadByte implements io.ByteReader for the msgpack.Decoder.
func (d *decoder) ReadByte() (byte, error) {
	if d.off >= len(d.body) {
		return 0, io.EOF
	}
	c := d.body[d.off]
	d.off++
	return c, nil
}

// UnreadByte implements io.ByteScanner for the msgpack.Decoder.
func (d *decoder) UnreadByte() error {
	if d.off == 0 {
		return errors.New("proto: UnreadByte at the start of the body")
	}
	d.off--
	return nil
}

func (d *decoder) remaining() int { return len(d.body) - d.off }

// fixed returns the next byte if it is between lo and hi (a one-byte
// form the encoder writes directly), consuming it.
func (d *decoder) fixed(lo, hi byte) (byte, bool) {
	if d.off < len(d.body) {
		if c := d.body[d.off]; c >= lo && c <= hi {
			d.off++
			return c, true
		}
	}
	return 0, false
}

// arrayLen reads an array header: -1 for nil.
func (d *decoder) arrayLen() (int, error) {
	if c, ok := d.fixed(msgpcode.FixedArrayLow, msgpcode.FixedArrayHigh); ok {
		return int(c & msgpcode.FixedArrayMask), nil
	}
	return d.dec.DecodeArrayLen()
}

// fail records the first decoding error.
func (d *decoder) fail(err error) {
	if d.err == nil {
		d.err = err
	}
}

// array reads the header of a positional array of want fields and
// returns how many elements follow them. A sender of a later version may
// append fields; the reader skips them (with end) for forward
// compatibility. Fewer fields than want, or nil, is an error.
func (d *decoder) array(want int) (extra int) {
	if d.err != nil {
		return 0
	}
	n, err := d.arrayLen()
	switch {
	case err != nil:
		d.fail(err)
	case n < want:
		d.fail(fmt.Errorf("array of %d fields, want %d", n, want))
	case n > d.remaining():
		d.fail(errTruncated)
	default:
		return n - want
	}
	return 0
}

// end skips the extra trailing fields of an array (see array).
func (d *decoder) end(extra int) {
	if extra > 0 {
		d.skip(extra)
	}
}

// list reads the header of a list of elements at least minSize bytes
// each. nil is an empty list. More than limit elements is an error, and
// so is a length the rest of the body cannot hold.
func (d *decoder) list(what string, limit, minSize int) int {
	if d.err != nil {
		return 0
	}
	n, err := d.arrayLen()
	switch {
	case err != nil:
		d.fail(err)
	case n > limit:
		d.fail(errTooMany(what, n, limit))
	case n > d.remaining()/minSize:
		d.fail(fmt.Errorf("%s: %w", what, errTruncated))
	case n > 0:
		return n
	}
	return 0
}

// bytes reads a str or bin (nil is empty) of at most limit bytes and
// returns it as a slice of body.
func (d *decoder) bytes(limit int) []byte {
	if d.err != nil {
		return nil
	}
	var n int
	var err error
	if c, ok := d.fixed(msgpcode.FixedStrLow, msgpcode.FixedStrHigh); ok {
		n = int(c & msgpcode.FixedStrMask)
	} else if n, ok = d.sizedLen(); !ok {
		n, err = d.dec.DecodeBytesLen()
	}
	switch {
	case err != nil:
		d.fail(err)
	case n > limit:
		d.fail(fmt.Errorf("%d bytes, limit %d", n, limit))
	case n > d.remaining():
		d.fail(errTruncated)
	case n > 0:
		b := d.body[d.off : d.off+n : d.off+n]
		d.off += n
		return b
	}
	return nil
}

// sizedLen reads the length of a str or bin in its 2-, 3- or 5-byte
// header form straight from the body (a CheckResult's verdicts are a
// bin8 or bin16), leaving nil, truncated headers and other forms to the
// library path and its errors.
func (d *decoder) sizedLen() (int, bool) {
	if d.off >= len(d.body) {
		return 0, false
	}
	b := d.body[d.off:]
	switch c := b[0]; {
	case (c == msgpcode.Bin8 || c == msgpcode.Str8) && len(b) >= 2:
		d.off += 2
		return int(b[1]), true
	case (c == msgpcode.Bin16 || c == msgpcode.Str16) && len(b) >= 3:
		d.off += 3
		return int(binary.BigEndian.Uint16(b[1:])), true
	case (c == msgpcode.Bin32 || c == msgpcode.Str32) && len(b) >= 5:
		d.off += 5
		return int(binary.BigEndian.Uint32(b[1:])), true
	}
	return 0, false
}

// str reads a string of at most MaxStringLen bytes. The string aliases
// body: no copy is made.
func (d *decoder) str() string {
	b := d.bytes(MaxStringLen)
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// int reads an integer that fits an int64: a uint64 past MaxInt64 is an
// error, not a negative number.
func (d *decoder) int() int64 {
	if d.err != nil {
		return 0
	}
	if c, ok := d.fixed(0, msgpcode.PosFixedNumHigh); ok {
		return int64(c)
	}
	if v, ok := d.fixedWidthInt(); ok {
		return v
	}
	if d.off < len(d.body) && d.body[d.off] == msgpcode.Uint64 {
		v, err := d.dec.DecodeUint64()
		if err == nil && v > math.MaxInt64 {
			err = fmt.Errorf("%d overflows int64", v)
		}
		d.fail(err)
		return int64(v)
	}
	v, err := d.dec.DecodeInt64()
	d.fail(err)
	return v
}

// uint reads a non-negative integer: a negative one is an error, not a
// large number.
func (d *decoder) uint() uint64 {
	if d.err != nil {
		return 0
	}
	if c, ok := d.fixed(0, msgpcode.PosFixedNumHigh); ok {
		return uint64(c)
	}
	if d.off < len(d.body) && isSigned(d.body[d.off]) {
		v := d.int()
		if v < 0 {
			d.fail(fmt.Errorf("%d for an unsigned integer", v))
			return 0
		}
		return uint64(v)
	}
	v, err := d.dec.DecodeUint64()
	d.fail(err)
	return v
}

// fixedWidthInt reads the 2-, 3-, 5- and 9-byte integer forms straight
// from the body (caps' limits and windows are mostly these), leaving
// uint64s past MaxInt64, truncated bodies and other forms to the library
// path and its errors.
func (d *decoder) fixedWidthInt() (int64, bool) {
	if d.off >= len(d.body) {
		return 0, false
	}
	b := d.body[d.off:]
	switch c := b[0]; {
	case c == msgpcode.Uint8 && len(b) >= 2:
		d.off += 2
		return int64(b[1]), true
	case c == msgpcode.Uint16 && len(b) >= 3:
		d.off += 3
		return int64(binary.BigEndian.Uint16(b[1:])), true
	case c == msgpcode.Uint32 && len(b) >= 5:
		d.off += 5
		return int64(binary.BigEndian.Uint32(b[1:])), true
	case c == msgpcode.Uint64 && len(b) >= 9:
		if v := binary.BigEndian.Uint64(b[1:]); v <= math.MaxInt64 {
			d.off += 9
			return int64(v), true
		}
	case c == msgpcode.Int8 && len(b) >= 2:
		d.off += 2
		return int64(int8(b[1])), true
	case c == msgpcode.Int16 && len(b) >= 3:
		d.off += 3
		return int64(int16(binary.BigEndian.Uint16(b[1:]))), true
	case c == msgpcode.Int32 && len(b) >= 5:
		d.off += 5
		return int64(int32(binary.BigEndian.Uint32(b[1:]))), true
	case c == msgpcode.Int64 && len(b) >= 9:
		d.off += 9
		return int64(binary.BigEndian.Uint64(b[1:])), true
	}
	return 0, false
}

// isSigned reports whether c starts a signed msgpack integer (which may
// be negative).
func isSigned(c byte) bool {
	return c >= msgpcode.NegFixedNumLow || c == msgpcode.Int8 || c == msgpcode.Int16 || c == msgpcode.Int32 || c == msgpcode.Int64
}

// uintN reads an unsigned integer of at most max.
func (d *decoder) uintN(max uint64) uint64 {
	v := d.uint()
	if v > max {
		d.fail(fmt.Errorf("%d out of range [0, %d]", v, max))
		return 0
	}
	return v
}

func (d *decoder) bool() bool {
	if d.err != nil {
		return false
	}
	if c, ok := d.fixed(msgpcode.False, msgpcode.True); ok {
		return c == msgpcode.True
	}
	v, err := d.dec.DecodeBool()
	d.fail(err)
	return v
}

// time reads a time that may be nil (omitted: the node's clock).
func (d *decoder) time() (t int64, ok bool) {
	if d.err != nil {
		return 0, false
	}
	if d.off < len(d.body) && d.body[d.off] == msgpcode.Nil {
		d.off++
		return 0, false
	}
	return d.int(), d.err == nil
}

// budget reads an optional trailing budget field, if extra says the
// array has one more field, and returns it with the fields left to skip.
// A budget over MaxBudget is an error.
func (d *decoder) budget(extra int) (time.Duration, int) {
	if extra <= 0 {
		return 0, extra
	}
	us := d.uintN(uint64(MaxBudget / time.Microsecond))
	return time.Duration(us) * time.Microsecond, extra - 1
}

// uint16s reads a bin of little-endian uint16s into dst[:0], at most
// limit of them.
func (d *decoder) uint16s(dst []uint16, limit int) []uint16 {
	b := d.bytes(2 * limit)
	if len(b)%2 != 0 {
		d.fail(fmt.Errorf("bin of %d bytes is not a list of uint16", len(b)))
		return dst[:0]
	}
	dst = resize(dst, len(b)/2)
	for i := range dst {
		dst[i] = uint16(b[2*i]) | uint16(b[2*i+1])<<8
	}
	return dst
}

// uint32s reads a bin of little-endian uint32s into dst[:0], at most
// limit of them.
func (d *decoder) uint32s(dst []uint32, limit int) []uint32 {
	b := d.bytes(4 * limit)
	if len(b)%4 != 0 {
		d.fail(fmt.Errorf("bin of %d bytes is not a list of uint32", len(b)))
		return dst[:0]
	}
	dst = resize(dst, len(b)/4)
	for i := range dst {
		dst[i] = uint32(b[4*i]) | uint32(b[4*i+1])<<8 | uint32(b[4*i+2])<<16 | uint32(b[4*i+3])<<24
	}
	return dst
}

// resize returns s with length n, reusing its storage when it can.
// Elements past the old length but within the capacity keep what they
// held, so a reused element's own slices are reused too.
func resize[T any](s []T, n int) []T {
	if n <= cap(s) {
		return s[:n]
	}
	grown := make([]T, n)
	copy(grown, s[:cap(s)])
	return grown
}

// errTooMany reports a list over its limit.
func errTooMany(what string, n, limit int) error {
	return fmt.Errorf("%s: %d elements, limit %d", what, n, limit)
}

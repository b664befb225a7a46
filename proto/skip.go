package proto

import (
	"fmt"

	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// skip skips n values. It does not use msgpack.Decoder.Skip, which
// recurses into nested arrays (a body of nested one-element arrays would
// recurse once per byte) and reads what it skips into a buffer it grows
// to the length the value claims, up to 1 MiB however short the body.
// This walks the bytes instead: pending counts the values still to skip,
// each of which takes at least one byte, so neither a nesting depth nor a
// claimed length can cost more than the body holds.
func (d *decoder) skip(n int) {
	pending := n
	for pending > 0 && d.err == nil {
		if pending > d.remaining() {
			d.fail(errTruncated)
			return
		}
		c := d.body[d.off]
		d.off++
		pending--
		var size, elems int // bytes of payload to pass over, values to add
		switch {
		case msgpcode.IsFixedNum(c), c == msgpcode.Nil, c == msgpcode.False, c == msgpcode.True:
		case msgpcode.IsFixedMap(c):
			elems = 2 * int(c&msgpcode.FixedMapMask)
		case msgpcode.IsFixedArray(c):
			elems = int(c & msgpcode.FixedArrayMask)
		case msgpcode.IsFixedString(c):
			size = int(c & msgpcode.FixedStrMask)
		case c == msgpcode.Uint8, c == msgpcode.Int8:
			size = 1
		case c == msgpcode.Uint16, c == msgpcode.Int16, c == msgpcode.FixExt1:
			size = 2
		case c == msgpcode.FixExt2:
			size = 3
		case c == msgpcode.Uint32, c == msgpcode.Int32, c == msgpcode.Float:
			size = 4
		case c == msgpcode.FixExt4:
			size = 5
		case c == msgpcode.Uint64, c == msgpcode.Int64, c == msgpcode.Double:
			size = 8
		case c == msgpcode.FixExt8:
			size = 9
		case c == msgpcode.FixExt16:
			size = 17
		case c == msgpcode.Str8, c == msgpcode.Bin8:
			size = d.length(1)
		case c == msgpcode.Str16, c == msgpcode.Bin16:
			size = d.length(2)
		case c == msgpcode.Str32, c == msgpcode.Bin32:
			size = d.length(4)
		case c == msgpcode.Ext8:
			size = d.length(1) + 1 // the ext type byte
		case c == msgpcode.Ext16:
			size = d.length(2) + 1
		case c == msgpcode.Ext32:
			size = d.length(4) + 1
		case c == msgpcode.Array16:
			elems = d.length(2)
		case c == msgpcode.Array32:
			elems = d.length(4)
		case c == msgpcode.Map16:
			elems = 2 * d.length(2)
		case c == msgpcode.Map32:
			elems = 2 * d.length(4)
		default:
			d.fail(fmt.Errorf("invalid msgpack code %#x", c))
			return
		}
		if size > d.remaining() || elems > d.remaining() {
			d.fail(errTruncated)
			return
		}
		d.off += size
		pending += elems
	}
}

// length reads a big-endian length of w bytes (1, 2 or 4). A length
// longer than the rest of the body is an error (and 0), so no caller
// works with a length the body cannot back.
func (d *decoder) length(w int) int {
	if w > d.remaining() {
		d.fail(errTruncated)
		return 0
	}
	var n uint64
	for _, c := range d.body[d.off : d.off+w] {
		n = n<<8 | uint64(c)
	}
	d.off += w
	if n > uint64(d.remaining()) {
		d.fail(errTruncated)
		return 0
	}
	return int(n)
}

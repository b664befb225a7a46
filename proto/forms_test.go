package proto

import (
	"bytes"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/fcap-io/fcap"
)

// TestEncoderForms holds the forms the encoder writes (integers, bools,
// nil, strs, array and bin headers, a cap) to the bytes msgpack's
// Encoder writes for the same value, at every boundary between two
// forms: the wire stays what it was when these went through the Encoder.
func TestEncoderForms(t *testing.T) {
	ints := []int64{0, 1, 127, 128, 255, 256, 65535, 65536, math.MaxUint32, math.MaxUint32 + 1, math.MaxInt64,
		-1, -32, -33, -128, -129, -32768, -32769, math.MinInt32, math.MinInt32 - 1, math.MinInt64}
	uints := []uint64{0, 127, 128, 255, 256, 65535, 65536, math.MaxUint32, math.MaxUint32 + 1, math.MaxUint64}
	bins := []int{0, 1, 255, 256, 65535, 65536}
	type form struct {
		name string
		ours func(e *encoder)
		want func(e *msgpack.Encoder)
	}
	cases := []form{
		{"true", func(e *encoder) { e.bool(true) }, func(e *msgpack.Encoder) { e.EncodeBool(true) }},
		{"false", func(e *encoder) { e.bool(false) }, func(e *msgpack.Encoder) { e.EncodeBool(false) }},
		{"nil", func(e *encoder) { e.time(5, false) }, func(e *msgpack.Encoder) { e.EncodeNil() }},
	}
	for _, v := range ints {
		cases = append(cases, form{fmt.Sprint("int ", v), func(e *encoder) { e.int(v) }, func(e *msgpack.Encoder) { e.EncodeInt(v) }})
	}
	for _, v := range uints {
		cases = append(cases, form{fmt.Sprint("uint ", v), func(e *encoder) { e.uint(v) }, func(e *msgpack.Encoder) { e.EncodeUint(v) }})
	}
	for _, n := range bins {
		cases = append(cases, form{fmt.Sprint("bin of ", n), func(e *encoder) { e.binHeader(n) }, func(e *msgpack.Encoder) { e.EncodeBytesLen(n) }})
	}
	for _, n := range []int{0, 1, 31, 32, 255, 256, 65535, 65536} {
		s := strings.Repeat("s", n)
		cases = append(cases, form{fmt.Sprint("str of ", n), func(e *encoder) { e.str(s) }, func(e *msgpack.Encoder) { e.EncodeString(s) }})
	}
	for _, n := range []int{0, 1, 15, 16, 65535, 65536} {
		cases = append(cases, form{fmt.Sprint("array of ", n), func(e *encoder) { e.array(n) }, func(e *msgpack.Encoder) { e.EncodeArrayLen(n) }})
	}
	caps := []fcap.Cap{
		{Scope: "campaign", ID: "campaign-42", Limit: 5, Window: 24 * time.Hour},
		{Scope: strings.Repeat("s", 40), ID: strings.Repeat("i", 300), Limit: fcap.MaxLimit, Window: fcap.Millis(fcap.MaxTime), Algorithm: fcap.Fixed, Mode: fcap.Strict},
		{Limit: -1, Window: fcap.Millis(math.MinInt64), Algorithm: 200, Mode: 255}, // not valid caps, but encoded as they are
	}
	// A window crosses as the integer of its milliseconds, in every form
	// (the wire of when Window was milliseconds).
	for _, ms := range append(ints, fcap.MaxWindow.Milliseconds(), math.MaxInt64/1_000_000) {
		if ms > math.MaxInt64/1_000_000 || ms < -math.MaxInt64/1_000_000 {
			continue
		}
		caps = append(caps, fcap.Cap{Scope: "campaign", ID: "c", Limit: 5, Window: time.Duration(ms) * time.Millisecond})
	}
	for _, c := range caps {
		cases = append(cases, form{fmt.Sprintf("cap %.20v %v", c, c.Window), func(e *encoder) { e.cap(&c) }, func(e *msgpack.Encoder) {
			e.EncodeArrayLen(6)
			e.EncodeString(c.Scope)
			e.EncodeString(c.ID)
			e.EncodeInt(c.Limit)
			e.EncodeInt(c.WindowMillis())
			e.EncodeUint(uint64(c.Algorithm))
			e.EncodeUint(uint64(c.Mode))
		}})
	}
	for _, c := range cases {
		var ours encoder
		c.ours(&ours)
		var want bytes.Buffer
		c.want(msgpack.NewEncoder(&want))
		if !bytes.Equal(ours.buf, want.Bytes()) {
			t.Errorf("%s: encoder writes % x, msgpack % x", c.name, ours.buf, want.Bytes())
		}
	}
}

// TestSizedLen reads strs and bins in every header form the decoder
// reads itself, and a header cut short, which must fail as truncated.
func TestSizedLen(t *testing.T) {
	for _, n := range []int{0, 31, 32, 255, 256, 65535, 65536} {
		for _, str := range []bool{false, true} {
			var buf bytes.Buffer
			e := msgpack.NewEncoder(&buf)
			payload := bytes.Repeat([]byte{'x'}, n)
			if str {
				e.EncodeString(string(payload))
			} else {
				e.EncodeBytes(payload)
			}
			body := buf.Bytes()
			d := decoder{body: body}
			d.dec = msgpack.NewDecoder(&d)
			if got := d.bytes(1 << 20); d.err != nil || !bytes.Equal(got, payload) || d.off != len(body) {
				t.Errorf("str %v of %d bytes: read %d bytes to offset %d of %d, err %v", str, n, len(got), d.off, len(body), d.err)
			}
			if n < 256 {
				continue
			}
			cut := decoder{body: body[:2]} // the header's length is cut short
			cut.dec = msgpack.NewDecoder(&cut)
			if cut.bytes(1<<20) != nil || cut.err == nil {
				t.Errorf("str %v of %d bytes: a cut header read without error", str, n)
			}
		}
	}
}

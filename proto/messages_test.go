package proto

import (
	"bytes"
	"errors"
	"io"
	"math"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/vmihailenco/msgpack/v5"
)

// frameOf encodes m and splits the frame into its header and body.
func frameOf(t testing.TB, id uint64, m Message) (Header, []byte) {
	t.Helper()
	frame, err := AppendFrame(nil, id, m)
	if err != nil {
		t.Fatalf("AppendFrame(%T): %v", m, err)
	}
	h, body, err := NewReader(bytes.NewReader(frame), 0).Next()
	if err != nil {
		t.Fatalf("reading back the frame of %T: %v", m, err)
	}
	return h, body
}

func TestRoundTrip(t *testing.T) {
	for i, c := range testCases() {
		t.Run(c.name, func(t *testing.T) {
			id := uint64(i) * 0x0101010101010101
			h, body := frameOf(t, id, c.msg)
			if h != (Header{Version: Version, Type: c.msg.Type(), ID: id}) {
				t.Fatalf("header %+v, want version %d type %v id %d", h, Version, c.msg.Type(), id)
			}
			got := NewMessage(h.Type)
			if reflect.TypeOf(got) != reflect.TypeOf(c.msg) {
				t.Fatalf("NewMessage(%v) is %T, want %T", h.Type, got, c.msg)
			}
			if err := Decode(body, got); err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if !sameValue(got, c.expected()) {
				t.Fatalf("decoded\n%+v\nwant\n%+v", got, c.expected())
			}
		})
	}
}

// TestDecodeReused decodes every case into one message per type that has
// already decoded all the others of its type, larger and smaller: what
// an earlier message left behind must not show through.
func TestDecodeReused(t *testing.T) {
	cases := testCases()
	reused := map[Type]Message{}
	for round := range 2 {
		for _, c := range cases {
			m := reused[c.msg.Type()]
			if m == nil {
				m = NewMessage(c.msg.Type())
				reused[c.msg.Type()] = m
			}
			_, body := frameOf(t, 1, c.msg)
			if err := Decode(body, m); err != nil {
				t.Fatalf("round %d, %s: %v", round, c.name, err)
			}
			if !sameValue(m, c.expected()) {
				t.Fatalf("round %d, %s: decoded into a reused message\n%+v\nwant\n%+v", round, c.name, m, c.expected())
			}
		}
	}
}

// TestWireForm decodes every body with msgpack's own generic decoding
// and compares it with the layout the documentation gives, so the bytes
// are real msgpack, in the documented order.
func TestWireForm(t *testing.T) {
	for _, c := range testCases() {
		t.Run(c.name, func(t *testing.T) {
			_, body := frameOf(t, 1, c.msg)
			var got []any
			if err := msgpack.Unmarshal(body, &got); err != nil {
				t.Fatalf("msgpack.Unmarshal: %v", err)
			}
			want := wireForm(c.expected())
			if g := normalize(got); !reflect.DeepEqual(g, any(want)) {
				t.Fatalf("generic decoding gives\n%#v\nwant\n%#v", g, want)
			}
		})
	}
}

// TestDecodeZeroCopy checks that decoded strings alias the body.
func TestDecodeZeroCopy(t *testing.T) {
	_, body := frameOf(t, 1, &Allow{Viewer: "viewer-1", Caps: []fcap.Cap{capCreative}})
	var m Allow
	if err := Decode(body, &m); err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(body, []byte("viewer-1"))
	copy(body[i:], "VIEWER-9")
	if m.Viewer != "VIEWER-9" {
		t.Fatalf("Viewer %q did not follow the body: it was copied", m.Viewer)
	}
}

// rawBody encodes a body by hand with msgpack's encoder, for bodies
// AppendFrame would never write.
func rawBody(t testing.TB, f func(e *msgpack.Encoder)) []byte {
	t.Helper()
	var buf bytes.Buffer
	f(msgpack.NewEncoder(&buf))
	return buf.Bytes()
}

func encodeCap(e *msgpack.Encoder, c fcap.Cap) {
	e.EncodeArrayLen(6)
	e.EncodeString(c.Scope)
	e.EncodeString(c.ID)
	e.EncodeInt(c.Limit)
	e.EncodeInt(c.WindowMillis())
	e.EncodeUint(uint64(c.Algorithm))
	e.EncodeUint(uint64(c.Mode))
}

// TestDecodeSkipsAppendedFields checks forward compatibility: fields a
// later version appends to a message or to a nested array are skipped,
// whatever their type.
func TestDecodeSkipsAppendedFields(t *testing.T) {
	extras := func(e *msgpack.Encoder) {
		e.EncodeString("new field")
		e.EncodeMap(map[string]any{"k": []any{1, "two", nil, 3.5}})
		e.EncodeBytes(make([]byte, 300))
		e.EncodeArrayLen(17)
		for range 17 {
			e.EncodeUint(1 << 40)
		}
		e.Encode(map[string]string{"a": "b"})
		e.EncodeFloat32(1.5)
		e.EncodeInt(-1 << 40)
		e.Encode(int8(-100))
		e.EncodeBool(true)
		e.EncodeNil()
		e.EncodeString(strings.Repeat("x", 70000))
	}
	const nExtras = 11
	body := rawBody(t, func(e *msgpack.Encoder) {
		e.EncodeArrayLen(5 + nExtras)
		e.EncodeString("viewer")
		e.EncodeInt(77)
		e.EncodeArrayLen(1)
		e.EncodeArrayLen(6 + nExtras)
		e.EncodeString(capCreative.Scope)
		e.EncodeString(capCreative.ID)
		e.EncodeInt(capCreative.Limit)
		e.EncodeInt(capCreative.WindowMillis())
		e.EncodeUint(0)
		e.EncodeUint(0)
		extras(e)
		e.EncodeUint(2500) // budget
		e.EncodeBool(true) // backup
		extras(e)
	})
	var m Allow
	if err := Decode(body, &m); err != nil {
		t.Fatal(err)
	}
	want := Allow{Viewer: "viewer", Now: 77, HasNow: true, Caps: []fcap.Cap{capCreative}, Budget: 2500 * time.Microsecond, Backup: true}
	if !sameValue(&m, &want) {
		t.Fatalf("decoded %+v, want %+v", m, want)
	}
	// The same with an ext value, which the encoder cannot write by hand.
	for _, ext := range [][]byte{{0xd4, 1, 0}, {0xd5, 1, 0, 0}, {0xd6, 1, 0, 0, 0, 0}, {0xd7, 1, 0, 0, 0, 0, 0, 0, 0, 0}, {0xc7, 2, 1, 0, 0}, {0xc8, 0, 1, 1, 0}, {0xc9, 0, 0, 0, 0, 1}} {
		body := append([]byte{0x93 + 3, 0xa1, 'v', 0xc0, 0x90, 0x00, 0xc2}, ext...) // budget 0, backup false, then the ext
		if err := Decode(body, &m); err != nil {
			t.Fatalf("ext % x: %v", ext, err)
		}
	}
}

// TestDecodeOptionalField decodes a CheckResult from a sender that
// predates Left, into a message that held one: Left comes out empty.
func TestDecodeOptionalField(t *testing.T) {
	// A three-field CheckResult from an older node: Left empty, Stale
	// false, even when the reused value held them.
	m := CheckResult{Left: []uint16{1, 2, 3}, Stale: true}
	body := []byte{0x93, 0x05, 0x07, 0xc4, 4, 2, 0, 0, 1}
	if err := Decode(body, &m); err != nil {
		t.Fatal(err)
	}
	want := CheckResult{Epoch: 5, Now: 7, Verdicts: []fcap.Verdict{{Allowed: true, Remaining: 2, Blocking: -1}}}
	if !sameValue(&m, &want) {
		t.Fatalf("decoded %+v, want %+v", m, want)
	}
}

func TestDecodeCheckWithoutBackup(t *testing.T) {
	// A five-field Check from an older client decodes with Backup false.
	want := Check{Viewer: "v", Now: 3, HasNow: true, Table: fcap.CheckTable{Caps: []fcap.Cap{{Scope: "s", ID: "i", Limit: 1, Window: 2 * time.Millisecond}}, Refs: []uint16{0}, Ends: []uint32{1}}}
	full, err := AppendFrame(nil, 1, &want)
	if err != nil {
		t.Fatal(err)
	}
	body := append([]byte(nil), full[HeaderSize:len(full)-2]...) // drop the trailing bool and budget
	body[0] = 0x95                                               // fixarray of 5
	m := Check{Backup: true}
	if err := Decode(body, &m); err != nil {
		t.Fatal(err)
	}
	if !sameValue(&m, &want) {
		t.Fatalf("decoded %+v, want %+v", m, want)
	}
}

// TestDecodeWithoutBudget decodes requests from a client that predates
// the budget, into reused messages that held one: Budget comes out 0 (no
// deadline).
func TestDecodeWithoutBudget(t *testing.T) {
	cases := []struct {
		m    Message
		want Message
	}{
		{&Allow{Viewer: "v", Caps: []fcap.Cap{capCreative}}, &Allow{Budget: time.Second, Backup: true}},
		{&Reserve{Viewer: "v", TTL: 5, Caps: []fcap.Cap{capCreative}}, &Reserve{Budget: time.Second}},
		{&Check{Viewer: "v", Backup: true}, &Check{Budget: time.Second}},
	}
	for _, c := range cases {
		full, err := AppendFrame(nil, 1, c.m)
		if err != nil {
			t.Fatal(err)
		}
		drop := 1 // the budget, 0
		if _, ok := c.m.(*Allow); ok {
			drop = 2 // and the backup flag after it
		}
		body := append([]byte(nil), full[HeaderSize:len(full)-drop]...)
		body[0] -= byte(drop) // fewer fields (a fixarray)
		if err := Decode(body, c.want); err != nil {
			t.Fatalf("%T: %v", c.m, err)
		}
		if !sameValue(c.want, c.m) {
			t.Fatalf("decoded %+v, want %+v", c.want, c.m)
		}
	}
}

// TestDecodeRefusesLongBudget: a budget past MaxBudget is not a deadline
// anyone means; it is refused rather than clamped or overflowed.
func TestDecodeRefusesLongBudget(t *testing.T) {
	for _, us := range []uint64{uint64(MaxBudget/time.Microsecond) + 1, math.MaxUint64} {
		body := rawBody(t, func(e *msgpack.Encoder) {
			e.EncodeArrayLen(4)
			e.EncodeString("v")
			e.EncodeNil()
			e.EncodeArrayLen(0)
			e.EncodeUint(us)
		})
		if err := Decode(body, &Allow{}); !errors.Is(err, ErrBadRequest) {
			t.Fatalf("budget of %dus: %v, want ErrBadRequest", us, err)
		}
	}
}

// TestDecodeWritesWithoutBackup decodes an Allow and a Record from an
// older client, which sends no backup field, into values that held one:
// Backup comes out false, so a backup owner never takes their writes.
func TestDecodeWritesWithoutBackup(t *testing.T) {
	caps := []fcap.Cap{{Scope: "s", ID: "i", Limit: 1, Window: 2 * time.Millisecond}}
	for _, tc := range []struct {
		want, into Message
		fixarray   byte
	}{
		{&Allow{Viewer: "v", Now: 3, HasNow: true, Caps: caps}, &Allow{Backup: true}, 0x94},
		{&Record{Items: []RecordItem{{Viewer: "v", Impression: fcap.Impression{ID: "x", Time: 3, Caps: caps}, HasTime: true}}}, &Record{Backup: true}, 0x91},
	} {
		full, err := AppendFrame(nil, 1, tc.want)
		if err != nil {
			t.Fatal(err)
		}
		body := append([]byte(nil), full[HeaderSize:len(full)-1]...) // drop the trailing bool
		body[0] = tc.fixarray
		if err := Decode(body, tc.into); err != nil {
			t.Fatalf("%T: %v", tc.want, err)
		}
		if !sameValue(tc.into, tc.want) {
			t.Errorf("decoded %+v, want %+v", tc.into, tc.want)
		}
	}
}

// TestDecodeRefuses checks bodies Decode must refuse, each with an error
// wrapping ErrBadRequest.
func TestDecodeRefuses(t *testing.T) {
	_, allow := frameOf(t, 1, &Allow{Viewer: "v", Caps: []fcap.Cap{capCreative}})
	cases := []struct {
		name string
		msg  Message
		body []byte
	}{
		{"empty body", &Ping{}, nil},
		{"not an array", &Ping{}, []byte{0x01}},
		{"nil for the message", &Ping{}, []byte{0xc0}},
		{"bytes after the message", &Ping{}, []byte{0x90, 0x00}},
		{"too few fields", &Pong{}, []byte{0x91, 0x01}},
		{"truncated", &Allow{}, allow[:len(allow)-1]},
		{"array longer than the body", &Allow{}, []byte{0xdd, 0x7f, 0xff, 0xff, 0xff, 0xa1, 'v'}},
		{"caps longer than the body", &Allow{}, []byte{0x93, 0xa1, 'v', 0xc0, 0xdc, 0x00, 0xff}},
		{"string longer than the body", &Pong{}, []byte{0x92, 0x01, 0xdb, 0x7f, 0xff, 0xff, 0xff, 'x'}},
		{"string for an int", &Pong{}, []byte{0x92, 0xa1, '1', 0xa1, 'n'}},
		{"int for a string", &Pong{}, []byte{0x92, 0x01, 0x02}},
		{"negative for a uint", &Pong{}, []byte{0x92, 0xff, 0xa1, 'n'}},
		{"float for a time", &Allow{}, []byte{0x93, 0xa1, 'v', 0xca, 0, 0, 0, 0, 0x90}},
		{"cap too short", &Allow{}, []byte{0x93, 0xa1, 'v', 0xc0, 0x91, 0x95, 0xa1, 's', 0xa1, 'i', 1, 1, 0}},
		{"algorithm over uint8", &Allow{}, []byte{0x93, 0xa1, 'v', 0xc0, 0x91, 0x96, 0xa1, 's', 0xa1, 'i', 1, 1, 0xcd, 0x01, 0x00, 0}},
		{"code over uint16", &Error{}, []byte{0x93, 0xce, 0, 1, 0, 0, 0xa0, 0}},
		{"refs of odd length", &Check{}, []byte{0x95, 0xa1, 'v', 0xc0, 0x90, 0xc4, 3, 0, 0, 0, 0xc4, 0}},
		{"ends not a multiple of 4", &Check{}, []byte{0x95, 0xa1, 'v', 0xc0, 0x90, 0xc4, 0, 0xc4, 2, 0, 0}},
		{"verdicts not a multiple of 4", &CheckResult{}, []byte{0x93, 0, 0, 0xc4, 5, 0, 0, 0, 0, 0}},
		{"left of odd length", &CheckResult{}, []byte{0x94, 0, 0, 0xc4, 0, 0xc4, 1, 0}},
		{"left not a bin", &CheckResult{}, []byte{0x94, 0, 0, 0xc4, 0, 0x90}},
		{"owners of odd length", &Topology{}, []byte{0x95, 0, 0, 0, 0x90, 0xc4, 1, 0}},
		{"owners for no partition", &Topology{}, []byte{0x95, 0, 0, 1, 0x90, 0xc4, 2, 0xff, 0xff}},
		{"owners do not fill the table", &Topology{}, []byte{0x95, 0, 2, 2, 0x90, 0xc4, 2, 0xff, 0xff}},
		{"owner not a member", &Topology{}, []byte{0x95, 0, 1, 1, 0x90, 0xc4, 2, 0, 0}},
		{"negative partitions", &Topology{}, []byte{0x95, 0, 0xff, 0, 0x90, 0xc4, 0}},
		{"invalid code in a skipped field", &Ping{}, []byte{0x91, 0xc1}},
		{"skipped field longer than the body", &Ping{}, []byte{0x91, 0xc6, 0xff, 0xff, 0xff, 0xff, 0}},
		{"skipped array longer than the body", &Ping{}, []byte{0x91, 0xdd, 0xff, 0xff, 0xff, 0xff, 0}},
		{"skipped map longer than the body", &Ping{}, []byte{0x91, 0xdf, 0xff, 0xff, 0xff, 0xff, 0}},
		{"skipped ext longer than the body", &Ping{}, []byte{0x91, 0xc9, 0xff, 0xff, 0xff, 0xff, 1}},
		{"skipped fixext past the end", &Ping{}, []byte{0x91, 0xd8, 1, 0}},
		{"skipped length past the end", &Ping{}, []byte{0x91, 0xc5, 0}},
		{"over MaxCapsPerMessage", &Allow{}, rawBody(t, func(e *msgpack.Encoder) {
			e.EncodeArrayLen(3)
			e.EncodeString("v")
			e.EncodeNil()
			e.EncodeArrayLen(MaxCapsPerMessage + 1)
			for range MaxCapsPerMessage + 1 {
				encodeCap(e, capCreative)
			}
		})},
		{"over MaxRecordItems", &Record{}, rawBody(t, func(e *msgpack.Encoder) {
			e.EncodeArrayLen(1)
			e.EncodeArrayLen(MaxRecordItems + 1)
			for range MaxRecordItems + 1 {
				e.EncodeArrayLen(5)
				e.EncodeString("v")
				e.EncodeString("i")
				e.EncodeNil()
				e.EncodeArrayLen(0)
				e.EncodeUint(0)
			}
		})},
		{"over MaxStringLen", &Pong{}, rawBody(t, func(e *msgpack.Encoder) {
			e.EncodeArrayLen(2)
			e.EncodeUint(0)
			e.EncodeString(strings.Repeat("x", MaxStringLen+1))
		})},
		{"over MaxCandidates", &Check{}, rawBody(t, func(e *msgpack.Encoder) {
			e.EncodeArrayLen(5)
			e.EncodeString("v")
			e.EncodeNil()
			e.EncodeArrayLen(0)
			e.EncodeBytes([]byte{})
			e.EncodeBytes(make([]byte, 4*(MaxCandidates+1)))
		})},
		{"over MaxCheckCaps", &Check{}, rawBody(t, func(e *msgpack.Encoder) {
			e.EncodeArrayLen(5)
			e.EncodeString("v")
			e.EncodeNil()
			e.EncodeArrayLen(MaxCheckCaps + 1)
			for range MaxCheckCaps + 1 {
				encodeCap(e, capZero)
			}
			e.EncodeBytes([]byte{})
			e.EncodeBytes([]byte{})
		})},
		{"over MaxMembers", &Topology{}, rawBody(t, func(e *msgpack.Encoder) {
			e.EncodeArrayLen(5)
			e.EncodeUint(0)
			e.EncodeInt(0)
			e.EncodeInt(0)
			e.EncodeArrayLen(MaxMembers + 1)
			for range MaxMembers + 1 {
				e.EncodeArrayLen(5)
				e.EncodeString("n")
				e.EncodeString("a")
				e.EncodeString("")
				e.EncodeUint(0)
				e.EncodeInt(0)
			}
			e.EncodeBytes([]byte{})
		})},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Decode(c.body, c.msg)
			if !errors.Is(err, ErrBadRequest) {
				t.Fatalf("Decode: %v, want an error wrapping ErrBadRequest", err)
			}
			if CodeOf(err) != CodeBadRequest {
				t.Fatalf("CodeOf(%v) = %v", err, CodeOf(err))
			}
		})
	}
	if err := Decode([]byte{0x90}, nil); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("Decode into nil: %v", err)
	}
	if err := Decode(allow[:3], &Allow{}); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("Decode of a cut body: %v, want io.ErrUnexpectedEOF in the chain", err)
	}
}

// TestDecodeBoundedAllocation decodes bodies that claim huge lengths and
// checks that Decode allocates in proportion to the body, not to the
// claim.
func TestDecodeBoundedAllocation(t *testing.T) {
	bodies := map[string][]byte{
		"array32 of caps":   {0x93, 0xa1, 'v', 0xc0, 0xdd, 0xff, 0xff, 0xff, 0xff},
		"array16 of caps":   {0x93, 0xa1, 'v', 0xc0, 0xdc, 0xff, 0xff, 0x96},
		"bin32 refs":        {0x95, 0xa1, 'v', 0xc0, 0x90, 0xc6, 0xff, 0xff, 0xff, 0xfe, 0},
		"str32 viewer":      {0x93, 0xdb, 0xff, 0xff, 0xff, 0xff, 'v'},
		"skipped bin32":     {0x91, 0xc6, 0x7f, 0xff, 0xff, 0xff, 0},
		"skipped deep nest": append([]byte{0x91}, bytes.Repeat([]byte{0x91}, 100000)...),
		"skipped wide nest": append([]byte{0x91}, bytes.Repeat([]byte{0xdd, 0xff, 0xff, 0xff, 0xff}, 1000)...),
	}
	msgs := map[string]Message{"array32 of caps": &Allow{}, "array16 of caps": &Allow{}, "bin32 refs": &Check{}, "str32 viewer": &Allow{}}
	for name, body := range bodies {
		m := msgs[name]
		if m == nil {
			m = &Ping{}
		}
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		err := Decode(body, m)
		runtime.ReadMemStats(&after)
		if err == nil {
			t.Errorf("%s: decoded", name)
		}
		if n := after.TotalAlloc - before.TotalAlloc; n > 16<<10 {
			t.Errorf("%s: Decode of %d bytes allocated %d bytes", name, len(body), n)
		}
	}
}

// TestAppendFrameRefuses checks that AppendFrame refuses what Decode
// would, and leaves dst as it was.
func TestAppendFrameRefuses(t *testing.T) {
	cases := []struct {
		name string
		msg  Message
	}{
		{"long viewer", &Allow{Viewer: strings.Repeat("v", MaxStringLen+1)}},
		{"long cap id", &Allow{Caps: []fcap.Cap{{ID: strings.Repeat("v", MaxStringLen+1)}}}},
		{"too many caps", &Allow{Caps: manyCaps(MaxCapsPerMessage + 1)}},
		{"too many reserve caps", &Reserve{Caps: manyCaps(MaxCapsPerMessage + 1)}},
		{"too many check caps", &Check{Table: fcap.CheckTable{Caps: make([]fcap.Cap, MaxCheckCaps+1)}}},
		{"too many candidates", &Check{Table: fcap.CheckTable{Ends: make([]uint32, MaxCandidates+1)}}},
		{"too many verdicts", &CheckResult{Verdicts: make([]fcap.Verdict, MaxCandidates+1)}},
		{"too many left", &CheckResult{Left: make([]uint16, MaxCheckCaps+1)}},
		{"blocking out of range", &CheckResult{Verdicts: []fcap.Verdict{{Blocking: maxBlocking + 1}}}},
		{"blocking below -1", &CheckResult{Verdicts: []fcap.Verdict{{Blocking: -2}}}},
		{"too many items", &Record{Items: make([]RecordItem, MaxRecordItems+1)}},
		{"too many impression caps", &Record{Items: []RecordItem{{Impression: fcap.Impression{Caps: manyCaps(MaxCapsPerMessage + 1)}}}}},
		{"too many results", &RecordResult{Results: make([]ItemResult, MaxRecordItems+1)}},
		{"too many members", &Topology{Members: make([]Member, MaxMembers+1)}},
		{"owners do not fit", &Topology{Partitions: 2, Replicas: 1, Members: make([]Member, 1), Owners: []uint16{0}}},
		{"owner not a member", &Topology{Partitions: 1, Replicas: 1, Owners: []uint16{0}}},
		{"long error message", &Error{Message: strings.Repeat("e", MaxStringLen+1)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dst := []byte("prefix")
			out, err := AppendFrame(dst, 1, c.msg)
			if !errors.Is(err, ErrBadRequest) {
				t.Fatalf("AppendFrame: %v, want an error wrapping ErrBadRequest", err)
			}
			if string(out) != "prefix" {
				t.Fatalf("AppendFrame left %q in dst", out)
			}
		})
	}
}

// TestAppendFrameAppends checks that frames append after what dst holds.
func TestAppendFrameAppends(t *testing.T) {
	buf := []byte("xyz")
	var err error
	for i, c := range testCases() {
		if buf, err = AppendFrame(buf, uint64(i), c.msg); err != nil {
			t.Fatal(err)
		}
	}
	if string(buf[:3]) != "xyz" {
		t.Fatalf("prefix overwritten: %q", buf[:3])
	}
	r := NewReader(bytes.NewReader(buf[3:]), 1<<20)
	for i, c := range testCases() {
		h, body, err := r.Next()
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		m := NewMessage(h.Type)
		if h.ID != uint64(i) || h.Type != c.msg.Type() {
			t.Fatalf("frame %d: header %+v, want type %v", i, h, c.msg.Type())
		}
		if err := Decode(body, m); err != nil || !sameValue(m, c.expected()) {
			t.Fatalf("frame %d (%s): %v: %+v", i, c.name, err, m)
		}
	}
	if _, _, err := r.Next(); err != io.EOF {
		t.Fatalf("after the last frame: %v, want io.EOF", err)
	}
}

// TestTypeString checks every one of the 256 type values: a type has a
// name exactly when NewMessage knows it, names are unique, and unknown
// values print as "type(N)". A new type missing from either table fails.
func TestTypeString(t *testing.T) {
	seen := map[string]bool{}
	for i := range 256 {
		ty := Type(i)
		s, m := ty.String(), NewMessage(ty)
		if strings.HasPrefix(s, "type(") {
			if m != nil {
				t.Errorf("NewMessage(%d) = %T, but the type has no name", i, m)
			}
			continue
		}
		if seen[s] {
			t.Errorf("Type(%d).String() = %q, a name used twice", i, s)
		}
		seen[s] = true
		if m == nil || m.Type() != ty {
			t.Errorf("NewMessage(%v) = %T", ty, m)
		}
	}
	for _, ty := range []Type{TypeError, TypeHelloResult, TypeInspect, TypeUndoResult, TypeErase, TypeEraseResult, TypeVoid, TypeVoidResult} {
		if !seen[ty.String()] {
			t.Errorf("Type %d has no name", ty)
		}
	}
	if TypeCheckResult.String() != "check_result" {
		t.Errorf("TypeCheckResult.String() = %q", TypeCheckResult.String())
	}
}

// stripEmpty turns an empty Failed list into nil, for comparisons.
func stripEmpty(s Status) Status {
	if len(s.Failed) == 0 {
		s.Failed = nil
	}
	if len(s.Departed) == 0 {
		s.Departed = nil
	}
	return s
}

// A Status with the member set's failures, authority and claims
// round-trips.
func TestStatusAuthorityRoundTrip(t *testing.T) {
	in := &Status{Name: "n1", Epoch: 7, State: 2, Members: 2, Authority: true, QuorumMembers: 3, QuorumConfirmed: 2, Claimed: 4, Replicas: 2,
		Failed: []FailedMember{{Name: "n3", Addr: "10.0.0.3:7700", SinceMillis: 1700000000000}}, JoinError: "j", Drifting: 9,
		Departed: []DepartedMember{{Name: "n4", AtMillis: 1700000001000}},
		Version:  "v1.2.0", UptimeMillis: 90_000, MemoryLimit: 1 << 30, RecentMillis: 60_000, RecentRequests: 500, RecentErrors: 2, P99Nanos: 50_000}
	b, err := AppendFrame(nil, 1, in)
	if err != nil {
		t.Fatal(err)
	}
	var out Status
	if err := Decode(b[HeaderSize:], &out); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&out, in) {
		t.Fatalf("decoded %+v, want %+v", out, *in)
	}
}

// TestStatusWithoutServingFigures decodes the 24-field Status of nodes
// that predate the version, uptime, memory limit and recent serving
// figures: they read as empty, the rest as sent; a newer node's fields
// past the known ones are skipped.
func TestStatusWithoutServingFigures(t *testing.T) {
	fields := []any{"n1", 9, 2, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, "", true, 3, 2, 0, []any{}, 2, 0, []any{}}
	body, err := msgpack.Marshal(fields)
	if err != nil {
		t.Fatal(err)
	}
	m := &Status{Version: "stale", UptimeMillis: 1, MemoryLimit: 1, RecentMillis: 1, RecentRequests: 1, RecentErrors: 1, P99Nanos: 1, P99Over: true} // a reused message
	if err := Decode(body, m); err != nil {
		t.Fatal(err)
	}
	want := Status{Name: "n1", Epoch: 9, State: 2, Viewers: 1, Keys: 2, Bytes: 3, Primaries: 4, Backups: 5, Syncing: 6, Handing: 7, ReplicationQueue: 8, UnderReplicated: 9, Members: 10,
		Requests: 11, LagMillis: 12, Authority: true, QuorumMembers: 3, QuorumConfirmed: 2, Replicas: 2}
	if !reflect.DeepEqual(stripEmpty(*m), want) {
		t.Fatalf("decoded %+v, want %+v", *m, want)
	}

	newer := append(fields, "v9.9.9", 5000, 1<<30, 60000, 100, 1, 250000, true, nil, "a field from a later version") // nil: no peer regions
	if body, err = msgpack.Marshal(newer); err != nil {
		t.Fatal(err)
	}
	if err := Decode(body, m); err != nil {
		t.Fatal(err)
	}
	want.Version, want.UptimeMillis, want.MemoryLimit, want.RecentMillis, want.RecentRequests, want.RecentErrors, want.P99Nanos, want.P99Over = "v9.9.9", 5000, 1<<30, 60000, 100, 1, 250000, true
	if !reflect.DeepEqual(stripEmpty(*m), want) {
		t.Fatalf("decoded %+v, want %+v", *m, want)
	}
}

// TestStatusFromAnOlderNode decodes the 13-field Status of nodes that
// predate Requests and LagMillis: they read as 0, not an error.
func TestStatusFromAnOlderNode(t *testing.T) {
	body, err := msgpack.Marshal([]any{"old", 9, 2, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10})
	if err != nil {
		t.Fatal(err)
	}
	m := &Status{Requests: 99, LagMillis: 99, JoinError: "stale", Authority: true, Claimed: 3, Failed: []FailedMember{{Name: "x"}}, // a reused message
		Version: "stale", UptimeMillis: 1, MemoryLimit: 1, RecentMillis: 1, RecentRequests: 1, RecentErrors: 1, P99Nanos: 1, P99Over: true}
	if err := Decode(body, m); err != nil {
		t.Fatal(err)
	}
	want := Status{Name: "old", Epoch: 9, State: 2, Viewers: 1, Keys: 2, Bytes: 3, Primaries: 4, Backups: 5, Syncing: 6, Handing: 7, ReplicationQueue: 8, UnderReplicated: 9, Members: 10}
	if !reflect.DeepEqual(stripEmpty(*m), want) {
		t.Fatalf("decoded %+v, want %+v", *m, want)
	}
}

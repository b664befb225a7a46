package proto

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/fcap-io/fcap"
)

// decodeCapBoth decodes one cap from body twice, through cap (the fast
// path first) and through capSlow alone, and fails unless both read the
// same cap, stop at the same offset and fail alike.
func decodeCapBoth(t *testing.T, body []byte) (fast bool) {
	t.Helper()
	var a, b fcap.Cap
	da := &decoder{body: body}
	da.dec = msgpack.NewDecoder(da)
	fast = da.capFast(&a)
	if !fast {
		da.capSlow(&a)
	}
	db := &decoder{body: body}
	db.dec = msgpack.NewDecoder(db)
	db.capSlow(&b)
	if (da.err == nil) != (db.err == nil) {
		t.Fatalf("% x: fast path err %v, field by field err %v", body, da.err, db.err)
	}
	if da.err == nil && (a != b || da.off != db.off) {
		t.Fatalf("% x: fast path %+v at %d, field by field %+v at %d", body, a, da.off, b, db.off)
	}
	return fast
}

// TestCapFastMatchesFieldByField: the fast path reads every cap the
// clients write exactly as the general path does, takes the usual forms
// (or the test would pass with a fast path that never runs), and leaves
// every other form, and every corruption of a cap, to the general path
// or to the same answer.
func TestCapFastMatchesFieldByField(t *testing.T) {
	ints := []int64{0, 1, 127, 128, 255, 256, 65535, 65536, math.MaxUint32, math.MaxUint32 + 1, math.MaxInt64, -1, -33, math.MinInt64}
	ids := []string{"", "c", "campaign-1234", strings.Repeat("x", 31), strings.Repeat("y", 32), strings.Repeat("z", 300)}
	fastSeen := 0
	for _, scope := range []string{"", "campaign", strings.Repeat("s", 40)} {
		for _, id := range ids {
			for _, limit := range ints {
				for _, window := range ints { // milliseconds on the wire, every form
					for _, am := range [][2]uint8{{0, 0}, {2, 1}, {127, 0}, {128, 255}} {
						c := fcap.Cap{Scope: scope, ID: id, Limit: limit, Window: fcap.Millis(window), Algorithm: fcap.Algorithm(am[0]), Mode: fcap.Mode(am[1])}
						body := appendCap(nil, &c, window)
						fast := decodeCapBoth(t, body)
						want := len(scope) <= 31 && len(id) <= 31 && limit >= 0 && limit <= math.MaxUint32 &&
							window >= 0 && window <= math.MaxUint32 && am[0] <= 127 && am[1] <= 127
						if fast != want {
							t.Fatalf("%+v: fast path taken %v, want %v", c, fast, want)
						}
						if fast {
							fastSeen++
						}
						for cut := range len(body) { // every truncation
							decodeCapBoth(t, body[:cut])
						}
					}
				}
			}
		}
	}
	if fastSeen == 0 {
		t.Fatal("the fast path never ran")
	}
	// Random corruptions of a usual cap: one to three bytes changed.
	rng := rand.New(rand.NewPCG(1, 2))
	base := appendCap(nil, &fcap.Cap{Scope: "campaign", ID: "campaign-42", Limit: 300, Algorithm: 1, Mode: 1}, 86_400_000)
	for range 200_000 {
		body := append([]byte(nil), base...)
		for range 1 + rng.IntN(3) {
			body[rng.IntN(len(body))] = byte(rng.Uint32())
		}
		decodeCapBoth(t, body)
	}
}

// TestCapFastSharesTheScope: caps of one request naming the same scope
// share one string, which is what lets validation and hashing compare a
// pointer; a different scope is its own string and the sharing resets
// with each message.
func TestCapFastSharesTheScope(t *testing.T) {
	var tbl fcap.CheckTable
	for i := range 4 {
		scope := "campaign"
		if i == 2 {
			scope = "creative"
		}
		tbl.Caps = append(tbl.Caps, fcap.Cap{Scope: scope, ID: fmt.Sprint("id-", i), Limit: 3, Window: time.Second})
		tbl.Refs = append(tbl.Refs, uint16(i))
		tbl.Ends = append(tbl.Ends, uint32(i+1))
	}
	frame, err := AppendFrame(nil, 1, &Check{Viewer: "v", Table: tbl})
	if err != nil {
		t.Fatal(err)
	}
	var m Check
	if err := Decode(frame[HeaderSize:], &m); err != nil {
		t.Fatal(err)
	}
	caps := m.Table.Caps
	same := func(a, b string) bool {
		return len(a) > 0 && len(b) > 0 && unsafe.StringData(a) == unsafe.StringData(b)
	}
	if !same(caps[0].Scope, caps[1].Scope) {
		t.Error("caps 0 and 1 name campaign and do not share its string")
	}
	if same(caps[1].Scope, caps[2].Scope) || caps[2].Scope != "creative" {
		t.Errorf("cap 2 (creative) shares cap 1's string, or reads %q", caps[2].Scope)
	}
	if same(caps[1].Scope, caps[3].Scope) || caps[3].Scope != "campaign" {
		// The last scope seen was creative's: campaign is read afresh.
		t.Errorf("cap 3 shares a string it should not, or reads %q", caps[3].Scope)
	}
	for i, c := range caps {
		if c != tbl.Caps[i] {
			t.Errorf("cap %d: %+v, want %+v", i, c, tbl.Caps[i])
		}
	}
}

// appendCapFast writes the bytes the value-by-value encoder writes, for
// every cap in capFastForm (the boundaries of each value's forms, ids of
// every length a fixstr holds), after any prefix and whether or not b
// has room already.
func TestAppendCapFastMatchesValueByValue(t *testing.T) {
	ints := []int64{0, 1, 127, 128, 255, 256, 65535, 65536, math.MaxUint32}
	n := 0
	for _, scope := range []string{"", "c", "campaign", strings.Repeat("s", 31)} {
		for l := 0; l <= 31; l++ {
			id := strings.Repeat("i", l)
			for _, limit := range ints {
				for _, window := range ints {
					for _, am := range [][2]uint8{{0, 0}, {1, 1}, {127, 127}} {
						c := fcap.Cap{Scope: scope, ID: id, Limit: limit, Window: fcap.Millis(window), Algorithm: fcap.Algorithm(am[0]), Mode: fcap.Mode(am[1])}
						if !capFastForm(&c, window) {
							t.Fatalf("%+v is in the fast form", c)
						}
						for _, prefix := range [][]byte{nil, []byte("xyz"), make([]byte, 5, 200)} {
							want := appendCapValues(slices.Clone(prefix), &c, window)
							if got := appendCapFast(slices.Clone(prefix), &c, window); !bytes.Equal(got, want) {
								t.Fatalf("%+v after %q: fast % x, want % x", c, prefix, got, want)
							}
							n++
						}
					}
				}
			}
		}
	}
	for _, c := range []fcap.Cap{
		{ID: strings.Repeat("i", 32)}, {Scope: strings.Repeat("s", 32)}, {Limit: -1}, {Window: fcap.Millis(math.MaxUint32 + 1)},
		{Window: -time.Millisecond}, {Algorithm: 128}, {Mode: 128},
	} {
		if capFastForm(&c, c.WindowMillis()) {
			t.Errorf("%+v is not in the fast form (capFast would not read it)", c)
		}
	}
	t.Logf("%d encodings compared", n)
}

package ring

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

func TestMetaRoundTrip(t *testing.T) {
	for _, m := range []Member{
		{Name: "n", Addr: "10.0.0.1:7070", State: Joining},
		{Name: "node-1", Addr: "[::1]:7070", HTTPAddr: "[::1]:8080", State: Active, Incarnation: 1767225600123456789},
		{Name: "x", Addr: "h:1", HTTPAddr: "h:2", State: Leaving, Incarnation: math.MinInt64},
		{Name: "y", Addr: "h:1", State: Active, Incarnation: math.MaxInt64},
		{Name: "z", Addr: strings.Repeat("a", 250), HTTPAddr: strings.Repeat("b", 250), State: Active, Incarnation: -1},
	} {
		meta, err := m.MarshalMeta()
		if err != nil {
			t.Fatalf("%+v: %v", m, err)
		}
		got, err := UnmarshalMeta(m.Name, meta)
		if err != nil {
			t.Fatalf("%+v: %v", m, err)
		}
		if got != m {
			t.Fatalf("round trip: got %+v, want %+v", got, m)
		}
	}
}

func TestMarshalMetaRefuses(t *testing.T) {
	for _, m := range []Member{
		{Name: "n", State: Active},
		{Name: "n", Addr: "a:1"},
		{Name: "n", Addr: "a:1", State: 7},
		{Name: "n", Addr: strings.Repeat("a", 300), HTTPAddr: strings.Repeat("b", 300), State: Active},
	} {
		if meta, err := m.MarshalMeta(); !errors.Is(err, ErrMeta) {
			t.Errorf("%+v: %d bytes, err %v; want ErrMeta", m, len(meta), err)
		}
	}
}

// encode returns the msgpack encoding of the values, as an array.
func encode(t testing.TB, vs ...any) []byte {
	t.Helper()
	b, err := msgpack.Marshal(vs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestUnmarshalMetaRefuses(t *testing.T) {
	good := encode(t, 1, "a:1", "b:2", 2, 5)
	if _, err := UnmarshalMeta("n", good); err != nil {
		t.Fatalf("good metadata refused: %v", err)
	}
	for _, tc := range []struct {
		name string
		meta []byte
	}{
		{"nil", nil},
		{"empty", []byte{}},
		{"oversized", encode(t, 1, "a:1", strings.Repeat("b", 600), 2, 5)},
		{"truncated", good[:len(good)-1]},
		{"trailing bytes", append(bytes.Clone(good), 0)},
		{"not an array", encode(t, 1)[1:]},
		{"map", func() []byte { b, _ := msgpack.Marshal(map[string]int{"a": 1}); return b }()},
		{"nil array", []byte{0xc0}},
		{"too few elements", encode(t, 1, "a:1", "b:2", 2)},
		{"unknown version", encode(t, 2, "a:1", "b:2", 2, 5)},
		{"version string", encode(t, "1", "a:1", "b:2", 2, 5)},
		{"empty addr", encode(t, 1, "", "b:2", 2, 5)},
		{"addr nil", encode(t, 1, nil, "b:2", 2, 5)},
		{"addr int", encode(t, 1, 5, "b:2", 2, 5)},
		{"addr binary", encode(t, 1, []byte("a:1"), "b:2", 2, 5)},
		{"http addr nil", encode(t, 1, "a:1", nil, 2, 5)},
		{"state 0", encode(t, 1, "a:1", "b:2", 0, 5)},
		{"state 4", encode(t, 1, "a:1", "b:2", 4, 5)},
		{"state 258", encode(t, 1, "a:1", "b:2", 258, 5)},
		{"state -1", encode(t, 1, "a:1", "b:2", -1, 5)},
		{"state float", encode(t, 1, "a:1", "b:2", 2.0, 5)},
		{"state nil", encode(t, 1, "a:1", "b:2", nil, 5)},
		{"incarnation float", encode(t, 1, "a:1", "b:2", 2, 5.5)},
		{"incarnation string", encode(t, 1, "a:1", "b:2", 2, "5")},
		{"incarnation overflows", encode(t, 1, "a:1", "b:2", 2, uint64(math.MaxInt64)+1)},
		{"extra element truncated", func() []byte { b := encode(t, 1, "a:1", "b:2", 2, 5, "x"); return b[:len(b)-1] }()},
		{"huge string length", []byte{0x95, 0x01, 0xdb, 0xff, 0xff, 0xff, 0xff, 'a'}},
		{"huge array length", []byte{0xdd, 0xff, 0xff, 0xff, 0xff, 0x01}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := UnmarshalMeta("n", tc.meta)
			if !errors.Is(err, ErrMeta) {
				t.Fatalf("got %+v, err %v; want ErrMeta", m, err)
			}
		})
	}
	if _, err := UnmarshalMeta("", good); !errors.Is(err, ErrMeta) {
		t.Fatalf("empty name: err %v, want ErrMeta", err)
	}
}

// A newer node may append fields; older nodes skip them.
func TestUnmarshalMetaSkipsNewFields(t *testing.T) {
	m, err := UnmarshalMeta("n", encode(t, 1, "a:1", "b:2", 3, 5, "zone-a", map[string]any{"k": []int{1, 2}}))
	if err != nil {
		t.Fatal(err)
	}
	if want := (Member{Name: "n", Addr: "a:1", HTTPAddr: "b:2", State: Leaving, Incarnation: 5}); m != want {
		t.Fatalf("got %+v, want %+v", m, want)
	}
}

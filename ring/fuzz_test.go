package ring

import (
	"errors"
	"testing"
)

// FuzzUnmarshalMeta checks that UnmarshalMeta never panics, refuses with
// ErrMeta, and that whatever it accepts re-encodes and decodes to the same
// member.
func FuzzUnmarshalMeta(f *testing.F) {
	for _, m := range []Member{
		{Name: "n", Addr: "10.0.0.1:7070", HTTPAddr: "10.0.0.1:8080", State: Active, Incarnation: 1767225600123456789},
		{Name: "n", Addr: "a:1", State: Joining, Incarnation: -5},
		{Name: "n", Addr: "[::1]:1", State: Leaving},
	} {
		meta, err := m.MarshalMeta()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(m.Name, meta)
		f.Add(m.Name, meta[:len(meta)-1])
	}
	f.Add("n", encode(f, 1, "a:1", "b:2", 2, 5, "extra", []int{1}))
	f.Add("n", encode(f, 1, "a:1", "b:2", 2.0, 5))
	f.Add("n", []byte{0x95, 0x01, 0xdb, 0xff, 0xff, 0xff, 0xff, 'a'})
	f.Add("", []byte{0xc0})
	f.Fuzz(func(t *testing.T, name string, meta []byte) {
		m, err := UnmarshalMeta(name, meta)
		if err != nil {
			if !errors.Is(err, ErrMeta) {
				t.Fatalf("error does not wrap ErrMeta: %v", err)
			}
			return
		}
		if m.Name != name || m.Addr == "" || !m.State.Valid() {
			t.Fatalf("accepted an invalid member %+v", m)
		}
		again, err := m.MarshalMeta()
		if err != nil {
			t.Fatalf("accepted %+v, which does not re-encode: %v", m, err)
		}
		m2, err := UnmarshalMeta(name, again)
		if err != nil || m2 != m {
			t.Fatalf("re-encoded %+v decodes to %+v, %v", m, m2, err)
		}
	})
}

package ring

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

var updateCorpus = flag.Bool("update-corpus", false, "rewrite the seed corpus under testdata/fuzz")

// metaSeed is one input of FuzzUnmarshalMeta: a gossip node name and the
// metadata memberlist carries for it.
type metaSeed struct {
	name string
	meta []byte
}

// metaSeeds returns FuzzUnmarshalMeta's seeds, by corpus file name:
// valid metadata of every state, each cut short, and metadata with extra
// fields, a float, a lying string length and a nil.
func metaSeeds(t testing.TB) map[string]metaSeed {
	seeds := map[string]metaSeed{}
	for i, m := range []Member{
		{Name: "n", Addr: "10.0.0.1:7070", HTTPAddr: "10.0.0.1:8080", State: Active, Incarnation: 1767225600123456789},
		{Name: "n", Addr: "a:1", State: Joining, Incarnation: -5},
		{Name: "n", Addr: "[::1]:1", State: Leaving},
	} {
		meta, err := m.MarshalMeta()
		if err != nil {
			t.Fatal(err)
		}
		seeds[fmt.Sprintf("seed-%d-%s", i, m.State)] = metaSeed{m.Name, meta}
		seeds[fmt.Sprintf("bad-%d-truncated", i)] = metaSeed{m.Name, meta[:len(meta)-1]}
	}
	seeds["seed-extra-fields"] = metaSeed{"n", encode(t, 1, "a:1", "b:2", 2, 5, "extra", []int{1})}
	seeds["bad-float-state"] = metaSeed{"n", encode(t, 1, "a:1", "b:2", 2.0, 5)}
	seeds["bad-string-length"] = metaSeed{"n", []byte{0x95, 0x01, 0xdb, 0xff, 0xff, 0xff, 0xff, 'a'}}
	seeds["bad-nil"] = metaSeed{"", []byte{0xc0}}
	return seeds
}

// TestMetaSeedCorpus checks that the seed corpus checked in under
// testdata/fuzz/FuzzUnmarshalMeta is the one metaSeeds gives (go test
// ./ring -run TestMetaSeedCorpus -update-corpus rewrites it).
func TestMetaSeedCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzUnmarshalMeta")
	if *updateCorpus {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for file, s := range metaSeeds(t) {
		path := filepath.Join(dir, file)
		want := fmt.Appendf(nil, "go test fuzz v1\nstring(%q)\n[]byte(%q)\n", s.name, s.meta)
		if *updateCorpus {
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s is missing or stale (%v): go test ./ring -run TestMetaSeedCorpus -update-corpus", path, err)
		}
	}
}

// FuzzUnmarshalMeta checks that UnmarshalMeta, which decodes what any
// gossip peer announces, never panics, refuses with ErrMeta, and that
// whatever it accepts is a valid member that re-encodes and decodes to
// the same member.
func FuzzUnmarshalMeta(f *testing.F) {
	for _, s := range metaSeeds(f) {
		f.Add(s.name, s.meta)
	}
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

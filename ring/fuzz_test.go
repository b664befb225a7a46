package ring

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
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

// TestSeedCorpus checks that the seed corpora checked in under
// testdata/fuzz are the ones metaSeeds and tableSeeds give (go test
// ./ring -run TestSeedCorpus -update-corpus rewrites them).
func TestSeedCorpus(t *testing.T) {
	files := map[string][]byte{}
	for file, s := range metaSeeds(t) {
		files[filepath.Join("FuzzUnmarshalMeta", file)] = fmt.Appendf(nil, "go test fuzz v1\nstring(%q)\n[]byte(%q)\n", s.name, s.meta)
	}
	for file, s := range tableSeeds() {
		members, table := tableOf(s.states, s.owners)
		_, err := FromTable(s.epoch, int(s.partitions), int(s.replicas), members, table)
		if bad := strings.HasPrefix(file, "bad-"); bad != (err != nil) {
			t.Errorf("table seed %s: FromTable = %v", file, err)
		}
		files[filepath.Join("FuzzFromTable", file)] = fmt.Appendf(nil, "go test fuzz v1\nuint64(%d)\nuint16(%d)\nuint8(%d)\n[]byte(%q)\n[]byte(%q)\n",
			s.epoch, s.partitions, s.replicas, s.states, s.owners)
	}
	for file, want := range files {
		path := filepath.Join("testdata", "fuzz", file)
		if *updateCorpus {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s is missing or stale (%v): go test ./ring -run TestSeedCorpus -update-corpus", path, err)
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

// tableSeed is one input of FuzzFromTable: a ring's shape, its members'
// states (member i is named "m<i>") and its owners table, little-endian.
type tableSeed struct {
	epoch      uint64
	partitions uint16
	replicas   uint8
	states     []byte
	owners     []byte
}

// tableSeeds returns FuzzFromTable's seeds, by corpus file name: valid
// tables of one to three members, and tables with an owner out of
// range, a joining owner, an owner twice, a short table and a
// non-prime partition count.
func tableSeeds() map[string]tableSeed {
	table := func(partitions, replicas, active int) []byte {
		var b []byte
		for p := range partitions {
			for k := range replicas {
				o := uint16(NoOwner)
				if k < active {
					o = uint16((p + k) % active)
				}
				b = append(b, byte(o), byte(o>>8))
			}
		}
		return b
	}
	a, j, l := byte(Active), byte(Joining), byte(Leaving)
	good := table(7, 2, 3)
	twice := append([]byte(nil), good...)
	twice[2], twice[3] = twice[0], twice[1]
	out := append([]byte(nil), good...)
	out[0] = 9
	return map[string]tableSeed{
		"seed-one":          {1, 7, 1, []byte{a}, table(7, 1, 1)},
		"seed-three":        {5, 7, 2, []byte{a, a, a}, good},
		"seed-joining":      {2, 7, 2, []byte{a, a, a, j}, good},
		"seed-leaving":      {3, 7, 3, []byte{a, l, a}, table(7, 3, 3)},
		"seed-under":        {4, 7, 3, []byte{a, a}, table(7, 3, 2)},
		"bad-out-of-range":  {5, 7, 2, []byte{a, a, a}, out},
		"bad-joining-owner": {5, 7, 2, []byte{a, a, j}, good},
		"bad-owner-twice":   {5, 7, 2, []byte{a, a, a}, twice},
		"bad-short":         {5, 7, 2, []byte{a, a, a}, good[:len(good)-2]},
		"bad-not-prime":     {5, 8, 2, []byte{a, a, a}, table(8, 2, 3)},
		"bad-epoch-0":       {0, 7, 2, []byte{a, a, a}, good},
	}
}

// tableOf turns a table seed's bytes into members (member i is "m<i>",
// sorted by name for up to 1000 members) and an owners table.
func tableOf(states, owners []byte) ([]Member, []uint16) {
	members := make([]Member, len(states))
	for i, st := range states {
		members[i] = Member{Name: fmt.Sprintf("m%03d", i), Addr: "a:1", State: State(st)}
	}
	table := make([]uint16, len(owners)/2)
	for i := range table {
		table[i] = uint16(owners[2*i]) | uint16(owners[2*i+1])<<8
	}
	return members, table
}

// FuzzFromTable checks FromTable, which rebuilds the ring a client
// routes with from the Topology any node it asks sends: it never
// panics, refuses with ErrTable, and a ring it accepts routes every
// viewer to Active or Leaving members it holds, and rebuilds from its own
// table to the same ring.
func FuzzFromTable(f *testing.F) {
	for _, s := range tableSeeds() {
		f.Add(s.epoch, s.partitions, s.replicas, s.states, s.owners)
	}
	f.Fuzz(func(t *testing.T, epoch uint64, partitions uint16, replicas uint8, states, owners []byte) {
		if len(states) > 300 {
			states = states[:300]
		}
		members, table := tableOf(states, owners)
		r, err := FromTable(epoch, int(partitions), int(replicas), members, table)
		if err != nil {
			if !errors.Is(err, ErrTable) {
				t.Fatalf("error does not wrap ErrTable: %v", err)
			}
			return
		}
		for p := range r.Partitions() {
			owners := r.Owners(p)
			if len(owners) == 0 && r.ActiveMembers() > 0 {
				t.Fatalf("partition %d has no owner with %d Active members", p, r.ActiveMembers())
			}
			for _, o := range owners {
				if int(o) >= len(r.Members()) || !r.Member(o).State.Owns() {
					t.Fatalf("partition %d owned by %d of %d members", p, o, len(r.Members()))
				}
			}
		}
		for _, v := range []string{"", "viewer-1", "зритель"} {
			r.Lookup(v)
		}
		again, err := FromTable(r.Epoch(), r.Partitions(), r.Replicas(), r.Members(), r.Table())
		if err != nil || !slices.Equal(again.Table(), r.Table()) || !slices.Equal(again.Members(), r.Members()) {
			t.Fatalf("an accepted ring does not rebuild from its own table: %v", err)
		}
	})
}

package engine_test

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/node/engine"
)

// populate writes a varied state: sliding, fixed and buckets counters,
// reservations, remembered ids, and a wide viewer.
func populate(t testing.TB, e *engine.Engine) []string {
	t.Helper()
	c := campaign("c", 3, 1000)
	f := fcap.Cap{Scope: "creative", ID: "f", Limit: 4, Window: 500 * time.Millisecond, Algorithm: fcap.Fixed}
	b := fcap.Cap{Scope: "advertiser", ID: "b", Limit: 9, Window: 700 * time.Millisecond, Algorithm: fcap.Buckets}
	var viewers []string
	for i := range 50 {
		v := fmt.Sprint("viewer-", i)
		viewers = append(viewers, v)
		for k := range i % 5 {
			e.Record(v, fcap.Impression{ID: fmt.Sprint(i, "-", k), Time: int64(100 + k*7), Caps: []fcap.Cap{c, f, b}})
		}
		if i%3 == 0 {
			e.Reserve(v, fcap.Candidate{Caps: []fcap.Cap{c}}, 130, 1000)
		}
		if i%4 == 0 {
			e.Allow(v, 140, campaign("other", 2, 100))
		}
	}
	wide := campaign("w", 4, fcap.MaxWindow.Milliseconds())
	e.Record("wide", fcap.Impression{ID: "x", Time: 1, Caps: []fcap.Cap{wide}})
	e.Record("wide", fcap.Impression{ID: "y", Time: 1 << 34, Caps: []fcap.Cap{wide}})
	return append(viewers, "wide")
}

func TestExportImportRoundTrip(t *testing.T) {
	src, dst := newEngine(t), newEngine(t)
	viewers := populate(t, src)
	var buf []byte
	src.Keys(func(k uint64) bool {
		buf = src.Export(k, buf)
		return true
	})
	for len(buf) > 0 {
		_, n, err := dst.Import(buf)
		if err != nil {
			t.Fatal(err)
		}
		buf = buf[n:]
	}
	// Bytes may differ: a replica's arenas are allocated to fit, without
	// the slack the source's grew with.
	if a, b := src.Stats(), dst.Stats(); a.Viewers != b.Viewers || a.Keys != b.Keys || b.Bytes > a.Bytes+a.Bytes/10 {
		t.Fatalf("stats differ: source %+v, replica %+v", a, b)
	}
	for _, v := range viewers {
		a, _ := src.Viewer(v)
		b, _ := dst.Viewer(v)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("%s differs:\nsource  %+v\nreplica %+v", v, a, b)
		}
	}
	// The replica answers like the source, and dedupes like it.
	cands := []fcap.Candidate{{Caps: []fcap.Cap{campaign("c", 3, 1000)}}}
	for _, v := range viewers {
		x, _ := src.Check(v, cands, 200, nil)
		y, _ := dst.Check(v, cands, 200, nil)
		if x[0] != y[0] {
			t.Fatalf("%s: source %+v, replica %+v", v, x[0], y[0])
		}
	}
	if st, _ := dst.Record("viewer-4", fcap.Impression{ID: "4-1", Time: 107, Caps: []fcap.Cap{campaign("c", 3, 1000)}}); st != fcap.Duplicate {
		t.Errorf("replica forgot a remembered impression id: %v", st)
	}
}

func TestImportReplacesAndAbsentDeletes(t *testing.T) {
	src, dst := newEngine(t), newEngine(t)
	c := campaign("c", 5, 1000)
	mustAllow(t, dst, "v", 0, true, c)
	mustAllow(t, dst, "v", 1, true, c)
	mustAllow(t, src, "v", 5, true, c)
	key := fcap.ViewerKey("v")
	if _, _, err := dst.Import(src.Export(key, nil)); err != nil {
		t.Fatal(err)
	}
	if vd := checkOne(t, dst, "v", 10, c); vd.Remaining != 4 {
		t.Fatalf("after import Remaining = %d, want 4: the import replaces, it does not add", vd.Remaining)
	}
	empty := newEngine(t)
	if _, _, err := dst.Import(empty.Export(key, nil)); err != nil {
		t.Fatal(err)
	}
	if _, ok := dst.Viewer("v"); ok || dst.Stats().Viewers != 0 || dst.Stats().Bytes != 0 {
		t.Fatalf("an absent state did not delete the viewer: %+v", dst.Stats())
	}
}

func TestImportRejectsBadStates(t *testing.T) {
	src := newEngine(t)
	populate(t, src)
	good := src.Export(fcap.ViewerKey("viewer-4"), nil)
	for name, mutate := range map[string]func([]byte) []byte{
		"empty":        func([]byte) []byte { return nil },
		"version":      func(b []byte) []byte { b[0] = 9; return b },
		"truncated":    func(b []byte) []byte { return b[:len(b)-3] },
		"huge arena":   func(b []byte) []byte { b[18], b[19], b[20], b[21] = 0xff, 0xff, 0xff, 0x7f; return b },
		"zero key":     func(b []byte) []byte { copy(b[1:9], make([]byte, 8)); return b },
		"bad counters": func(b []byte) []byte { b[22] = 0xff; return b },
	} {
		dst := newEngine(t)
		b := mutate(append([]byte(nil), good...))
		if _, _, err := dst.Import(b); !errors.Is(err, engine.ErrBadState) {
			t.Errorf("%s: err = %v, want ErrBadState", name, err)
		}
		if st := dst.Stats(); st.Viewers != 0 {
			t.Errorf("%s: a refused import stored state", name)
		}
	}
}

// importSeeds returns FuzzImport's seed inputs, by name: every viewer
// state populate leaves (each a peer could send in a Replicate), all of
// them concatenated (the way a Replicate carries them), an absent
// viewer, and the broken states TestImportRejectsBadStates refuses.
func importSeeds(t testing.TB) map[string][]byte {
	src := newEngine(t)
	viewers := populate(t, src)
	seeds := map[string][]byte{}
	var all []byte
	for _, v := range viewers {
		b := src.Export(fcap.ViewerKey(v), nil)
		seeds["seed-"+v] = b
		all = append(all, b...)
	}
	seeds["seed-all"] = all
	seeds["seed-absent"] = src.Export(fcap.ViewerKey("nobody"), nil)
	// Identity: a linked device (with impressions of its own) and a
	// viewer with a live device and an unlinked one.
	if _, err := src.Allow("fuzz-phone", 500, campaign("c", 5, 1000)); err != nil {
		t.Fatal(err)
	}
	st, _ := src.LinkDevice("fuzz-phone", "fuzz-person", 600, nil)
	src.AddDevice("fuzz-person", "fuzz-phone", 600, st, 8)
	st, _ = src.LinkDevice("fuzz-tv", "fuzz-person", 601, nil)
	src.AddDevice("fuzz-person", "fuzz-tv", 601, st, 8)
	src.UnlinkDevice("fuzz-tv", 700)
	src.RemoveDevice("fuzz-person", "fuzz-tv", 700)
	seeds["seed-linked-device"] = src.Export(fcap.ViewerKey("fuzz-phone"), nil)
	seeds["seed-person-with-devices"] = src.Export(fcap.ViewerKey("fuzz-person"), nil)
	good := seeds["seed-viewer-4"]
	seeds["bad-truncated"] = good[:len(good)-3]
	seeds["bad-huge-arena"] = append(append([]byte(nil), good[:18]...), 0xff, 0xff, 0xff, 0x7f)
	seeds["bad-version"] = append([]byte{9}, good[1:]...)
	seeds["bad-good-then-garbage"] = append(append([]byte(nil), good...), 1, 2, 3)
	return seeds
}

var updateCorpus = flag.Bool("update-corpus", false, "rewrite the seed corpus under testdata/fuzz")

// TestSeedCorpus checks the seed corpus checked in under
// testdata/fuzz/FuzzImport: every seed importSeeds names is there, the
// good ones import and the bad ones are refused (go test ./node/engine
// -run TestSeedCorpus -update-corpus rewrites it; reservation ids
// are random, so the bytes differ from run to run).
func TestSeedCorpus(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzImport")
	if *updateCorpus {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, input := range importSeeds(t) {
		path := filepath.Join(dir, name)
		if *updateCorpus {
			if err := os.WriteFile(path, fmt.Appendf(nil, "go test fuzz v1\n[]byte(%q)\n", input), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("%s is missing: go test ./node/engine -run TestSeedCorpus -update-corpus", path)
			continue
		}
		lit, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "go test fuzz v1\n[]byte(")
		data, err := strconv.Unquote(strings.TrimSuffix(lit, ")"))
		if !ok || err != nil {
			t.Errorf("%s: not a []byte corpus entry: %v", path, err)
			continue
		}
		_, _, err = newEngine(t).Import([]byte(data))
		if bad := strings.HasPrefix(name, "bad-") && name != "bad-good-then-garbage"; bad != (err != nil) {
			t.Errorf("%s: Import = %v", path, err)
		}
	}
}

// FuzzImport: whatever a peer sends in a Replicate, Import never panics;
// a state it refuses wraps ErrBadState and changes nothing; a state it
// accepts consumes a prefix of the input and exports back to a state
// that imports to the same bytes. The input is also read as a
// Replicate's concatenation of states (ImportAll): a bad one anywhere
// changes nothing.
func FuzzImport(f *testing.F) {
	for _, b := range importSeeds(f) {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		e := newEngine(t)
		key, n, err := e.Import(data)
		if err != nil {
			if !errors.Is(err, engine.ErrBadState) {
				t.Fatalf("Import error does not wrap ErrBadState: %v", err)
			}
			if st := e.Stats(); st.Viewers != 0 || st.Keys != 0 {
				t.Fatalf("a refused state was stored: %+v", st)
			}
		} else {
			if n <= 0 || n > len(data) {
				t.Fatalf("Import consumed %d of %d bytes", n, len(data))
			}
			again := e.Export(key, nil)
			e2 := newEngine(t)
			if _, m, err := e2.Import(again); err != nil || m != len(again) {
				t.Fatalf("re-import of an accepted state: %d of %d bytes, %v", m, len(again), err)
			}
			if string(e2.Export(key, nil)) != string(again) {
				t.Fatal("export is not stable across import")
			}
		}
		// The input as a Replicate's states: all applied, or none.
		before := e.Stats()
		if _, _, err := e.ImportAll(data, nil); err != nil {
			if !errors.Is(err, engine.ErrBadState) {
				t.Fatalf("ImportAll error does not wrap ErrBadState: %v", err)
			}
			if st := e.Stats(); st.Viewers != before.Viewers || st.Keys != before.Keys || st.Bytes != before.Bytes {
				t.Fatalf("a refused ImportAll changed the engine: %+v, was %+v", st, before)
			}
		}
		// The engine still works on what it holds.
		e.Check("x", []fcap.Candidate{{Caps: []fcap.Cap{campaign("c", 1, 10)}}}, 0, nil)
		e.Keys(func(k uint64) bool {
			if _, _, err := newEngine(t).Import(e.Export(k, nil)); err != nil {
				t.Fatalf("an imported viewer exports a state Import refuses: %v", err)
			}
			return true
		})
		e.Sweep(1 << 20)
	})
}

// TestImportAllIsAllOrNothing: a concatenation of states with a bad one
// anywhere changes nothing; without it every state is applied, and
// accept refuses states one by one.
func TestImportAllIsAllOrNothing(t *testing.T) {
	src := newEngine(t)
	viewers := populate(t, src)
	var all []byte
	for _, v := range viewers[:10] {
		all = src.Export(fcap.ViewerKey(v), all)
	}
	bad := append(append([]byte(nil), all...), 1, 2, 3)
	dst := newEngine(t)
	if _, _, err := dst.ImportAll(bad, nil); !errors.Is(err, engine.ErrBadState) {
		t.Fatalf("bad tail: err = %v, want ErrBadState", err)
	}
	if st := dst.Stats(); st.Viewers != 0 {
		t.Fatalf("a refused ImportAll stored %d viewers", st.Viewers)
	}
	skip := fcap.ViewerKey(viewers[1])
	applied, refused, err := dst.ImportAll(all, func(k uint64) bool { return k != skip })
	if err != nil || applied != 9 || refused != 1 {
		t.Fatalf("ImportAll = %d applied, %d refused, %v; want 9, 1, nil", applied, refused, err)
	}
	for _, v := range viewers[2:10] {
		k := fcap.ViewerKey(v)
		if string(dst.Export(k, nil)) != string(src.Export(k, nil)) {
			t.Errorf("%s: imported state differs", v)
		}
	}
	if _, ok := dst.Viewer(viewers[1]); ok {
		t.Errorf("%s was refused but imported", viewers[1])
	}
}

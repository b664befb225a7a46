package engine_test

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/fcap-io/fcap/node/engine"
)

// populate writes a varied state: sliding, fixed and buckets counters,
// reservations, remembered ids, and a wide viewer.
func populate(t testing.TB, e *engine.Engine) []string {
	t.Helper()
	c := campaign("c", 3, 1000)
	f := engine.Cap{Scope: "creative", ID: "f", Limit: 4, Window: 500, Algorithm: engine.Fixed}
	b := engine.Cap{Scope: "advertiser", ID: "b", Limit: 9, Window: 700, Algorithm: engine.Buckets}
	var viewers []string
	for i := range 50 {
		v := fmt.Sprint("viewer-", i)
		viewers = append(viewers, v)
		for k := range i % 5 {
			e.Record(v, engine.Impression{ID: fmt.Sprint(i, "-", k), Time: int64(100 + k*7), Caps: []engine.Cap{c, f, b}})
		}
		if i%3 == 0 {
			e.Reserve(v, engine.Candidate{Caps: []engine.Cap{c}}, 130, 1000)
		}
		if i%4 == 0 {
			e.Allow(v, 140, campaign("other", 2, 100))
		}
	}
	wide := campaign("w", 4, 1<<40)
	e.Record("wide", engine.Impression{ID: "x", Time: 1, Caps: []engine.Cap{wide}})
	e.Record("wide", engine.Impression{ID: "y", Time: 1 << 34, Caps: []engine.Cap{wide}})
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
	cands := []engine.Candidate{{Caps: []engine.Cap{campaign("c", 3, 1000)}}}
	for _, v := range viewers {
		x, _ := src.Check(v, cands, 200, nil)
		y, _ := dst.Check(v, cands, 200, nil)
		if x[0] != y[0] {
			t.Fatalf("%s: source %+v, replica %+v", v, x[0], y[0])
		}
	}
	if st, _ := dst.Record("viewer-4", engine.Impression{ID: "4-1", Time: 107, Caps: []engine.Cap{campaign("c", 3, 1000)}}); st != engine.Duplicate {
		t.Errorf("replica forgot a remembered impression id: %v", st)
	}
}

func TestImportReplacesAndAbsentDeletes(t *testing.T) {
	src, dst := newEngine(t), newEngine(t)
	c := campaign("c", 5, 1000)
	mustAllow(t, dst, "v", 0, true, c)
	mustAllow(t, dst, "v", 1, true, c)
	mustAllow(t, src, "v", 5, true, c)
	key := engine.ViewerKey("v")
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
	good := src.Export(engine.ViewerKey("viewer-4"), nil)
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

// FuzzImport: whatever a peer sends, Import never panics, and what it
// accepts exports back to an equal state.
func FuzzImport(f *testing.F) {
	src := newEngine(f)
	populate(f, src)
	src.Keys(func(k uint64) bool {
		f.Add(src.Export(k, nil))
		return true
	})
	f.Fuzz(func(t *testing.T, data []byte) {
		e := newEngine(t)
		key, n, err := e.Import(data)
		if err != nil {
			return
		}
		again := e.Export(key, nil)
		e2 := newEngine(t)
		if _, _, err := e2.Import(again); err != nil {
			t.Fatalf("re-import of an accepted state failed: %v", err)
		}
		if string(e2.Export(key, nil)) != string(again) {
			t.Fatal("export is not stable across import")
		}
		_ = n
		// The engine still works on that viewer.
		e.Check("x", []engine.Candidate{{Caps: []engine.Cap{campaign("c", 1, 10)}}}, 0, nil)
		e.Sweep(1 << 20)
	})
}

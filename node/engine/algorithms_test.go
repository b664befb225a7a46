package engine

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
)

// TestAlgorithmOps runs every operation of algorithms.go on a counter of
// every algorithm: a case missing for one panics here.
func TestAlgorithmOps(t *testing.T) {
	e, err := New(DefaultLocalConfig())
	if err != nil {
		t.Fatal(err)
	}
	const window, now, gone = 100, 60, 10_000
	for a := range fcap.NumAlgorithms {
		t.Run(a.String(), func(t *testing.T) {
			c := []fcap.Cap{{Scope: "campaign", ID: "c", Limit: 10, Window: window * time.Millisecond, Algorithm: a}}
			kh := []uint64{c[0].Key()}
			if w := newWords(a, window, e.cfg.Buckets); w < 0 || KeepsTimes(a) != (w == 0) {
				t.Errorf("newWords = %d for an algorithm that keeps times: %v", w, KeepsTimes(a))
			}
			var v viewer
			for _, at := range []int64{10, 50, 50} {
				e.record(&v, c, kh, at) // recordAt
			}
			counter := func(v *viewer) *header {
				t.Helper()
				i, ok := v.find(kh[0])
				if !ok {
					t.Fatal("no counter")
				}
				h := v.header(i)
				return &h
			}
			h := counter(&v)
			if n := v.count(h, now, window); n != 3 {
				t.Fatalf("count = %d, want 3", n)
			}
			if n := v.held(h); n != 3 {
				t.Errorf("held = %d, want 3", n)
			}
			k := KeyState{Algorithm: a}
			v.exportCounter(h, &k)
			if n := exported(&k); n != 3 {
				t.Errorf("exported %+v: %d impressions, want 3", k, n)
			}
			if size, err := v.checkCounter(0, h); err != nil || size != v.dataWords(h) {
				t.Errorf("checkCounter = %d, %v; want %d", size, err, v.dataWords(h))
			}
			before := digestOf(&v, h)
			if len(before) == 0 {
				t.Error("digestCounter fed nothing")
			}

			// Merging a copy twice unites it once; adding another
			// viewer's counter sums.
			var m viewer
			e.mergeCounter(&m, &v, h, -1)
			e.mergeCounter(&m, &v, h, -1)
			if n := m.count(counter(&m), now, window); n != 3 {
				t.Errorf("after merging a copy twice: count = %d, want 3", n)
			}
			if !slices.Equal(digestOf(&m, counter(&m)), before) {
				t.Error("a merged copy digests differently")
			}
			if n := e.addCounter(&m, &v, h); n != 3 {
				t.Errorf("addCounter = %d, want 3", n)
			}
			if n := m.count(counter(&m), now, window); n != 6 {
				t.Errorf("after adding: count = %d, want 6", n)
			}
			var floored viewer
			e.mergeCounter(&floored, &v, h, gone)
			if _, ok := floored.find(kh[0]); ok {
				t.Error("a merge above every impression's floor made a counter")
			}

			if v.uncount(0, h, gone) {
				t.Error("uncount took an impression it does not hold")
			}
			if !v.uncount(0, h, 50) {
				t.Fatal("uncount did not take an impression at 50")
			}
			h = counter(&v)
			if n := v.count(h, now, window); n != 2 {
				t.Errorf("after uncount: count = %d, want 2", n)
			}
			if slices.Equal(digestOf(&v, h), before) {
				t.Error("the digest did not change with the count")
			}
			if !v.live(0, h, now) {
				t.Error("not live while it counts")
			}
			if v.live(0, counter(&v), gone) {
				t.Error("live when nothing can count any more")
			}
		})
	}
}

// exported is how many impressions an exported counter holds.
func exported(k *KeyState) int64 {
	if KeepsTimes(k.Algorithm) {
		return int64(len(k.Values()))
	}
	var n int64
	for _, c := range k.Values() {
		n += c
	}
	return n
}

func digestOf(v *viewer, h *header) []uint64 {
	var words []uint64
	v.digestCounter(h, 60, func(w uint64) { words = append(words, w) })
	return words
}

// TestUnknownAlgorithmPanics checks that every operation refuses an
// algorithm it does not know loudly, rather than reading "used 0" or
// dropping the counter.
func TestUnknownAlgorithmPanics(t *testing.T) {
	e, err := New(DefaultLocalConfig())
	if err != nil {
		t.Fatal(err)
	}
	a := fcap.NumAlgorithms
	h := header{algo: a, window: 100}
	v := viewer{arena: make([]uint32, 64)}
	for name, op := range map[string]func(){
		"newWords":      func() { newWords(a, 100, 10) },
		"KeepsTimes":    func() { KeepsTimes(a) },
		"count":         func() { v.count(&h, 0, 100) },
		"recordAt":      func() { v.recordAt(0, &h, 0) },
		"uncount":       func() { v.uncount(0, &h, 0) },
		"live":          func() { v.live(0, &h, 0) },
		"held":          func() { v.held(&h) },
		"digestCounter": func() { v.digestCounter(&h, 0, func(uint64) {}) },
		"exportCounter": func() { v.exportCounter(&h, &KeyState{}) },
		"mergeCounter":  func() { e.mergeCounter(&viewer{}, &v, &h, -1) },
		"addCounter":    func() { e.addCounter(&viewer{}, &v, &h) },
		"checkCounter":  func() { v.checkCounter(0, &h) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic on %s", name, a)
				}
			}()
			op()
		}()
	}
}

// TestImportRefusesUnknownAlgorithm checks the edge that keeps unknown
// algorithms from the operations: an imported counter of one is a bad
// state, not a panic.
func TestImportRefusesUnknownAlgorithm(t *testing.T) {
	e, err := New(DefaultLocalConfig())
	if err != nil {
		t.Fatal(err)
	}
	c := []fcap.Cap{{Scope: "campaign", ID: "c", Limit: 10, Window: 100 * time.Millisecond, Algorithm: fcap.Fixed}}
	var v viewer
	e.record(&v, c, []uint64{c[0].Key()}, 10)
	if err := e.checkState(&v); err != nil {
		t.Fatalf("a good state: %v", err)
	}
	v.arena[hdrPos(0)+hWinHi] |= 3 << 30 // the header's algorithm bits: 3
	if v.header(0).algo < fcap.NumAlgorithms {
		t.Fatal("the test no longer makes an unknown algorithm")
	}
	if err := e.checkState(&v); !errors.Is(err, ErrBadState) {
		t.Fatalf("checkState = %v, want ErrBadState", err)
	}
}

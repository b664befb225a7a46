package engine_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// FuzzEngine decodes its input into a sequence of ops over the model
// catalogue (reference_test.go): each byte (or two or more, for larger
// choices) picks the clock's advance, the op, and the op's viewer,
// candidate, time and so on. It runs them on the engine and on the
// reference and fails at the first disagreement; the engine must never
// panic.
func FuzzEngine(f *testing.F) {
	f.Add([]byte{})
	// Every choice 0: v0 Allows k1+c1+a1 at time 0, over and over, until
	// the caps are full.
	f.Add(make([]byte, 64))
	// Model runs (TestEngineModel's driver on a PCG) of a few lengths,
	// recorded as the bytes that replay them.
	for _, run := range []struct {
		seed uint64
		ops  int
	}{{1, 30}, {2, 100}, {3, 300}, {4, 800}} {
		rec := &recordingChooser{src: randChooser{rand.New(rand.NewPCG(run.seed, 7))}}
		h := newModelHarness(f, fmt.Sprintf("recording fuzz seed %d", run.seed))
		for range run.ops {
			h.step(rec)
		}
		f.Add(rec.out)
	}
	// Noise.
	for _, n := range []int{64, 512} {
		r := rand.New(rand.NewPCG(uint64(n), 1))
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		h := newModelHarness(t, fmt.Sprintf("FuzzEngine, %d-byte input (replay: go test ./node/engine -run FuzzEngine/<corpus file name>)", len(data)))
		src := &byteChooser{data: data}
		for n := 0; !src.done() && n < 5000; n++ {
			h.step(src)
		}
		h.finish()
	})
}

// TestFuzzInputReplaysModelRun checks the fuzz encoding: a model run
// recorded as bytes and decoded by FuzzEngine's chooser makes the same
// ops with the same outcomes.
func TestFuzzInputReplaysModelRun(t *testing.T) {
	rec := &recordingChooser{src: randChooser{rand.New(rand.NewPCG(9, 9))}}
	h := newModelHarness(t, "recorded run")
	for range 500 {
		h.step(rec)
	}
	src := &byteChooser{data: rec.out}
	r := newModelHarness(t, "replayed run")
	for !src.done() {
		r.step(src)
	}
	if r.op != h.op || r.now != h.now || r.ref.hw != h.ref.hw || fmt.Sprint(r.tally) != fmt.Sprint(h.tally) {
		t.Fatalf("replay differs: %d ops to clock %d, hw %d, %v; recorded %d ops to clock %d, hw %d, %v",
			r.op, r.now, r.ref.hw, r.tally, h.op, h.now, h.ref.hw, h.tally)
	}
}

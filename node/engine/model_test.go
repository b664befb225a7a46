package engine_test

import (
	"flag"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"
)

var (
	modelSeedFlag  = flag.Uint64("model.seed", 0, "TestEngineModel: run only this seed (replays a failure)")
	modelSeedsFlag = flag.Int("model.seeds", 0, "TestEngineModel: also run this many seeds drawn from the clock")
	modelOpsFlag   = flag.Int("model.ops", 0, "TestEngineModel: ops per seed (0: the default)")
)

// modelSeeds are the seeds every run covers.
var modelSeeds = []uint64{1, 2, 3, 42, 0xfca9, 20261130, 7777777, 1 << 40}

// TestEngineModel runs long random op sequences on the engine and on a
// naive reference (reference_test.go), comparing every result. A failure
// prints its seed and the command that replays it.
func TestEngineModel(t *testing.T) {
	seeds, ops := modelSeeds, 5000
	if testing.Short() {
		seeds, ops = seeds[:2], 1500
	}
	if *modelOpsFlag > 0 {
		ops = *modelOpsFlag
	}
	for range *modelSeedsFlag {
		seeds = append(seeds, uint64(time.Now().UnixNano())^rand.Uint64())
	}
	if *modelSeedFlag != 0 {
		seeds = []uint64{*modelSeedFlag}
	}
	var mu sync.Mutex
	total := map[string]int{}
	t.Run("seeds", func(t *testing.T) {
		for _, seed := range seeds {
			t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
				t.Parallel()
				name := fmt.Sprintf("seed %d, %d ops (replay: go test ./node/engine -run TestEngineModel -model.seed=%d -model.ops=%d)", seed, ops, seed, ops)
				h := newModelHarness(t, name)
				src := randChooser{rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
				for range ops {
					h.step(src)
				}
				h.finish()
				mu.Lock()
				defer mu.Unlock()
				for k, n := range h.tally {
					total[k] += n
				}
			})
		}
	})
	for _, k := range slices.Sorted(maps.Keys(total)) {
		t.Logf("%-32s %d", k, total[k])
	}
	if t.Failed() || len(seeds)*ops < 20000 {
		return
	}
	// Runs that never reach these paths test less than they claim: the
	// generator has drifted.
	for _, k := range []string{
		"Allow granted", "Allow denied", "Check allowed", "Check denied",
		"Record recorded", "Record stale", "Redeliver duplicate", "Redeliver stale", "Redeliver recorded",
		"Reserve granted", "Reserve denied", "Confirm recorded", "Confirm dropped a reservation",
		"Release live", "Release expired", "Release unknown", "Sweep freed", "Invalid", "Jump far",
	} {
		if total[k] < 10 {
			t.Errorf("%d seeds of %d ops reached %q only %d times", len(seeds), ops, k, total[k])
		}
	}
}

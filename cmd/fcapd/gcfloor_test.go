package main

import (
	"sync"
	"testing"
)

func TestGCPercentFor(t *testing.T) {
	const mb = 1 << 20
	for _, c := range []struct {
		live, floor uint64
		want        int
	}{
		{16 * mb, 64 * mb, 400}, // a small heap may grow by the floor
		{10 * mb, 64 * mb, 640}, // rounded up: never under the floor
		{64 * mb, 64 * mb, 100}, // from here on, GOGC's default
		{2 << 30, 64 * mb, 100}, // a large heap is left alone
		{1 * mb, 64 * mb, 1600}, // the runtime's 4 MB minimum goal, scaled, is the floor
		{0, 64 * mb, 1600},      // nothing live yet: the same
		{0, 1 * mb, 100},        // a floor under the runtime's minimum changes nothing
	} {
		if got := gcPercentFor(c.live, c.floor); got != c.want {
			t.Errorf("gcPercentFor(%d, %d) = %d, want %d", c.live, c.floor, got, c.want)
		}
	}
}

// An operator's GOGC stands: the floor never overrides it.
func TestGCFloorLeavesAnOperatorsGOGC(t *testing.T) {
	gcFloorOnce = sync.Once{} // as at a process's start: -count=N runs it again
	startGCFloor(gcFloorBytes, func(k string) (string, bool) { return "50", k == "GOGC" })
	ran := false
	gcFloorOnce.Do(func() { ran = true })
	if !ran {
		t.Fatal("the floor started although GOGC was set")
	}
}

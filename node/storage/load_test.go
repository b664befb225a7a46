package storage

import (
	"encoding/binary"
	"sync"
	"testing"
)

// TestLoaderKeepsEachViewersOrder: whatever the number of goroutines,
// every payload is applied once, and a viewer's payloads are applied in
// the order they were given, so its last one stays (a replay's rule).
func TestLoaderKeepsEachViewersOrder(t *testing.T) {
	const keys, perKey = 97, 50
	payload := func(key uint64, seq uint32) []byte {
		p := make([]byte, 10, 22)
		p = binary.LittleEndian.AppendUint64(p, key)
		return binary.LittleEndian.AppendUint32(p, seq)
	}
	for _, workers := range []int{1, 2, 4, 7} {
		var mu sync.Mutex
		last := map[uint64]uint32{}
		applied := 0
		ld := newLoader(workers, func(p []byte) {
			mu.Lock()
			defer mu.Unlock()
			applied++
			if len(p) < 22 {
				return
			}
			key, seq := payloadKey(p), binary.LittleEndian.Uint32(p[18:])
			if prev, ok := last[key]; ok && seq <= prev {
				t.Errorf("%d workers: key %d: payload %d applied after %d", workers, key, seq, prev)
			}
			last[key] = seq
		})
		buf := make([]byte, 0, 64)
		for seq := range uint32(perKey) {
			for k := range uint64(keys) {
				// One buffer reused for every call, as the readers do.
				buf = append(buf[:0], payload(k*0x9e3779b97f4a7c15+1, seq)...)
				ld.add(buf)
			}
			if seq == perKey/2 {
				ld.add([]byte{1, 2, 3}) // too short to name a viewer
			}
		}
		ld.wait()
		if applied != keys*perKey+1 {
			t.Errorf("%d workers: applied %d payloads, gave %d", workers, applied, keys*perKey+1)
		}
		for k, seq := range last {
			if seq != perKey-1 {
				t.Errorf("%d workers: key %d ends at payload %d, want %d", workers, k, seq, perKey-1)
			}
		}
	}
}

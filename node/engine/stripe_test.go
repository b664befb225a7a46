package engine

import (
	"math/rand/v2"
	"testing"
)

// TestStripeTable drives one stripe's table through inserts and deletes
// in random order, with keys chosen to collide in long probe runs, and
// after every step checks that every live viewer is found at its slot and
// no removed one is (every few steps, to keep it quick).
func TestStripeTable(t *testing.T) {
	for seed := range uint64(12) {
		rng := rand.New(rand.NewPCG(seed, 0))
		var s stripe
		live := map[uint64]*viewer{}
		newKey := func() uint64 {
			// Few distinct home positions (high bits) make long runs
			// that wrap around the table.
			k := rng.Uint64N(8)<<32 | rng.Uint64N(1<<32) | 1<<63
			for live[k] != nil {
				k++
			}
			return k
		}
		for step := range 3000 {
			if len(live) == 0 || rng.IntN(5) < 3 {
				k := newKey()
				if s.lookup(k) != nil {
					t.Fatalf("seed %d step %d: key %x found before insert", seed, step, k)
				}
				v := s.add(k)
				v.arena = []uint32{0} // any non-zero state; not inspected
				live[k] = v
			} else {
				var k uint64
				for k = range live {
					break
				}
				v := s.lookup(k)
				if v == nil {
					t.Fatalf("seed %d step %d: live key %x not found", seed, step, k)
				}
				s.remove(slotOf(&s, v))
				delete(live, k)
				if s.lookup(k) != nil {
					t.Fatalf("seed %d step %d: removed key %x still found", seed, step, k)
				}
			}
			if s.count != len(live) {
				t.Fatalf("seed %d step %d: count %d, want %d", seed, step, s.count, len(live))
			}
			if step%7 != 0 {
				continue
			}
			for k := range live {
				if v := s.lookup(k); v == nil || v.key != k {
					t.Fatalf("seed %d step %d: key %x lost (table %d slots, %d live)", seed, step, k, len(s.table), len(live))
				}
			}
		}
	}
}

// slotOf finds the slot number of a viewer in its stripe.
func slotOf(s *stripe, v *viewer) uint32 {
	for c, ch := range s.chunks {
		if ch == nil {
			continue
		}
		for i := range ch {
			if &ch[i] == v {
				return uint32(c<<chunkBits | i)
			}
		}
	}
	panic("viewer not in stripe")
}

package engine

import "sync"

// A stripe holds the viewers whose hash falls in it, behind one lock. The
// viewers live by value in fixed-size chunks, found through an
// open-addressing table of slot numbers, so a viewer costs its struct and
// four bytes of table instead of a map entry, a pointer and an allocation.
// Slots are stable, which lets the sweeper walk a stripe by slot number a
// batch at a time.

const (
	chunkBits = 5
	chunkSize = 1 << chunkBits
)

type stripe struct {
	mu sync.Mutex
	// The fields below are guarded by mu.
	table  []uint32             // slot+1 of each viewer, 0 for empty; linear probing
	chunks []*[chunkSize]viewer // nil once every slot of a chunk is free
	live   []uint8              // live viewers per chunk
	free   []uint32             // free slots in allocated chunks
	count  int                  // live viewers
	keys   int                  // counters of those viewers
	bytes  int64                // estimated bytes of those viewers
	_      [64]byte             // keep stripes' locks off one cache line
}

func (s *stripe) slot(i uint32) *viewer {
	return &s.chunks[i>>chunkBits][i&(chunkSize-1)]
}

func (s *stripe) home(h uint64) int {
	return int(h>>32) & (len(s.table) - 1)
}

// lookup returns the viewer with key h, or nil.
func (s *stripe) lookup(h uint64) *viewer {
	_, v := s.find(h)
	return v
}

// find returns the viewer with key h and its slot, or nil.
func (s *stripe) find(h uint64) (uint32, *viewer) {
	if len(s.table) == 0 {
		return 0, nil
	}
	mask := len(s.table) - 1
	for p := s.home(h); ; p = (p + 1) & mask {
		e := s.table[p]
		if e == 0 {
			return 0, nil
		}
		if v := s.slot(e - 1); v.key == h {
			return e - 1, v
		}
	}
}

// add creates a viewer that lookup did not find. The caller accounts for
// its bytes.
func (s *stripe) add(h uint64) *viewer {
	if (s.count+1)*4 > len(s.table)*3 {
		s.resize(max(8, len(s.table)*2))
	}
	slot := s.allocSlot()
	v := s.slot(slot)
	v.key = h
	s.place(h, slot)
	s.count++
	return v
}

func (s *stripe) place(h uint64, slot uint32) {
	mask := len(s.table) - 1
	p := s.home(h)
	for s.table[p] != 0 {
		p = (p + 1) & mask
	}
	s.table[p] = slot + 1
}

func (s *stripe) allocSlot() uint32 {
	if n := len(s.free); n > 0 {
		slot := s.free[n-1]
		s.free = s.free[:n-1]
		s.live[slot>>chunkBits]++
		return slot
	}
	c := -1
	for i, ch := range s.chunks {
		if ch == nil {
			c = i
			break
		}
	}
	if c < 0 {
		c = len(s.chunks)
		s.chunks = append(s.chunks, nil)
		s.live = append(s.live, 0)
	}
	s.chunks[c] = new([chunkSize]viewer)
	base := uint32(c) << chunkBits
	for i := uint32(chunkSize - 1); i > 0; i-- {
		s.free = append(s.free, base+i)
	}
	s.live[c] = 1
	return base
}

// remove frees a viewer's slot. The caller has accounted for its bytes.
func (s *stripe) remove(slot uint32) {
	mask := len(s.table) - 1
	p := s.home(s.slot(slot).key)
	for s.table[p] != slot+1 {
		p = (p + 1) & mask
	}
	// Backward-shift deletion: pull later entries of the probe run into
	// the hole so lookups never need tombstones.
	for q := (p + 1) & mask; s.table[q] != 0; q = (q + 1) & mask {
		e := s.table[q]
		home := s.home(s.slot(e - 1).key)
		if (q-home)&mask >= (q-p)&mask {
			s.table[p] = e
			p = q
		}
	}
	s.table[p] = 0

	*s.slot(slot) = viewer{}
	s.count--
	c := slot >> chunkBits
	s.live[c]--
	if s.live[c] == 0 {
		s.chunks[c] = nil
		kept := s.free[:0]
		for _, f := range s.free {
			if f>>chunkBits != c {
				kept = append(kept, f)
			}
		}
		s.free = kept
	} else {
		s.free = append(s.free, slot)
	}
	if len(s.table) > 8 && s.count*8 < len(s.table) {
		s.resize(len(s.table) / 2)
	}
}

// resize rebuilds the table with n slots (a power of two).
func (s *stripe) resize(n int) {
	s.table = make([]uint32, n)
	for c, ch := range s.chunks {
		if ch == nil {
			continue
		}
		for i := range ch {
			if ch[i].key != 0 {
				s.place(ch[i].key, uint32(c<<chunkBits|i))
			}
		}
	}
}

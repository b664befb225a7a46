package engine

import (
	"fmt"
	"slices"

	"github.com/fcap-io/fcap"
)

// Retired regions (ARCHITECTURE.md, "Strict caps: escrow", "Reclaim").
// An operator retires a region lost for good (fcapctl region retire): it
// grants and lends nothing after the retire's time T0 on this region's
// clock. What it granted before T0 counts until T0+W, and a unit it lent
// before T0 may make a grant at the borrower until T0+W that counts
// until T0+2W: its base units are free for a strict cap of window W from
// T0+2W on (T0+W for a cap of a window too long to lend, which has no
// loans). Until then the region keeps the old split, the retired
// region's base unused.
//
// Where a free unit goes: unit u of L belongs to region o = (rot+u) mod
// k (the static split, Base). Each unit has a list of heirs, the other
// regions in the order after o, starting at an offset that turns with
// u div k, so that a retired region's units spread evenly over the
// others. A unit belongs to the first region of its list (o, then its
// heirs) that is not free of it. A region keeps every unit it held as
// more regions retire (the first region of a list that is not retired
// stays the first when another retires), so bases only grow, and as
// long as only regions really gone are retired, a unit belongs to at
// most one remaining region whatever each remaining region retired
// and when: a unit held by r and by s, r before s on its list, would
// make r retired at s.

// retirement is a retired region: its index in the sorted set, and T0.
type retirement struct {
	index int
	at    int64
}

// Retire marks the region at index in the sorted set retired as of at
// (this region's clock, milliseconds). A region already retired keeps
// its first time; this region cannot be retired. Safe for concurrent
// use with every engine call.
func (s *Shares) Retire(index int, at int64) error {
	switch {
	case index < 0 || index >= s.Regions:
		return fmt.Errorf("%w: retire region %d of %d", fcap.ErrInvalid, index, s.Regions)
	case index == s.Index:
		return fmt.Errorf("%w: a region cannot retire itself", fcap.ErrInvalid)
	}
	for {
		old := s.retired.Load()
		var cur []retirement
		if old != nil {
			if slices.ContainsFunc(*old, func(r retirement) bool { return r.index == index }) {
				return nil
			}
			cur = slices.Clone(*old)
		}
		cur = append(cur, retirement{index: index, at: at})
		if s.retired.CompareAndSwap(old, &cur) {
			return nil
		}
	}
}

// RetiredAt returns when the region at index was retired, and whether
// it was.
func (s *Shares) RetiredAt(index int) (int64, bool) {
	if rs := s.retired.Load(); rs != nil {
		for _, r := range *rs {
			if r.index == index {
				return r.at, true
			}
		}
	}
	return 0, false
}

// gone returns which regions' units are free for c at now (indexed by
// region), or nil when none is.
func (s *Shares) gone(c *fcap.Cap, now int64) []bool {
	rs := s.retired.Load()
	if rs == nil {
		return nil
	}
	hold := 2 * c.WindowMillis() // the retired region's loans: 2W
	if c.Window > MaxEscrowWindow {
		hold = c.WindowMillis() // it lent none
	}
	var gone []bool
	for _, r := range *rs {
		if now >= r.at+hold {
			if gone == nil {
				gone = make([]bool, s.Regions)
			}
			gone[r.index] = true
		}
	}
	return gone
}

// inherited counts the units of a limit that belong to this region
// when the regions in gone are free of theirs: those of the static split
// whose region is not gone, and the units of gone regions whose first
// heir not gone is this region. The units of residue a (u mod k = a)
// are u = a + m*k for m below M_a; unit m of them turns its heirs by
// m mod (k-1), so the count of each turn is arithmetic. O(k) per region
// not gone, O(k^2) per gone one.
func (s *Shares) inherited(rot, limit int64, gone []bool) int64 {
	k := int64(s.Regions)
	var n int64
	for a := range k {
		ma := limit / k
		if a < limit%k {
			ma++
		}
		o := (rot + a) % k
		if !gone[o] {
			if o == int64(s.Index) {
				n += ma
			}
			continue
		}
		for t := range k - 1 {
			if s.heir(o, t, gone) != int64(s.Index) {
				continue
			}
			n += ma / (k - 1)
			if t < ma%(k-1) {
				n++
			}
		}
	}
	return n
}

// heir is the first region not gone among the heirs of a unit of region
// o turned by t: o+1+t, o+1+t+1, ... over the k-1 others. This region
// is never gone, so there is one.
func (s *Shares) heir(o, t int64, gone []bool) int64 {
	k := int64(s.Regions)
	for j := range k - 1 {
		r := (o + 1 + (t+j)%(k-1)) % k
		if !gone[r] {
			return r
		}
	}
	return int64(s.Index) // unreachable: this region is not gone
}

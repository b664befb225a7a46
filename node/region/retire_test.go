package region

import (
	"errors"
	"slices"
	"testing"
	"time"
)

// TestRetireStopsTheLinkAndLeavesTheRegionOut: retiring a lost peer
// region (it never answers) stops its link: asks go only to the others
// and name the regions without it, its requests are refused, status
// says retired since T0, and a region that names the same set agrees.
// A reachable region is refused without force, this region and a name
// that is no peer always; a second retire keeps the first T0.
func TestRetireStopsTheLinkAndLeavesTheRegionOut(t *testing.T) {
	f := newFakeLenders(t, map[string]int{"b": 4, "c": 10})
	f.hang["c"] = true
	ls, credits := escrowLinks(t, f, 0, nil, func(c *Config) {
		c.Timeout = 100 * time.Millisecond
	})
	eventually(t, "b reachable, c not", func() bool {
		st := ls.Status()
		return st[0].Reachable && !st[1].Reachable
	})
	for _, tc := range []struct {
		name string
		want error
	}{{"a", ErrNotPeer}, {"zz", ErrNotPeer}, {"b", ErrReachable}} {
		if _, _, err := ls.Retire(tc.name, 1, false); !errors.Is(err, tc.want) {
			t.Errorf("retire %s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if at, first, err := ls.Retire("c", 500, false); err != nil || !first || at != 500 {
		t.Fatalf("retire c: %d %v %v", at, first, err)
	}
	if at, first, err := ls.Retire("c", 900, false); err != nil || first || at != 500 {
		t.Fatalf("retire c again: %d %v %v, want the first T0 500", at, first, err)
	}
	if got := ls.LiveRegions(); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("live regions %v", got)
	}
	st := ls.Status()
	if !st[1].Retired || st[1].RetiredAt != 500 || st[1].Reachable || st[0].Retired {
		t.Errorf("status after retiring c: %+v", st)
	}
	f.mu.Lock()
	f.hang["c"], f.hangAsk["c"] = false, true // an ask to c would be seen now
	askedC := f.asked["c"]
	f.mu.Unlock()
	for i := range 8 {
		ls.Ask(string(rune('p'+i)), escrowCap)
	}
	// b lends its 4; the other asks find no unit at b and must not try c.
	eventually(t, "every ask done", func() bool {
		ls.escrow.mu.Lock()
		defer ls.escrow.mu.Unlock()
		return len(ls.escrow.asking) == 0 && len(credits()) == 4
	})
	f.mu.Lock()
	if f.asked["c"] != askedC {
		t.Errorf("the retired region was asked %d times after its retire", f.asked["c"]-askedC)
	}
	if last := f.regions[len(f.regions)-1]; !slices.Equal(last, []string{"a", "b"}) {
		t.Errorf("an ask named the regions %v, want the retired one left out", last)
	}
	f.mu.Unlock()
	if err := ls.CheckRegions("c", []string{"a", "b", "c"}); err == nil {
		t.Error("a request from the retired region was taken")
	}
	if err := ls.CheckFrom("c"); err == nil {
		t.Error("a merge from the retired region was taken")
	}
	if err := ls.CheckRegions("b", []string{"a", "b"}); err != nil {
		t.Errorf("a region that retired c too was refused: %v", err)
	}
	if err := ls.CheckRegions("b", []string{"a", "b", "c"}); err == nil {
		t.Error("a region that has not retired c was taken: the sets differ")
	}
	ls.Mark(42)
	if st := ls.Status(); st[1].Queue != 0 {
		t.Errorf("a change was queued for the retired region: %+v", st[1])
	}
	if _, _, err := ls.Retire("b", 600, true); err != nil {
		t.Errorf("a forced retire of a reachable region: %v", err)
	}
}

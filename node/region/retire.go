package region

import (
	"fmt"
	"slices"
)

// Retired regions (ARCHITECTURE.md, "Strict caps: escrow", "Reclaim").
// An operator retires a peer region lost for good (fcapctl region
// retire): its link stops for good (nothing shipped, nothing asked, its
// queue dropped), its merges, asks and topology requests are refused,
// and the set of regions this region names to the others, and checks
// theirs against, leaves it out, so two regions that both retired it
// agree. The shares it held are the engine's business (engine.Shares).

// Retire marks the peer region name retired as of at (the node's clock,
// milliseconds). It refuses this node's own region, a name that is not
// a configured peer region, and, unless force, a region the link
// reaches now. A region already retired keeps its first time: first
// says whether this call retired it.
func (ls *Links) Retire(name string, at int64, force bool) (since int64, first bool, err error) {
	l := ls.link(name)
	if l == nil {
		return 0, false, fmt.Errorf("%w: %q (peer regions: %v)", ErrNotPeer, name, ls.peerNames())
	}
	ls.retireMu.Lock()
	defer ls.retireMu.Unlock()
	if l.retired.Load() {
		return l.retiredAt.Load(), false, nil
	}
	if !force && l.up.Load() {
		return 0, false, fmt.Errorf("%w: %q answered the link's last round; retire only a region lost for good (or force it)", ErrReachable, name)
	}
	l.retiredAt.Store(at)
	l.retired.Store(true)
	l.up.Store(false)
	live := slices.DeleteFunc(slices.Clone(*ls.live.Load()), func(r string) bool { return r == name })
	ls.live.Store(&live)
	ls.log.Warn("region: peer region retired by an operator: its link stops, its requests are refused, and its shares of strict caps go to the remaining regions once its last grants and loans aged out",
		"peer_region", name, "since_ms", at, "regions", live)
	select {
	case l.kick <- struct{}{}: // the shipper stops now
	default:
	}
	return at, true, nil
}

// Retired returns when the peer region name was retired, and whether
// it was.
func (ls *Links) Retired(name string) (int64, bool) {
	if l := ls.link(name); l != nil && l.retired.Load() {
		return l.retiredAt.Load(), true
	}
	return 0, false
}

// LiveRegions are the regions strict caps are split among as this node
// names them to the other regions: Config.Regions less the retired ones.
func (ls *Links) LiveRegions() []string { return *ls.live.Load() }

// CheckFrom refuses a request from a retired region (a RegionMerge):
// one retired by mistake that comes back must not be taken in.
func (ls *Links) CheckFrom(from string) error {
	if at, ok := ls.Retired(from); ok {
		return fmt.Errorf("region %s was retired here by an operator (since %d ms): its requests are refused", from, at)
	}
	return nil
}

func (ls *Links) link(name string) *Link {
	for _, l := range ls.links {
		if l.peer.Name == name {
			return l
		}
	}
	return nil
}

func (ls *Links) peerNames() []string {
	names := make([]string, len(ls.links))
	for i, l := range ls.links {
		names[i] = l.peer.Name
	}
	return names
}

// park ends a retired link's shipper: what waits is dropped (the region
// is gone), and the shipper returns.
func (l *Link) park() {
	l.retry = nil
	for l.q.len() > 0 {
		l.q.take(nil, l.q.len())
	}
	l.pending.Store(0)
	l.up.Store(false) // a round that ended after Retire may have set it
	l.log.Info("region link: stopped: the peer region was retired")
}

package region

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/proto"
	"github.com/fcap-io/fcap/ring"
)

// Escrowed strict caps (ARCHITECTURE.md, "Strict caps: escrow"). A
// region whose share of a strict cap is spent for a viewer asks the
// viewer's owners in the peer regions for one unused unit, apart from
// the request that found it spent (that one has failed closed already):
// Links.Ask queues the ask (at most one per viewer and cap, a bounded
// table), a few askers send ShareAsks, one peer region after another,
// and the first unit given is credited to the viewer here
// (EscrowDeps.Credit), stamped when the ask began. A transfer keeps its
// id across its retries: the lender answers a retried id with the same
// loan, never a second one.

// DefaultMaxAsks bounds the asks waiting or in flight.
const DefaultMaxAsks = 4096

// askers is the number of goroutines sending asks.
const askers = 4

// askAttempts is how many times one transfer is sent to a region before
// the asker gives it up (its loan, if the lender made one, ages out
// unused: fewer grants, never more).
const askAttempts = 3

// EscrowDeps are what the askers need of the node.
type EscrowDeps struct {
	// Now is the engine's clock (milliseconds): the time an ask begins,
	// which stamps the credit it brings.
	Now func() int64
	// Credit records, and replicates to the viewer's backups, the unit
	// a peer region lent for transfer, stamped at.
	Credit func(ctx context.Context, viewer string, c fcap.Cap, at int64, transfer uint64) error
	// MaxAsks bounds the asks waiting or in flight; 0: DefaultMaxAsks.
	MaxAsks int
}

// Regions returns the sorted set of region names strict caps are split
// among: this region and its peers.
func (c *Config) Regions() []string {
	names := []string{c.Name}
	for _, p := range c.Peers {
		names = append(names, p.Name)
	}
	slices.Sort(names)
	return names
}

// askKey names an ask: one per viewer and cap.
// moved are the units of shares moved between this node and a peer
// region.
type moved struct{ lent, borrowed atomic.Uint64 }

type askKey struct {
	viewer, cap uint64
	window      int64
}

type ask struct {
	key    askKey
	viewer string
	cap    fcap.Cap
}

// escrow holds the askers' state.
type escrow struct {
	ls    *Links
	deps  EscrowDeps
	ch    chan ask
	rings []*askRing // per link, in the order of ls.links

	borrowed, lent, dropped *prometheus.CounterVec
	mismatch                prometheus.Counter
	// moved counts the units lent to and borrowed from each peer region,
	// by its name, for status.
	moved map[string]*moved

	mu sync.Mutex
	// asking holds the asks waiting or in flight, guarded by mu.
	asking map[askKey]struct{}
}

// askRing is the askers' copy of a peer region's ring, apart from the
// shipper's (which belongs to its goroutine).
type askRing struct {
	mu sync.Mutex
	// r is the ring, guarded by mu; nil until first fetched. fetched is
	// when (the link's clock): it is learned again after
	// TopologyInterval, as the shipper's is.
	r       *ring.Ring
	fetched time.Time
}

// EnableEscrow starts the askers; regions (Config.Regions) are the set
// the region splits strict caps among. Call it once, before Start, on
// links with peers; Close stops them.
func (ls *Links) EnableEscrow(deps EscrowDeps, reg prometheus.Registerer) error {
	if !ls.cfg.Enabled() {
		return fmt.Errorf("region: escrow needs peer regions")
	}
	if deps.MaxAsks <= 0 {
		deps.MaxAsks = DefaultMaxAsks
	}
	es := &escrow{ls: ls, deps: deps, ch: make(chan ask, deps.MaxAsks), asking: map[askKey]struct{}{}}
	es.borrowed = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fcap_region_shares_borrowed_total",
		Help: "Units of strict caps' shares peer regions lent this node's region, by lending region."}, []string{"region"})
	es.lent = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fcap_region_shares_lent_total",
		Help: "Units of strict caps' shares this node lent peer regions, by borrowing region (a retried transfer counts once)."}, []string{"region"})
	es.dropped = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fcap_region_share_asks_total",
		Help: "Asks for share by outcome: given, none (no peer region had a unit), failed (no peer region answered), dropped (the table of asks was full)."}, []string{"outcome"})
	es.mismatch = prometheus.NewCounter(prometheus.CounterOpts{Name: "fcap_region_set_mismatch_total",
		Help: "Share asks refused because the asking region names another set of regions: strict caps' shares would not sum to their limits. Fix the configuration."})
	if reg != nil {
		for _, c := range []prometheus.Collector{es.borrowed, es.lent, es.dropped, es.mismatch} {
			if err := reg.Register(c); err != nil {
				return err
			}
		}
	}
	es.moved = map[string]*moved{}
	for _, l := range ls.links {
		es.rings = append(es.rings, &askRing{})
		es.moved[l.peer.Name] = &moved{}
	}
	ls.escrow = es
	for range askers {
		ls.wg.Go(es.run)
	}
	return nil
}

// Ask queues an ask for one unit of the strict cap c of viewer, unless
// one is waiting or in flight for them, or the table is full (counted).
// It never blocks.
func (ls *Links) Ask(viewer string, c fcap.Cap) {
	es := ls.escrow
	if es == nil {
		return
	}
	k := askKey{viewer: fcap.ViewerKey(viewer), cap: c.Key(), window: c.WindowMillis()}
	es.mu.Lock()
	if _, ok := es.asking[k]; ok {
		es.mu.Unlock()
		return
	}
	if len(es.asking) >= es.deps.MaxAsks {
		es.mu.Unlock()
		es.dropped.WithLabelValues("dropped").Inc()
		return
	}
	es.asking[k] = struct{}{}
	es.mu.Unlock()
	es.ch <- ask{key: k, viewer: viewer, cap: c} // room: ch holds MaxAsks, asking bounds what is in it
}

// CheckRegions refuses a link or an ask from a region that splits strict
// caps among another set of regions than this one does; it logs and
// counts.
func (ls *Links) CheckRegions(from string, regions []string) error {
	es := ls.escrow
	if es == nil {
		ls.log.Error("region: a peer region counts this region among those that split strict caps, but it has no peer regions (--peer-region) and grants them whole; its link is refused until every region lists every other",
			"peer_region", from, "its_regions", regions)
		return fmt.Errorf("region %s lends no share and splits nothing: it has no peer regions (region %s splits among %v; list every region as a peer of every other)", ls.cfg.Name, from, regions)
	}
	if err := ls.CheckFrom(from); err != nil {
		return err
	}
	// Both sides leave the regions they retired out (retire.go): two
	// regions that retired the same one agree; one that did not yet is
	// refused until it does (fewer grants meanwhile, never more).
	if ours := ls.LiveRegions(); !slices.Equal(regions, ours) {
		es.mismatch.Inc()
		ls.log.Error("region: a peer region splits strict caps among another set of regions; its link and its asks are refused until the configurations (and retired regions) agree",
			"peer_region", from, "its_regions", regions, "our_regions", ours)
		return fmt.Errorf("region %s splits strict caps among %v, region %s among %v: shares would not sum to the limits", from, regions, ls.cfg.Name, ours)
	}
	return nil
}

// Lent counts a unit lent to region.
func (ls *Links) Lent(region string) {
	if es := ls.escrow; es != nil {
		es.lent.WithLabelValues(region).Inc()
		if m := es.moved[region]; m != nil {
			m.lent.Add(1)
		}
	}
}

// SharesMoved returns the units this node lent the peer region and
// borrowed from it since it started.
func (ls *Links) SharesMoved(region string) (lent, borrowed uint64) {
	if es := ls.escrow; es != nil {
		if m := es.moved[region]; m != nil {
			return m.lent.Load(), m.borrowed.Load()
		}
	}
	return 0, 0
}

// run sends asks until the links close. Its connections are its own.
func (es *escrow) run() {
	conns := map[string]Conn{}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for {
		select {
		case <-es.ls.stop:
			return
		case a := <-es.ch:
			es.serve(conns, a)
			es.mu.Lock()
			delete(es.asking, a.key)
			es.mu.Unlock()
		}
	}
}

// serve asks the peer regions in turn for a unit of a's cap, and
// credits the first given: those its link reaches first (a region cut
// off would hold the ask for its timeouts), each group from one chosen
// by the viewer, so that asks spread.
func (es *escrow) serve(conns map[string]Conn, a ask) {
	at := es.deps.Now()
	n := len(es.ls.links)
	first := int(a.key.viewer % uint64(n))
	order := make([]int, 0, n)
	for _, up := range []bool{true, false} {
		for i := range n {
			if li := (first + i) % n; es.ls.links[li].up.Load() == up && !es.ls.links[li].retired.Load() {
				order = append(order, li)
			}
		}
	}
	n = len(order) // a retired region is asked nothing
	failed := 0
	for _, li := range order {
		l := es.ls.links[li]
		transfer := rand.Uint64() | 1
		given, err := es.askRegion(conns, li, a, transfer)
		if err != nil {
			failed++
			l.log.Debug("region: share ask failed", "viewer_key", a.key.viewer, "err", err)
			continue
		}
		if !given {
			continue
		}
		ctx, cancel := context.WithTimeout(es.ls.ctx, es.ls.cfg.Timeout)
		err = es.deps.Credit(ctx, a.viewer, a.cap, at, transfer)
		cancel()
		if err != nil {
			// The loan ages out at the lender unused: fewer grants.
			l.log.Warn("region: a unit lent by the peer region could not be credited here", "err", err)
			es.dropped.WithLabelValues("failed").Inc()
			return
		}
		es.borrowed.WithLabelValues(l.peer.Name).Inc()
		es.moved[l.peer.Name].borrowed.Add(1)
		es.dropped.WithLabelValues("given").Inc()
		return
	}
	if failed == n && n > 0 {
		es.dropped.WithLabelValues("failed").Inc()
	} else {
		es.dropped.WithLabelValues("none").Inc()
	}
}

// askRegion sends one transfer to the owner of a's viewer in the peer
// region of link li, up to askAttempts times (the same id each time),
// learning the region's ring again when it is missing or the owner
// refuses the viewer.
func (es *escrow) askRegion(conns map[string]Conn, li int, a ask, transfer uint64) (bool, error) {
	l, rr := es.ls.links[li], es.rings[li]
	req := &proto.ShareAsk{Region: es.ls.cfg.Name, Regions: es.ls.LiveRegions(), Viewer: a.viewer, Cap: a.cap, Transfer: transfer}
	var errs []error
	relearned := false
	for range askAttempts {
		r, err := rr.get(l, false)
		if err != nil {
			return false, err
		}
		_, owners := r.LookupKey(a.key.viewer)
		if len(owners) == 0 {
			// A ring learned from a node that had just restarted (alone,
			// joining) owns nothing. Kept, it failed every ask to the
			// region until this node restarted: learn it again.
			errs = append(errs, fmt.Errorf("region %s: no owner for the viewer in its ring %016x", l.peer.Name, r.Epoch()))
			if relearned {
				return false, errors.Join(errs...) // once an ask: a region with no owner at all is restarting
			}
			relearned = true
			rr.get(l, true)
			continue
		}
		addr := r.Member(owners[0]).Addr
		given, err := es.call(conns, addr, req)
		if err == nil {
			return given, nil
		}
		errs = append(errs, err)
		var pe *proto.Error
		if errors.As(err, &pe) {
			if pe.Code != proto.CodeNotOwner && pe.Code != proto.CodeOverloaded {
				return false, err // a refusal that a retry does not change
			}
			if pe.Code == proto.CodeNotOwner {
				rr.get(l, true)
			}
		}
		select {
		case <-es.ls.stop:
			return false, errors.Join(errs...)
		default:
		}
	}
	return false, errors.Join(errs...)
}

// call sends req to the node at addr on this asker's connection to it.
func (es *escrow) call(conns map[string]Conn, addr string, req *proto.ShareAsk) (bool, error) {
	ctx, cancel := context.WithTimeout(es.ls.ctx, es.ls.cfg.Timeout)
	defer cancel()
	c := conns[addr]
	if c == nil {
		var err error
		if c, err = es.ls.links[0].deps.Dialer.Dial(ctx, addr); err != nil {
			return false, err
		}
		conns[addr] = c
	}
	var res proto.ShareGive
	if err := callOn(ctx, c, req, &res); err != nil {
		var pe *proto.Error
		if !errors.As(err, &pe) {
			c.Close()
			delete(conns, addr)
		}
		return false, err
	}
	return res.Given, nil
}

// get returns the peer region's ring, fetching it when there is none or
// fresh is asked for.
func (rr *askRing) get(l *Link, fresh bool) (*ring.Ring, error) {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	if rr.r != nil && !fresh && l.deps.Clock().Sub(rr.fetched) < l.cfg.TopologyInterval {
		return rr.r, nil
	}
	r, _, err := l.fetchRing(rr.r)
	if err == nil {
		rr.r, rr.fetched = r, l.deps.Clock()
		return r, nil
	}
	if rr.r != nil {
		return rr.r, nil
	}
	return nil, err
}

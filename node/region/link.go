package region

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fcap-io/fcap/proto"
	"github.com/fcap-io/fcap/ring"
)

// Link ships this node's changed viewers to one peer region.
type Link struct {
	cfg     Config
	peer    Peer
	deps    Deps
	log     *slog.Logger
	metrics linkMetrics
	ctx     context.Context // done once the links close
	stop    <-chan struct{}

	q       *queue
	kick    chan struct{} // a batch is waiting: ship before the interval
	catchUp chan struct{} // a change overflowed, or a restart asks for a catch-up
	dg      digestState   // the digest catch-up's (digest.go)

	up      atomic.Bool
	pending atomic.Int64 // when the oldest viewer taken but not acknowledged was marked (Unix ns); 0: none

	// retired says an operator retired the peer region (retire.go), as
	// of retiredAt (the node's clock, ms): the link stops for good.
	retired   atomic.Bool
	retiredAt atomic.Int64
	regions   func() []string // the regions named to the peer: Links.LiveRegions

	// The fields below belong to the shipper goroutine.
	ring     *ring.Ring
	fetched  time.Time // when ring was fetched
	stale    bool      // a refusal or an epoch says ring is behind
	owners   map[string]*owner
	retry    []entry
	failures int // shipping rounds failed in a row
}

// owner is a peer-region node the shipper sends to.
type owner struct {
	addr string
	conn Conn
	// What one round sent it, written by the round's goroutine for it.
	failed  []entry // not acknowledged: retried
	refused []entry // not its to merge: retried after a topology refresh
	applied int
	epoch   uint64
	err     error
}

func newLink(cfg Config, p Peer, deps Deps, ctx context.Context, stop <-chan struct{}) *Link {
	return &Link{
		cfg: cfg, peer: p, deps: deps, ctx: ctx, stop: stop,
		log:     deps.Logger.With("peer_region", p.Name),
		q:       newQueue(cfg.QueueViewers),
		kick:    make(chan struct{}, 1),
		catchUp: make(chan struct{}, 1),
		owners:  map[string]*owner{},
	}
}

func (l *Link) nowNanos() int64 { return l.deps.Clock().UnixNano() }

// mark queues key; past the bound it counts the change and asks for a
// catch-up.
func (l *Link) mark(key uint64) {
	if !l.q.add(key, l.nowNanos) {
		l.metrics.overflow.Inc()
		l.requestCatchUp()
		return
	}
	if l.q.len() >= l.cfg.BatchViewers {
		select {
		case l.kick <- struct{}{}:
		default:
		}
	}
}

func (l *Link) requestCatchUp() {
	select {
	case l.catchUp <- struct{}{}:
	default:
	}
}

// lag is the age of the oldest change not acknowledged.
func (l *Link) lag() time.Duration {
	oldest := l.q.oldest()
	if p := l.pending.Load(); p != 0 && (oldest == 0 || p < oldest) {
		oldest = p
	}
	if oldest == 0 {
		return 0
	}
	return max(0, time.Duration(l.nowNanos()-oldest))
}

// ship is the shipper: every BatchInterval (sooner when a batch waits)
// it takes what failed last time and what waits, and sends it; after a
// round that left anything to retry it backs off.
func (l *Link) ship() {
	defer l.closeConns()
	var batch []entry
	for {
		if l.retired.Load() {
			l.park()
			return
		}
		batch = append(batch[:0], l.retry...)
		l.retry = l.retry[:0]
		batch = l.q.take(batch, max(0, l.cfg.BatchViewers-len(batch)))
		reached, clean := true, true
		if len(batch) == 0 {
			reached = l.idle()
			clean = reached
		} else {
			l.pending.Store(oldestOf(batch))
			reached = l.round(batch)
			clean = reached && len(l.retry) == 0
			l.pending.Store(oldestOf(l.retry))
		}
		switch was := l.up.Load(); {
		case was && !reached:
			l.log.Warn("region link: peer region unreachable; changes wait and are retried", "queued", l.q.len()+len(l.retry))
		case !was && reached:
			l.log.Info("region link: peer region reached")
			l.reachedAgain()
		}
		l.up.Store(reached)
		wait := l.cfg.BatchInterval
		if clean {
			l.failures = 0
		} else {
			l.failures++
			wait = l.backoff()
		}
		if !l.sleep(wait, clean) {
			return
		}
	}
}

// sleep waits d, or less when kickable and a batch waits; false when the
// links closed.
func (l *Link) sleep(d time.Duration, kickable bool) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	var kick <-chan struct{}
	if kickable {
		kick = l.kick
	}
	select {
	case <-l.stop:
		return false
	case <-t.C:
	case <-kick:
	}
	return true
}

// backoff is the wait after failures rounds failed in a row: RetryMin
// doubling up to RetryMax, with jitter.
func (l *Link) backoff() time.Duration {
	d := l.cfg.RetryMin << min(l.failures-1, 20)
	if d <= 0 || d > l.cfg.RetryMax {
		d = l.cfg.RetryMax
	}
	return d/2 + rand.N(d/2+1)
}

func oldestOf(es []entry) int64 {
	var o int64
	for _, e := range es {
		if o == 0 || e.at < o {
			o = e.at
		}
	}
	return o
}

// idle keeps the peer's ring fresh while nothing waits, and reports
// whether the peer region is reachable.
func (l *Link) idle() bool {
	if l.ring != nil && !l.stale && l.up.Load() && l.deps.Clock().Sub(l.fetched) < l.cfg.TopologyInterval {
		return true
	}
	return l.refresh() == nil
}

// round sends batch to the peer region's owners, one goroutine per
// owner node, and keeps what was not acknowledged in l.retry for the next
// round. It reports whether every owner was reached.
func (l *Link) round(batch []entry) bool {
	if l.ring == nil || l.stale || l.deps.Clock().Sub(l.fetched) >= l.cfg.TopologyInterval {
		if err := l.refresh(); err != nil && l.ring == nil {
			l.retry = append(l.retry, batch...)
			return false
		}
	}
	groups := map[*owner][]entry{}
	for _, e := range batch {
		_, owners := l.ring.LookupKey(e.key)
		if len(owners) == 0 {
			l.retry = append(l.retry, e)
			continue
		}
		addr := l.ring.Member(owners[0]).Addr
		o := l.owners[addr]
		if o == nil {
			o = &owner{addr: addr}
			l.owners[addr] = o
		}
		groups[o] = append(groups[o], e)
	}
	var wg sync.WaitGroup
	for o, es := range groups {
		wg.Go(func() { l.send(o, es) })
	}
	wg.Wait()
	reached := true
	for o := range groups {
		l.metrics.shipped.Add(float64(o.applied))
		l.retry = append(l.retry, o.failed...)
		l.retry = append(l.retry, o.refused...)
		if len(o.refused) > 0 || (o.epoch != 0 && o.epoch != l.ring.Epoch()) {
			l.stale = true
		}
		if o.err != nil {
			reached = false
			l.log.Debug("region link: send failed", "addr", o.addr, "viewers", len(o.failed), "err", o.err)
		}
	}
	l.dropIdleOwners()
	return reached
}

// dropIdleOwners closes connections to nodes no longer in the peer's ring.
func (l *Link) dropIdleOwners() {
	if len(l.owners) <= len(l.ring.Members()) {
		return
	}
	in := map[string]bool{}
	for _, m := range l.ring.Members() {
		in[m.Addr] = true
	}
	for addr, o := range l.owners {
		if !in[addr] {
			if o.conn != nil {
				o.conn.Close()
			}
			delete(l.owners, addr)
		}
	}
}

// send ships es to o, in messages of at most half MaxReplicateBytes of
// states (a viewer's state is well under that), and records what o
// applied, refused and what failed.
func (l *Link) send(o *owner, es []entry) {
	o.failed, o.refused, o.applied, o.epoch, o.err = o.failed[:0], o.refused[:0], 0, 0, nil
	var buf []byte
	start := 0
	for i, e := range es {
		buf = l.deps.Engine.Export(e.key, buf)
		if len(buf) < proto.MaxReplicateBytes/2 && i < len(es)-1 {
			continue
		}
		if err := l.call(o, buf, es[start:i+1]); err != nil {
			o.err = err
			o.failed = append(o.failed, es[start:]...)
			return
		}
		buf, start = buf[:0], i+1
	}
}

// call sends one RegionMerge of states, those of part, to o.
func (l *Link) call(o *owner, states []byte, part []entry) error {
	ctx, cancel := context.WithTimeout(l.ctx, l.cfg.Timeout)
	defer cancel()
	if o.conn == nil {
		c, err := l.deps.Dialer.Dial(ctx, o.addr)
		if err != nil {
			return err
		}
		o.conn = c
	}
	var res proto.RegionMergeResult
	err := callOn(ctx, o.conn, &proto.RegionMerge{Region: l.cfg.Name, HighWater: l.deps.Engine.HighWater(), States: states}, &res)
	if err != nil {
		var pe *proto.Error
		if !errors.As(err, &pe) {
			// The connection may be broken: dial again next time.
			o.conn.Close()
			o.conn = nil
		} else if pe.Code == proto.CodeNotOwner {
			o.epoch = pe.Epoch
		}
		return err
	}
	o.epoch = res.Epoch
	o.applied += int(res.Applied)
	if len(res.Refused) > 0 {
		refused := make(map[uint64]bool, len(res.Refused))
		for _, k := range res.Refused {
			refused[k] = true
		}
		for _, e := range part {
			if refused[e.key] {
				o.refused = append(o.refused, e)
			}
		}
	}
	return nil
}

// refresh learns the peer region's ring from the members it knows, then
// its seeds, the first that answers.
func (l *Link) refresh() error {
	r, from, err := l.fetchRing(l.ring)
	if err == nil {
		if l.ring == nil || l.ring.Epoch() != r.Epoch() {
			l.log.Info("region link: peer ring", "epoch", fmt.Sprintf("%016x", r.Epoch()), "members", len(r.Members()), "from", from)
		}
		l.ring, l.fetched, l.stale = r, l.deps.Clock(), false
		return nil
	}
	if l.ring == nil && l.failures == 0 {
		l.log.Warn("region link: peer region unreachable; changes wait and are retried", "err", err)
	}
	return err
}

// fetchRing asks the owning members of known (which may be nil), then
// the peer's seeds, for the peer region's ring, and returns the first
// answer and whom it came from. It gives up early once the link stops.
func (l *Link) fetchRing(known *ring.Ring) (*ring.Ring, string, error) {
	var addrs []string
	if known != nil {
		for _, m := range known.Members() {
			if m.State.Owns() && m.Addr != "" {
				addrs = append(addrs, m.Addr)
			}
		}
	}
	addrs = append(addrs, l.peer.Seeds...)
	var errs []error
	var lone *ring.Ring // a ring in which nobody owns anything
	loneFrom := ""
	for _, addr := range addrs {
		r, err := l.topology(addr)
		if err == nil && !owned(r) {
			// A node that has just restarted answers with its own ring:
			// itself alone, joining, owning nothing. The region's ring
			// is with the others; this one serves only if nobody else
			// answers.
			if lone == nil {
				lone, loneFrom = r, addr
			}
			continue
		}
		if err == nil {
			return r, addr, nil
		}
		errs = append(errs, err)
		select {
		case <-l.stop:
			return nil, "", fmt.Errorf("region %s: %w", l.peer.Name, errors.Join(errs...))
		default:
		}
	}
	if lone != nil {
		return lone, loneFrom, nil
	}
	return nil, "", fmt.Errorf("region %s: no node answered: %w", l.peer.Name, errors.Join(errs...))
}

// owned reports whether some member of r owns partitions.
func owned(r *ring.Ring) bool {
	for _, m := range r.Members() {
		if m.State.Owns() {
			return true
		}
	}
	return false
}

// topology asks the node at addr for its ring.
func (l *Link) topology(addr string) (*ring.Ring, error) {
	ctx, cancel := context.WithTimeout(l.ctx, l.cfg.Timeout)
	defer cancel()
	c, err := l.deps.Dialer.Dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	var t proto.Topology
	if err := callOn(ctx, c, &proto.TopologyRequest{Region: l.cfg.Name, Regions: l.regions()}, &t); err != nil {
		return nil, fmt.Errorf("topology from %s: %w", addr, err)
	}
	members := make([]ring.Member, len(t.Members))
	for i, m := range t.Members {
		members[i] = ring.Member{Name: m.Name, Addr: m.Addr, HTTPAddr: m.HTTPAddr, State: ring.State(m.State), Incarnation: m.Incarnation}
	}
	r, err := ring.FromTable(t.Epoch, t.Partitions, t.Replicas, members, t.Owners)
	if err != nil {
		return nil, fmt.Errorf("topology from %s: %w", addr, err)
	}
	return r, nil
}

// callOn is c.Call that ctx ends even when the connection only honours
// deadlines: once ctx is done (Close, or the call's timeout) c is closed,
// which ends a read that waits for a peer that never answers.
func callOn(ctx context.Context, c Conn, req, resp proto.Message) error {
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	return c.Call(ctx, req, resp)
}

func (l *Link) closeConns() {
	for addr, o := range l.owners {
		if o.conn != nil {
			o.conn.Close()
		}
		delete(l.owners, addr)
	}
}

// runCatchUp queues every viewer this node is primary of (for a digest
// catch-up that cannot compare: the peer partitions viewers otherwise),
// keeping the queue at most half full (room for live changes) and at most
// CatchUpRate viewers a second. It returns how many it queued, and false
// when the links closed first.
func (l *Link) runCatchUp() (n int, done bool) {
	const step = 64
	pace := time.Duration(float64(time.Second) * step / float64(l.cfg.CatchUpRate))
	timer := time.NewTimer(0)
	defer timer.Stop()
	<-timer.C
	wait := func(d time.Duration) bool {
		timer.Reset(d)
		select {
		case <-l.stop:
			return false
		case <-timer.C:
			return true
		}
	}
	done = true
	l.deps.Engine.Keys(func(key uint64) bool {
		if !l.deps.Primary(key) {
			return true
		}
		for l.q.len() >= l.cfg.QueueViewers/2 {
			if !wait(l.cfg.BatchInterval) {
				done = false
				return false
			}
		}
		l.q.add(key, l.nowNanos)
		n++
		if n%step == 0 {
			select {
			case l.kick <- struct{}{}:
			default:
			}
			if !wait(pace) {
				done = false
				return false
			}
		}
		return true
	})
	return n, done
}

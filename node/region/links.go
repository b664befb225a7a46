// Package region links a node to the fcap clusters of other regions
// (ARCHITECTURE.md, "Regions"). Each region is one cluster with its own
// gossip pool and ring; a Link per peer region ships the soft changes
// this node applied to the viewers' owners in that region, as state they
// merge (proto.RegionMerge), never on the request path:
//
//   - a write marks its viewer dirty on every Link (Links.Mark): a
//     bounded, de-duplicating set per peer region, a non-blocking call;
//   - a shipper per Link takes dirty viewers in batches, reads each one's
//     current state from the engine (the export replication ships), and
//     sends one RegionMerge per owner node of the peer region, whose ring
//     it learns from the region's seeds (proto.Topology), as a client
//     does; what is not acknowledged is retried with backoff;
//   - past the set's bound a change is counted and a digest catch-up
//     (digest.go) compares the viewers of the partitions this node is
//     primary of with what the peer region holds, and queues those
//     that differ, paced; the same runs after a restart, after an
//     outage, and every DigestInterval.
//
// The receiving node merges (idempotent, commutative), logs and
// replicates to its backups; it does not ship what it received on, so a
// full mesh of regions has no loops. It imports neither the client nor
// the node server: the node hands it what it needs through Deps.
package region

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fcap-io/fcap/proto"
)

// Engine is what a link reads of the cap engine (engine.Engine).
type Engine interface {
	// Export appends a viewer's current state to dst.
	Export(key uint64, dst []byte) []byte
	// Keys calls fn with every viewer key held until fn returns false;
	// fn runs outside the engine's locks.
	Keys(fn func(key uint64) bool)
	// PartitionKeys is Keys for the partitions want marks (key %
	// len(want)).
	PartitionKeys(want []bool, fn func(key uint64) bool)
	// HighWater is the newest time the engine has seen.
	HighWater() int64
	// LocalDigest is the digest of a viewer's own counters at now as a
	// peer region's lane of them digests (engine.LocalDigest); keys is
	// called with the cap key hash of each counter covered.
	LocalDigest(key uint64, now int64, keys func(kh uint64)) uint64
}

// Dialer opens connections to peer regions' nodes, presenting this
// node's peer token over the node's peer TLS (node/peers).
type Dialer interface {
	Dial(ctx context.Context, addr string) (Conn, error)
}

// Conn is one connection to a node, used by one goroutine at a time.
type Conn interface {
	// Call sends req and decodes the answer into resp; an Error answer
	// comes back as a *proto.Error.
	Call(ctx context.Context, req, resp proto.Message) error
	Close() error
}

// Deps are what the links need of the node.
type Deps struct {
	Engine Engine
	Dialer Dialer
	// Primary reports whether this node is the primary owner of the
	// viewer with key now: a digest catch-up compares those viewers.
	Primary func(key uint64) bool
	// PrimaryPartitions returns the partition count of this region's
	// ring and the partitions this node is primary of now: a digest
	// catch-up compares those with the peer regions.
	PrimaryPartitions func() (partitions int, primary []int)
	// Registerer receives the links' metrics; nil registers none.
	Registerer prometheus.Registerer
	// Logger receives the links' logs. nil: slog.Default().
	Logger *slog.Logger
	// Clock is the wall clock the lag is measured by. nil: time.Now.
	Clock func() time.Time
}

// Links are a node's links to its peer regions.
type Links struct {
	cfg     Config
	log     *slog.Logger
	links   []*Link
	metrics *metrics
	escrow  *escrow      // strict caps' shares (escrow.go); nil: none
	served  digestServer // answers RegionDigest (serve.go)
	clock   func() time.Time

	// live is Config.Regions less the retired regions (retire.go),
	// swapped whole under retireMu.
	live     atomic.Pointer[[]string]
	retireMu sync.Mutex

	ctx    context.Context // cancelled by Close: ends every call in flight
	cancel context.CancelFunc
	stop   chan struct{}
	wg     sync.WaitGroup // every link's goroutines

	startOnce, closeOnce sync.Once
}

// New returns the links of cfg, not yet running (Start). With a Name and
// no Peers it only receives: Mark is a no-op and nothing runs.
func New(cfg Config, deps Deps) (*Links, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Logger == nil {
		deps.Logger = slog.Default()
	}
	if deps.Clock == nil {
		deps.Clock = time.Now
	}
	if cfg.Enabled() && (deps.PrimaryPartitions == nil || deps.Primary == nil) {
		return nil, fmt.Errorf("%w: Deps.Primary and Deps.PrimaryPartitions", ErrDeps)
	}
	ls := &Links{cfg: cfg, log: deps.Logger, stop: make(chan struct{}), clock: deps.Clock}
	ls.served.slot = make(chan struct{}, 1)
	ls.ctx, ls.cancel = context.WithCancel(context.Background())
	live := cfg.Regions()
	ls.live.Store(&live)
	for _, p := range cfg.Peers {
		l := newLink(cfg, p, deps, ls.ctx, ls.stop)
		l.regions = ls.LiveRegions
		ls.links = append(ls.links, l)
	}
	m, err := newMetrics(deps.Registerer, ls.links)
	if err != nil {
		ls.cancel()
		return nil, err
	}
	ls.metrics = m
	for _, l := range ls.links {
		l.metrics = m.of(l.peer.Name)
	}
	return ls, nil
}

// Name is this node's region.
func (ls *Links) Name() string { return ls.cfg.Name }

// Start starts each link's shipper and digest catch-up; a second call does
// nothing.
func (ls *Links) Start() {
	ls.startOnce.Do(func() {
		for _, l := range ls.links {
			ls.wg.Go(l.ship)
			ls.wg.Go(l.digestLoop)
		}
	})
}

// Mark queues the viewer with key for every peer region. It never
// blocks beyond a short lock: a full queue counts the change and asks
// for a catch-up instead.
func (ls *Links) Mark(key uint64) {
	for _, l := range ls.links {
		if !l.retired.Load() {
			l.mark(key)
		}
	}
}

// CatchUp asks every link for a digest catch-up of the partitions this
// node is primary of (after a restart with a data dir: the queue itself
// is not kept).
func (ls *Links) CatchUp() {
	for _, l := range ls.links {
		l.requestCatchUp()
	}
}

// Received counts n viewer states merged from region.
func (ls *Links) Received(region string, n int) {
	ls.metrics.received.WithLabelValues(region).Add(float64(n))
}

// Status is a link's state, for fcapctl status.
type Status struct {
	// Name is the peer region's name.
	Name string
	// Reachable says the last shipping round (or topology refresh)
	// reached the region.
	Reachable bool
	// Lag is the age of the oldest change not yet acknowledged by the
	// region (0: none waits).
	Lag time.Duration
	// Queue is the number of viewers waiting.
	Queue int
	// Retired says an operator retired the region (Links.Retire), as of
	// RetiredAt (the node's clock, ms): the link no longer runs.
	Retired   bool
	RetiredAt int64
}

// Status returns each link's state, in the order of Config.Peers.
func (ls *Links) Status() []Status {
	out := make([]Status, len(ls.links))
	for i, l := range ls.links {
		out[i] = Status{Name: l.peer.Name, Reachable: l.up.Load(), Lag: l.lag(), Queue: l.q.len(), Retired: l.retired.Load(), RetiredAt: l.retiredAt.Load()}
	}
	return out
}

// Close stops every link and waits for its goroutines; changes still
// queued are not shipped (a restart's catch-up covers them when the node
// has a data dir). Calling it again does nothing.
func (ls *Links) Close() {
	ls.closeOnce.Do(func() {
		close(ls.stop)
		ls.cancel()
		ls.wg.Wait()
	})
}

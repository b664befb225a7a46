// Package node is an fcap node: the cap engine behind a msgpack data
// plane, a member of a gossip cluster that owns slices of the viewer
// keyspace through the ring, with metrics and health over HTTP.
package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/fcap-io/fcap/node/conns"
	"github.com/fcap-io/fcap/node/engine"
	"github.com/fcap-io/fcap/node/gossip"
	"github.com/fcap-io/fcap/node/grants"
	"github.com/fcap-io/fcap/node/identity"
	"github.com/fcap-io/fcap/node/metrics"
	"github.com/fcap-io/fcap/node/peers"
	"github.com/fcap-io/fcap/node/quorum"
	"github.com/fcap-io/fcap/node/region"
	"github.com/fcap-io/fcap/node/replication"
	"github.com/fcap-io/fcap/node/security"
	"github.com/fcap-io/fcap/node/statuspage"
	"github.com/fcap-io/fcap/node/storage"
	"github.com/fcap-io/fcap/proto/rpc"
	"github.com/fcap-io/fcap/ring"
)

// Node is a running fcap node. Start one with Start; stop it with
// Shutdown.
type Node struct {
	cfg     Config
	log     *slog.Logger
	engine  *engine.Engine
	durable *storage.Store // the data dir's log and snapshots; nil when memory only
	journal engine.Journal // durable as the engine's journal; nil (untyped) when memory only
	// members is the node's gossip membership, set once it started;
	// callbacks may run before that.
	members atomic.Pointer[gossip.Membership]
	metrics *metrics.Set
	clock   func() int64

	data     net.Listener
	dataAddr string // advertised
	http     *http.Server
	httpLn   net.Listener
	api      atomic.Pointer[API] // the JSON API, once it is up
	page     *statuspage.Page

	view   atomic.Pointer[view] // the ring as this node routes by
	ringMu sync.Mutex           // orders view changes (gossip callbacks and Start)
	repl   *replication.Replicator
	peers  *peers.Peers // calls to other nodes
	// quorum says whether this node may grant strict writes
	// (authority.go); set once the membership is up.
	quorum atomic.Pointer[quorum.Tracker]
	// promises fence the leases this node backs (quorum.Promises).
	promises *quorum.Promises
	// absent remembers the members its rings dropped (Pong.Absent).
	absent absence
	// inflight counts strict grants waiting for their backups
	// (authority.go).
	inflight inflight

	draining atomic.Bool // no new connections, requests end the connection once answered
	left     atomic.Bool // handed over and left the gossip pool: answer NotOwner
	activate chan struct{}
	replans  chan struct{}

	tokens *security.Tokens // Security.Tokens, as reloaded since; empty: no authentication

	grants grants.Memory // strict grants a client may give back (undo.go)

	finisher *identity.Finisher // links and unlinks to finish (crossdevice.go)

	gossipKeys *security.GossipKeys // GossipKey requests

	// region takes merges from other regions (a region name); shipping
	// is the same links when they ship to peer regions, else nil: the
	// write path's only cost of regions is its nil check (region.go).
	region, shipping *region.Links
	shares           *engine.Shares // this region's place among those splitting strict caps (escrow.go); nil: none
	regionCaughtUp   atomic.Bool    // catchUpRegions ran (once, at the first Active view)
	retireMu         sync.Mutex     // serializes retires and the data dir's file of them (retire.go)

	drainOnce sync.Once
	drainSent int
	drainErr  error
	drained   chan struct{} // closed when Drain has returned

	conns *conns.Places // the data-plane connections

	stopLoops context.CancelFunc // stops every loop run started
	wg        sync.WaitGroup     // every goroutine the node starts

	shutdownOnce sync.Once
	shutdownErr  error
}

// view is a ring snapshot with this node's place in it, computed once
// per ring so routing a request is a lookup and a comparison.
type view struct {
	ring *ring.Ring
	plan *replication.Plan // what this node replicates where, for this ring
	self uint16            // index of this node in ring.Members()
	in   bool              // this node is a member of the ring at all
}

func newView(r *ring.Ring, name string, pl *replication.Plan) *view {
	self, in := r.Find(name)
	return &view{ring: r, plan: pl, self: self, in: in}
}

// Start binds the data plane, HTTP and gossip listeners, joins the
// configured seeds in the background and starts serving. It returns once
// every listener is bound.
func Start(cfg Config) (*Node, error) {
	cfg = withDefaults(cfg)
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := cfg.Membership.Ring.Validate(); err != nil {
		return nil, err
	}
	if cfg.Region.Enabled() {
		cfg.Engine.Shares = sharesOf(cfg.Region) // escrow.go
	}
	n := &Node{
		cfg:      cfg,
		log:      cfg.Logger.With("node", cfg.Name),
		clock:    cfg.Clock,
		activate: make(chan struct{}, 1),
		replans:  make(chan struct{}, 1),
		drained:  make(chan struct{}),
	}
	n.tokens = security.NewTokens(cfg.Security.Tokens, cfg.Security.PeerToken)
	n.promises = quorum.NewPromises(cfg.Quorum.Lease)
	n.absent.started = time.Now()
	n.peers = peers.New(cfg.Security.PeerTLS, cfg.MaxFrame, n.tokens)
	n.page = statuspage.New(pageSource{n}, rpc.NodeStatus, n.log)
	n.gossipKeys = security.NewGossipKeys(cfg.Membership.Memberlist, cfg.Name, n.log)
	n.shares = cfg.Engine.Shares
	if cfg.Engine.Partitions == 0 {
		// Stripes laid out by the ring's partitions: anti-entropy, verify
		// and region digests walk only the partitions they compare.
		cfg.Engine.Partitions = cfg.Membership.Ring.Partitions
	}
	eng, err := engine.New(cfg.Engine)
	if err != nil {
		return nil, err
	}
	n.engine = eng
	if n.metrics, err = metrics.New(cfg.Registerer, eng, metricsSource{n}, statuspage.Routes()); err != nil {
		return nil, err
	}
	n.conns = conns.New(cfg.MaxConns, cfg.MaxPendingConns, conns.Metrics{Open: n.metrics.Conns, Pending: n.metrics.PendingConns, Evicted: n.metrics.EvictedConns})
	if err := n.startRegions(); err != nil {
		return nil, err
	}
	n.repl = n.newReplicator()
	if err := n.openStorage(); err != nil {
		return nil, err
	}
	if n.finisher, err = identity.New(identity.Config{Dir: cfg.Storage.DataDir, Try: n.finish, Logger: n.log,
		Registerer: cfg.Registerer}); err != nil {
		n.closeDurable()
		return nil, err
	}
	if err := n.listen(); err != nil {
		n.closeListeners()
		n.closeDurable()
		return nil, err
	}
	if err := n.joinGossip(); err != nil {
		n.closeListeners()
		n.closeDurable()
		return nil, fmt.Errorf("start gossip: %w", err)
	}
	// Listening, not ready: the node serves once it is an active member
	// holding its partitions, and says "fcapd ready" then (activator,
	// which run starts: this line comes first).
	n.log.Info("fcapd listening",
		"data", n.dataAddr, "gossip", n.membership().GossipAddr(), "http", n.httpAddr(),
		"partitions", cfg.Membership.Ring.Partitions, "replicas", cfg.Membership.Ring.Replicas)
	n.run()
	return n, nil
}

// withDefaults fills in what cfg leaves to the node: the clock (the
// engine's too), the logger, the metrics registry.
func withDefaults(cfg Config) Config {
	if cfg.Clock == nil {
		cfg.Clock = wallClockMillis
	}
	// The node's clock is the engine's: callers' times are bounded by it
	// (SECURITY.md, "Time").
	cfg.Engine.Clock = cfg.Clock
	cfg.Engine.MaxFuture = cfg.MaxClockSkew.Milliseconds()
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Registerer == nil {
		// A registry of the node's own, with the Go runtime's and the
		// process's figures (heap, GC, RSS, file descriptors).
		reg := prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		cfg.Registerer, cfg.Gatherer = reg, reg
	}
	if cfg.Gatherer == nil {
		if g, ok := cfg.Registerer.(prometheus.Gatherer); ok {
			cfg.Gatherer = g
		}
	}
	return cfg
}

// newReplicator returns the node's replication, knowing the node only
// through narrow interfaces and hooks.
func (n *Node) newReplicator() *replication.Replicator {
	cfg := n.cfg
	rc := cfg.Replication
	rc.Name, rc.Ring, rc.Joins, rc.Logger = cfg.Name, cfg.Membership.Ring, len(cfg.Membership.Seeds) > 0, n.log
	rc.Bootstrap = cfg.Bootstrap
	return replication.New(rc, replication.Deps{
		Engine: n.engine,
		Log:    nodeLog{n},
		Peers:  n.peers,
		Metrics: replication.Metrics{
			Transfers:           n.metrics.Transfers,
			ReplicatedBytes:     n.metrics.ReplicatedBytes,
			Errors:              n.metrics.ReplicationErrors,
			Refused:             n.metrics.ReplicationRefused,
			Claimed:             n.metrics.Claimed,
			AntiEntropyRounds:   n.metrics.AntiEntropyRounds,
			DifferingPartitions: n.metrics.DifferingPartitions,
			RepairedViewers:     n.metrics.RepairedViewers,
		},
		Hooks: replication.Hooks{
			Left: n.left.Load,
			HoldingsChanged: func() {
				n.maybeActivate()
				n.replan()
			},
			ObserveHighWater: func(hw int64) { n.metrics.Time.Observe(n.engine, metrics.FromReplication, hw) },
			Failed: func() int {
				if m := n.membership(); m != nil {
					return m.NumFailed()
				}
				return 0
			},
			Quorum: func(epoch uint64) bool {
				q := n.quorum.Load()
				return q != nil && q.Holds(epoch)
			},
		},
	})
}

// openStorage loads the data dir, if the node has one, before anything
// listens: the node starts with what it held, then catches up from its
// peers as any restart does.
func (n *Node) openStorage() error {
	if n.cfg.Storage.DataDir == "" {
		return nil
	}
	observe := func(snapshot bool, hw int64) {
		src := metrics.FromLog
		if snapshot {
			src = metrics.FromSnapshot
		}
		n.metrics.Time.Observe(n.engine, src, hw)
	}
	var err error
	if n.durable, err = storage.Open(n.cfg.Storage, n.engine, n.log, n.cfg.Registerer, observe); err != nil {
		return fmt.Errorf("open data dir: %w", err)
	}
	n.journal = n.durable
	if n.engine.Stats().Viewers > 0 {
		n.repl.OfferRecovered() // stand-in writes a backup kept reach their primary
	}
	return nil
}

// joinGossip starts the node's membership, Joining, and plans its first
// ring.
func (n *Node) joinGossip() error {
	cfg := n.cfg
	mcfg := cfg.Membership
	mcfg.Self = ring.Member{
		Name:     cfg.Name,
		Addr:     n.dataAddr,
		HTTPAddr: n.httpAddr(),
		// Every node starts Joining: it owns nothing until it holds the
		// partitions it will own (a fresh cluster activates at once).
		State:       ring.Joining,
		Incarnation: time.Now().UnixNano(),
	}
	mcfg.Memberlist.Name = cfg.Name
	mcfg.Logger = n.log
	mcfg.OnChange = n.onRingChange
	mcfg.OnForget = n.onForget
	mcfg.OnRetireRegion = n.onRetireRegion
	m, err := gossip.New(mcfg)
	if err != nil {
		return err
	}
	n.members.Store(m)
	n.spreadRetired(m)
	n.startQuorum()
	n.ringMu.Lock()
	if n.view.Load() == nil { // a ring change may have set it already
		first := m.Ring()
		pl, start := n.repl.OnRing(first)
		n.view.Store(newView(first, cfg.Name, pl))
		start()
	}
	n.ringMu.Unlock()
	return nil
}

// run starts the node's loops (the engine's sweeper, activation, replans,
// replication's, storage's, the recent serving figures', the status
// page's) and its servers.
func (n *Node) run() {
	ctx, cancel := context.WithCancel(context.Background())
	n.stopLoops = cancel
	n.wg.Go(func() { n.engine.Run(ctx) })
	n.wg.Go(func() { n.activator(ctx) })
	n.wg.Go(func() { n.replanner(ctx) })
	n.wg.Go(func() { n.repl.Run(ctx) })
	n.wg.Go(func() { n.finisher.Run(ctx) })
	n.wg.Go(func() { n.metrics.RunRecent(ctx) })
	if n.durable != nil {
		n.wg.Go(func() { n.durable.Run(ctx) })
	}
	if n.region != nil {
		n.region.Start()
	}
	n.maybeActivate()
	n.wg.Go(n.acceptLoop)
	if err := n.startAPI(); err != nil {
		n.log.Error("http api not started", "err", err)
	}
	n.wg.Go(func() { n.page.Run(ctx) }) // reads n.api: after startAPI
	if n.http != nil {
		n.wg.Go(func() {
			if err := n.http.Serve(n.httpLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
				n.log.Error("http server stopped", "err", err)
			}
		})
	}
}

func (n *Node) listen() error {
	var err error
	// Keep-alives are turned on when a connection authenticates
	// (keepAlive): a flood of connections that never do spares the node
	// their four setsockopt calls at the accept.
	lc := net.ListenConfig{KeepAlive: -1}
	if n.data, err = lc.Listen(context.Background(), "tcp", n.cfg.DataAddr); err != nil {
		return fmt.Errorf("listen data plane: %w", err)
	}
	if n.cfg.Security.TLS != nil {
		n.data = tls.NewListener(n.data, n.cfg.Security.TLS)
	}
	n.dataAddr = n.cfg.AdvertiseDataAddr
	if n.dataAddr == "" {
		n.dataAddr = n.data.Addr().String()
	}
	if n.cfg.HTTPAddr != "" {
		if n.httpLn, err = net.Listen("tcp", n.cfg.HTTPAddr); err != nil {
			return fmt.Errorf("listen http: %w", err)
		}
		n.http = &http.Server{
			Handler:           n.httpHandler(),
			ReadHeaderTimeout: 5 * time.Second,
			ReadTimeout:       30 * time.Second,
			WriteTimeout:      30 * time.Second,
		}
	}
	return nil
}

func (n *Node) closeListeners() {
	if n.data != nil {
		n.data.Close()
	}
	if n.httpLn != nil {
		n.httpLn.Close()
	}
}

func (n *Node) httpAddr() string {
	if n.httpLn == nil {
		return ""
	}
	return n.httpLn.Addr().String()
}

// membership is the node's gossip membership (set before Start returns).
func (n *Node) membership() *gossip.Membership { return n.members.Load() }

func (n *Node) onRingChange(old, cur *ring.Ring) {
	// The plan first: a view never points at a plan that is not ready.
	n.ringMu.Lock()
	// Always the newest ring, read under the lock: a replan or a late
	// callback must never put an older ring back.
	if m := n.members.Load(); m != nil {
		cur = m.Ring()
	}
	if cur == nil {
		n.ringMu.Unlock()
		return
	}
	var before uint64
	if v := n.view.Load(); v != nil && v.ring != nil {
		before = v.ring.Epoch()
	}
	pl, start := n.repl.OnRing(cur)
	n.view.Store(newView(cur, n.cfg.Name, pl))
	start()
	n.ringMu.Unlock()
	if i, in := cur.Find(n.cfg.Name); in && cur.Member(i).State == ring.Active && n.regionCaughtUp.CompareAndSwap(false, true) {
		// The first view in which this node serves as Active: what it
		// is primary of is known only now (catchUpRegions).
		n.catchUpRegions()
	}
	if cur.Epoch() == before {
		// A replan of the same ring (a partition arrived): not news.
		n.log.Debug("replanned", "epoch", fmt.Sprintf("%016x", cur.Epoch()))
		return
	}
	n.absent.ringChanged(old, cur, time.Now())
	n.catchUpInherited(old, cur)
	n.releaseLeft(old, cur)
	n.updateQuorum()
	n.metrics.RingChanges.Inc()
	n.log.Info("ring changed", "epoch", fmt.Sprintf("%016x", cur.Epoch()), "members", len(cur.Members()), "owners", cur.ActiveMembers())
	if note := copiesNote(cur); note != "" {
		n.log.Warn(note, "replicas", cur.Replicas(), "owners", cur.ActiveMembers())
	}
	n.maybeActivate()
}

// copiesNote says, when r has fewer active members than its replica
// count, that every partition has fewer copies than --replicas asks for:
// with one member, no backup at all. A node that serves that way is
// ready all the same (soft caps are served, nothing is refused); its log
// (at every ring change), /readyz's body and fcapctl status say so.
// "" when r has no active member yet or enough of them.
func copiesNote(r *ring.Ring) string {
	active, want := r.ActiveMembers(), r.Replicas()
	switch {
	case active == 0 || active >= want:
		return ""
	case active == 1:
		return fmt.Sprintf("no backup: --replicas %d, but one active member holds every partition alone, so a crash of it loses what it counted; add members (or run --replicas 1 if one copy is meant)", want)
	}
	return fmt.Sprintf("under-replicated: --replicas %d, but %d active members, so every partition has %d copies; add members", want, active, active)
}

// NameTaken receives, once, the conflict found while this node was still
// joining: a live member of the cluster already has its name. The node
// cannot take its place on the ring; the caller should shut it down.
func (n *Node) NameTaken() <-chan *gossip.ErrNameTaken { return n.membership().NameTaken() }

// replan plans the current ring again, after this node received
// partitions it may now have to push on.
func (n *Node) replan() {
	select {
	case n.replans <- struct{}{}:
	default:
	}
}

// replanner runs replans outside the request and gossip goroutines.
func (n *Node) replanner(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.replans:
			n.onRingChange(nil, nil)
		}
	}
}

// maybeActivate asks the activator to check whether a Joining node holds
// everything it will own.
func (n *Node) maybeActivate() {
	select {
	case n.activate <- struct{}{}:
	default:
	}
}

// activator turns a Joining node Active once it holds every partition it
// will own. It runs outside memberlist's and the ring's goroutines
// because SetState waits for gossip.
func (n *Node) activator(ctx context.Context) {
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	lastLog := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.activate:
		case <-tick.C:
		}
		if n.membership().Self().State != ring.Joining || n.draining.Load() {
			continue
		}
		missing := n.repl.Missing()
		if missing > 0 {
			if time.Since(lastLog) > 5*time.Second {
				n.log.Info("joining: waiting for partitions", "missing", missing)
				lastLog = time.Now()
			}
			continue
		}
		if err := n.membership().SetState(ring.Active); err != nil {
			n.log.Warn("turn active", "err", err)
			continue
		}
		n.log.Info("active: holding every partition it owns")
		n.log.Info("fcapd ready", "data", n.dataAddr, "http", n.httpAddr())
	}
}

// Drain hands this node's partitions to their next owners and leaves the
// gossip pool: it turns Leaving (others compute the ring without it and
// it keeps serving), sends what it alone must send, then leaves, and
// returns once every member it left behind has a ring without it and
// waits for no partition (replication.HandedOver); it then answers NotOwner for Linger
// so clients move without a failed call. It returns the number of
// partition transfers it sent, and an error saying what was not handed
// over if the hand-over did not finish within ctx and DrainTimeout (the
// node leaves all the same). Calling it again returns the first call's
// result.
func (n *Node) Drain(ctx context.Context) (int, error) {
	n.drainOnce.Do(func() {
		n.drainSent, n.drainErr = n.drain(ctx)
		close(n.drained)
	})
	return n.drainSent, n.drainErr
}

// Drained is closed once a drain has finished (Drain returned, whoever
// called it: fcapctl drain, or Shutdown): the node has left the cluster
// and serves nothing more, so its process may exit (cmd/fcapd does, as
// consul leave does). A node that left comes back only as a new process:
// started again with the same --name and --data-dir, it rejoins.
func (n *Node) Drained() <-chan struct{} { return n.drained }

func (n *Node) drain(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.DrainTimeout)
	defer cancel()
	before := n.repl.Transfers()
	others := false
	for _, m := range n.view.Load().ring.Members() {
		if m.Name != n.cfg.Name && m.State.Owns() {
			others = true
		}
	}
	var errs []error
	if others && n.membership().Self().State == ring.Active {
		n.log.Info("draining: handing partitions over")
		if err := n.membership().SetState(ring.Leaving); err != nil {
			return 0, fmt.Errorf("drain: %w", err)
		}
		// Wait until this node's ring shows it Leaving (the hand-overs
		// are planned then) and everything planned is sent.
		leaving := func() bool {
			v := n.view.Load()
			return v.in && v.ring.Member(v.self).State == ring.Leaving
		}
		if err := n.repl.AwaitSent(ctx, leaving); err != nil {
			errs = append(errs, err)
		}
	}
	// Stop taking writes, then send the last changes, then leave: nothing
	// is acknowledged that the next owners do not get.
	n.left.Store(true)
	n.repl.Flush(ctx, 5*time.Second)
	sent := int(n.repl.Transfers() - before)
	last := n.view.Load().ring
	if err := n.membership().Leave(2 * time.Second); err != nil {
		n.log.Warn("leave gossip", "err", err)
	}
	if others {
		// The members left behind drop this node from their rings and
		// take its partitions; a new owner that waits for a hand-over
		// from this node asks for it (sync.go), and this node, which
		// writes nothing now, sends it.
		if err := n.repl.HandedOver(ctx, last); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		err := fmt.Errorf("drain: %w", errors.Join(errs...))
		n.log.Error("left the cluster without a complete hand-over", "partitions_sent", sent, "err", err)
		return sent, err
	}
	n.log.Info("left the cluster", "partitions_sent", sent)
	select {
	case <-ctx.Done():
	case <-time.After(n.cfg.Linger):
	}
	return sent, nil
}

// Name returns the node's name.
func (n *Node) Name() string { return n.cfg.Name }

// DataAddr returns the data-plane address the node advertises.
func (n *Node) DataAddr() string { return n.dataAddr }

// HTTPAddr returns the address serving metrics and health, or "".
func (n *Node) HTTPAddr() string { return n.httpAddr() }

// GossipAddr returns the address gossip is bound to.
func (n *Node) GossipAddr() string { return n.membership().GossipAddr() }

// Ring returns the ring the node currently routes by.
func (n *Node) Ring() *ring.Ring { return n.view.Load().ring }

// Engine returns the node's cap engine.
func (n *Node) Engine() *engine.Engine { return n.engine }

// Ready reports whether the node serves: it is an active member of its
// own ring, holds every partition it owns, and is not shutting down.
func (n *Node) Ready() bool { return n.notReady() == "" }

// notReady says why the node is not ready, "" when it is.
func (n *Node) notReady() string {
	v := n.view.Load()
	switch {
	case n.draining.Load():
		return "draining"
	case n.left.Load():
		return "left the cluster"
	}
	switch {
	case !v.in || v.ring.Member(v.self).State != ring.Active:
		if js := n.membership().JoinStatus().Summary(); js != "" {
			return js // a node alone stays Joining until a seed answers
		}
		return "joining: receiving the partitions it will own"
	case n.repl.SyncingCount(v.ring) > 0:
		return fmt.Sprintf("%d partitions still being received", n.repl.SyncingCount(v.ring))
	}
	return ""
}

// Shutdown stops the node gracefully: it stops accepting connections,
// lets every connection finish the requests it has read, leaves the
// gossip pool, and stops its loops and HTTP. It returns when every
// goroutine has ended or ctx is done (then it closes what is left).
// Calling it again returns the first call's result.
func (n *Node) Shutdown(ctx context.Context) error {
	n.shutdownOnce.Do(func() { n.shutdownErr = n.shutdown(ctx) })
	return n.shutdownErr
}

func (n *Node) shutdown(ctx context.Context) error {
	var errs []error
	// Hand partitions over first, serving meanwhile.
	if _, err := n.Drain(ctx); err != nil {
		errs = append(errs, err)
	}
	n.draining.Store(true)
	n.data.Close()
	n.conns.Drain(ctx)
	if q := n.quorum.Load(); q != nil {
		q.Close()
	}
	n.repl.Close()
	if n.region != nil {
		n.region.Close()
	}
	if err := n.membership().Shutdown(); err != nil {
		errs = append(errs, fmt.Errorf("stop gossip: %w", err))
	}
	n.stopLoops()
	if n.http != nil {
		if err := n.http.Shutdown(ctx); err != nil {
			n.http.Close()
		}
	}
	n.stopAPI()
	done := make(chan struct{})
	go func() {
		n.wg.Wait()
		n.repl.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		n.conns.CloseAll()
		<-done
		errs = append(errs, fmt.Errorf("shutdown: %w", ctx.Err()))
	}
	if err := errors.Join(n.finisher.Close(), n.closeDurable()); err != nil {
		errs = append(errs, err)
	}
	n.log.Info("fcapd stopped")
	return errors.Join(errs...)
}

// closeDurable writes and fsyncs what the log holds and closes it.
func (n *Node) closeDurable() error {
	if n.durable == nil {
		return nil
	}
	if err := n.durable.Close(); err != nil {
		return fmt.Errorf("close data dir: %w", err)
	}
	return nil
}

// Snapshot writes a snapshot of the node's state now (it also happens
// every Storage.SnapshotInterval). It fails when the node has no data dir.
func (n *Node) Snapshot() error {
	if n.durable == nil {
		return errors.New("snapshot: the node has no data dir")
	}
	return n.durable.Snapshot()
}

// logChange logs a viewer's state after a change made outside the
// engine's *Write operations (a merge, an identity change); 0 when the
// node keeps no log.
func (n *Node) logChange(key uint64) uint64 {
	if n.journal == nil {
		return 0
	}
	return n.engine.LogState(n.journal, key)
}

// waitLogged returns once the record numbered seq is as durable as the
// fsync policy promises.
func (n *Node) waitLogged(seq uint64) {
	if seq != 0 {
		n.durable.Wait(seq)
	}
}

// Package node is an fcap node: the cap engine behind a msgpack data
// plane, a member of a gossip cluster that owns slices of the viewer
// keyspace through the ring, with metrics and health over HTTP.
package node

import (
	"context"
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

	"github.com/fcap-io/fcap/node/engine"
	"github.com/fcap-io/fcap/ring"
)

// Node is a running fcap node. Start one with Start; stop it with
// Shutdown.
type Node struct {
	cfg     Config
	log     *slog.Logger
	engine  *engine.Engine
	members *ring.Membership
	metrics *metrics
	clock   func() int64

	data     net.Listener
	dataAddr string // advertised
	http     *http.Server
	httpLn   net.Listener

	view atomic.Pointer[view] // the ring as this node routes by

	draining atomic.Bool // no new connections, requests end the connection once answered

	connMu sync.Mutex
	// conns holds the open data-plane connections; guarded by connMu.
	conns map[net.Conn]struct{}

	stopSweep context.CancelFunc
	wg        sync.WaitGroup // every goroutine the node starts

	shutdownOnce sync.Once
	shutdownErr  error
}

// view is a ring snapshot with this node's place in it, computed once
// per ring so routing a request is a lookup and a comparison.
type view struct {
	ring *ring.Ring
	self uint16 // index of this node in ring.Members()
	in   bool   // this node is a member of the ring at all
}

func newView(r *ring.Ring, name string) *view {
	self, in := r.Find(name)
	return &view{ring: r, self: self, in: in}
}

// Start binds the data plane, HTTP and gossip listeners, joins the
// configured seeds in the background and starts serving. It returns once
// every listener is bound.
func Start(cfg Config) (*Node, error) {
	if cfg.Clock == nil {
		cfg.Clock = wallClockMillis
	}
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
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	eng, err := engine.New(cfg.Engine)
	if err != nil {
		return nil, err
	}
	n := &Node{
		cfg:    cfg,
		log:    cfg.Logger.With("node", cfg.Name),
		engine: eng,
		clock:  cfg.Clock,
		conns:  map[net.Conn]struct{}{},
	}
	if n.metrics, err = newMetrics(cfg.Registerer, n); err != nil {
		return nil, err
	}
	if err := n.listen(); err != nil {
		n.closeListeners()
		return nil, err
	}

	mcfg := cfg.Membership
	mcfg.Self = ring.Member{
		Name:        cfg.Name,
		Addr:        n.dataAddr,
		HTTPAddr:    n.httpAddr(),
		State:       ring.Active,
		Incarnation: time.Now().UnixNano(),
	}
	mcfg.Memberlist.Name = cfg.Name
	mcfg.Logger = n.log
	mcfg.OnChange = n.onRingChange
	if n.members, err = ring.NewMembership(mcfg); err != nil {
		n.closeListeners()
		return nil, fmt.Errorf("start gossip: %w", err)
	}
	n.view.Store(newView(n.members.Ring(), cfg.Name))

	ctx, cancel := context.WithCancel(context.Background())
	n.stopSweep = cancel
	n.goFunc(func() { n.engine.Run(ctx) })
	n.goFunc(n.acceptLoop)
	if n.http != nil {
		n.goFunc(func() {
			if err := n.http.Serve(n.httpLn); err != nil && !errors.Is(err, http.ErrServerClosed) {
				n.log.Error("http server stopped", "err", err)
			}
		})
	}
	n.log.Info("fcapd ready",
		"data", n.dataAddr, "gossip", n.members.GossipAddr(), "http", n.httpAddr(),
		"partitions", mcfg.Ring.Partitions, "replicas", mcfg.Ring.Replicas)
	return n, nil
}

func (n *Node) listen() error {
	var err error
	if n.data, err = net.Listen("tcp", n.cfg.DataAddr); err != nil {
		return fmt.Errorf("listen data plane: %w", err)
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

// goFunc runs f on a goroutine that Shutdown waits for.
func (n *Node) goFunc(f func()) {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		f()
	}()
}

func (n *Node) onRingChange(old, cur *ring.Ring) {
	v := newView(cur, n.cfg.Name)
	n.view.Store(v)
	n.metrics.ringChanges.Inc()
	n.log.Info("ring changed", "epoch", fmt.Sprintf("%016x", cur.Epoch()), "members", len(cur.Members()))
}

// Name returns the node's name.
func (n *Node) Name() string { return n.cfg.Name }

// DataAddr returns the data-plane address the node advertises.
func (n *Node) DataAddr() string { return n.dataAddr }

// HTTPAddr returns the address serving metrics and health, or "".
func (n *Node) HTTPAddr() string { return n.httpAddr() }

// GossipAddr returns the address gossip is bound to.
func (n *Node) GossipAddr() string { return n.members.GossipAddr() }

// Ring returns the ring the node currently routes by.
func (n *Node) Ring() *ring.Ring { return n.view.Load().ring }

// Engine returns the node's cap engine.
func (n *Node) Engine() *engine.Engine { return n.engine }

// Ready reports whether the node serves: it is an active member of its
// own ring and not shutting down.
func (n *Node) Ready() bool {
	v := n.view.Load()
	return !n.draining.Load() && v.in && v.ring.Member(v.self).State == ring.Active
}

// Shutdown stops the node gracefully: it stops accepting connections,
// lets every connection finish the requests it has read, leaves the
// gossip pool, and stops the sweeper and HTTP. It returns when every
// goroutine has ended or ctx is done (then it closes what is left).
// Calling it again returns the first call's result.
func (n *Node) Shutdown(ctx context.Context) error {
	n.shutdownOnce.Do(func() { n.shutdownErr = n.shutdown(ctx) })
	return n.shutdownErr
}

func (n *Node) shutdown(ctx context.Context) error {
	var errs []error
	n.draining.Store(true)
	n.data.Close()
	n.drainConns(ctx)

	leave := 2 * time.Second
	if d, ok := ctx.Deadline(); ok {
		leave = min(leave, time.Until(d))
	}
	if err := n.members.Leave(max(leave, 0)); err != nil {
		n.log.Warn("leave gossip", "err", err)
	}
	if err := n.members.Shutdown(); err != nil {
		errs = append(errs, fmt.Errorf("stop gossip: %w", err))
	}
	n.stopSweep()
	if n.http != nil {
		if err := n.http.Shutdown(ctx); err != nil {
			n.http.Close()
		}
	}
	done := make(chan struct{})
	go func() {
		n.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		n.closeConns()
		<-done
		errs = append(errs, fmt.Errorf("shutdown: %w", ctx.Err()))
	}
	n.log.Info("fcapd stopped")
	return errors.Join(errs...)
}

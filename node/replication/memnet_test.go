package replication

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/node/engine"
	"github.com/fcap-io/fcap/node/storage"
	"github.com/fcap-io/fcap/proto"
	"github.com/fcap-io/fcap/ring"
)

// memnet is an in-memory network between Replicators: it implements
// Peers and Conn, so replication is tested without sockets or whole
// nodes. Every message is encoded and decoded as on the wire. Links are
// directed (from, to) and can lose requests, lose requests yet answer
// them (a batch lost after its acknowledgement), lose answers (the receiver
// applied the request, the sender retries it: a duplicate), delay
// requests, deliver every request again after the next one (a stale
// batch arriving late: a reorder), or be cut one way or both.
type memnet struct {
	t *testing.T

	mu sync.Mutex
	// The fields below are guarded by mu.
	nodes     map[string]*memNode // by name, which is also the address
	cut       map[link]bool
	faults    map[link]*fault
	held      map[link][][]byte           // frames to deliver again after the next one (fault.replay)
	delivered map[link]map[proto.Type]int // requests handled per link and type
}

// link is a direction between two named peers.
type link struct{ from, to string }

// fault is what happens to the requests on one link.
type fault struct {
	drop int // the next drop requests are lost: the receiver sees nothing
	lose int // the next lose answers are lost: the receiver applied the request
	// swallow: the next swallow requests are lost, yet the sender gets
	// an empty answer as if they had been applied (a batch lost after
	// its acknowledgement).
	swallow int
	delay   time.Duration // each request waits this long first
	replay  bool          // each request is delivered again after the next one
	only    proto.Type    // the fault applies only to this type (0: to every type)
}

// errLost is what a sender sees of a message the network lost.
var errLost = errors.New("memnet: message lost")

func newMemnet(t *testing.T) *memnet {
	return &memnet{
		t:         t,
		nodes:     map[string]*memNode{},
		cut:       map[link]bool{},
		faults:    map[link]*fault{},
		held:      map[link][][]byte{},
		delivered: map[link]map[proto.Type]int{},
	}
}

// cutLink loses every request from one peer to another until healed.
func (n *memnet) cutLink(from, to string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.cut[link{from, to}] = true
}

// partition cuts the links between a and b both ways.
func (n *memnet) partition(a, b string) {
	n.cutLink(a, b)
	n.cutLink(b, a)
}

// heal restores the links between a and b both ways.
func (n *memnet) heal(a, b string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.cut, link{a, b})
	delete(n.cut, link{b, a})
}

// setFault sets what happens to the requests from one peer to another.
func (n *memnet) setFault(from, to string, f fault) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.faults[link{from, to}] = &f
}

// count returns how many requests of type typ from one peer the other
// handled.
func (n *memnet) count(from, to string, typ proto.Type) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.delivered[link{from, to}][typ]
}

// peers returns the Peers of the named node.
func (n *memnet) peers(from string) Peers { return memPeers{n, from} }

type memPeers struct {
	net  *memnet
	from string
}

func (p memPeers) Dial(ctx context.Context, addr string) (Conn, error) {
	p.net.mu.Lock()
	cut := p.net.cut[link{p.from, addr}]
	_, ok := p.net.nodes[addr]
	p.net.mu.Unlock()
	if cut || !ok {
		return nil, fmt.Errorf("memnet: dial %s from %s: %w", addr, p.from, errLost)
	}
	return &memConn{net: p.net, from: p.from, to: addr}, nil
}

func (p memPeers) Call(ctx context.Context, addr string, req, resp proto.Message) error {
	return p.net.call(ctx, link{p.from, addr}, req, resp)
}

type memConn struct {
	net      *memnet
	from, to string
	closed   atomic.Bool
}

func (c *memConn) Call(ctx context.Context, req, resp proto.Message) error {
	if c.closed.Load() {
		return errors.New("memnet: call on a closed connection")
	}
	return c.net.call(ctx, link{c.from, c.to}, req, resp)
}

func (c *memConn) Close() error {
	c.closed.Store(true)
	return nil
}

// call delivers one request on link l and decodes its answer into resp.
func (n *memnet) call(ctx context.Context, l link, req, resp proto.Message) error {
	frame, err := proto.AppendFrame(nil, 1, req)
	if err != nil {
		return err
	}
	n.mu.Lock()
	f := n.faults[l]
	if f != nil && f.only != 0 && f.only != req.Type() {
		f = nil
	}
	var delay time.Duration
	drop, lose, swallow, replay := n.cut[l], false, false, false
	if f != nil {
		delay, replay = f.delay, f.replay
		switch {
		case f.drop > 0:
			f.drop--
			drop = true
		case f.lose > 0:
			f.lose--
			lose = true
		case f.swallow > 0:
			f.swallow--
			swallow = true
		}
	}
	n.mu.Unlock()
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	if drop {
		return fmt.Errorf("%s to %s: %w", req.Type(), l.to, errLost)
	}
	if swallow {
		empty, err := proto.AppendFrame(nil, 1, proto.NewMessage(resp.Type()))
		if err != nil {
			return err
		}
		_, body := split(empty)
		return proto.Decode(body, resp)
	}
	answer, err := n.deliver(l, frame)
	if err != nil {
		return err
	}
	if replay {
		n.mu.Lock()
		stale := n.held[l]
		n.held[l] = [][]byte{frame}
		n.mu.Unlock()
		for _, old := range stale {
			if _, err := n.deliver(l, old); err != nil {
				n.t.Errorf("memnet: a stale %s to %s failed: %v", req.Type(), l.to, err)
			}
		}
	}
	if lose {
		return fmt.Errorf("the answer to %s from %s: %w", req.Type(), l.to, errLost)
	}
	hdr, body := split(answer)
	if hdr.Type == proto.TypeError {
		e := new(proto.Error)
		if err := proto.Decode(body, e); err != nil {
			return err
		}
		return e
	}
	if hdr.Type != resp.Type() {
		return fmt.Errorf("memnet: %s answered with %s, want %s", req.Type(), hdr.Type, resp.Type())
	}
	return proto.Decode(body, resp)
}

// deliver hands one encoded request to its receiver and returns the
// encoded answer.
func (n *memnet) deliver(l link, frame []byte) ([]byte, error) {
	hdr, body := split(frame)
	n.mu.Lock()
	node := n.nodes[l.to]
	n.mu.Unlock()
	if node == nil {
		return nil, fmt.Errorf("memnet: no node %q", l.to)
	}
	req := proto.NewMessage(hdr.Type)
	if req == nil {
		return nil, fmt.Errorf("memnet: unknown type %d", hdr.Type)
	}
	var answer proto.Message
	if err := proto.Decode(body, req); err != nil {
		answer = proto.NewError(err, 0)
	} else if res, err := node.serve(req); err != nil {
		answer = proto.NewError(err, 0)
	} else {
		answer = res
	}
	n.mu.Lock()
	if n.delivered[l] == nil {
		n.delivered[l] = map[proto.Type]int{}
	}
	n.delivered[l][hdr.Type]++
	n.mu.Unlock()
	return proto.AppendFrame(nil, hdr.ID, answer)
}

// split returns a frame's header and body.
func split(frame []byte) (proto.Header, []byte) {
	r := proto.NewReader(&onceReader{b: frame}, len(frame)+proto.HeaderSize)
	hdr, body, err := r.Next()
	if err != nil {
		panic(fmt.Sprintf("memnet: a frame it built does not read back: %v", err)) // a bug in memnet
	}
	return hdr, body
}

type onceReader struct{ b []byte }

func (r *onceReader) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	k := copy(p, r.b)
	r.b = r.b[k:]
	return k, nil
}

// memNode is one Replicator on a memnet, with its engine, serving what a
// node's handler serves of replication.
type memNode struct {
	name    string
	eng     *engine.Engine
	r       *Replicator
	metrics Metrics
	ring    atomic.Pointer[ring.Ring]
	plan    atomic.Pointer[Plan]
	// holdings counts HoldingsChanged calls.
	holdings atomic.Int64
	// left is what the Left hook reports: the node left the gossip
	// pool (a drain).
	left atomic.Bool
	// digested holds, per partition-level Verify this node answered,
	// the viewers it digested (anti-entropy's cost here).
	digestedMu sync.Mutex
	digested   []uint64
	// failed is what the Failed hook reports: members that vanished
	// without leaving.
	failed atomic.Int64
}

func (m *memNode) serve(req proto.Message) (proto.Message, error) {
	switch req := req.(type) {
	case *proto.Replicate:
		res, err := m.r.Apply(req)
		if x := m.ring.Load(); x != nil {
			res.Epoch = x.Epoch() // as the node's handler answers: from its ring
		}
		return &res, err
	case *proto.SyncRequest:
		return &proto.SyncResult{Pushing: m.r.ServeSync(req.From, req.Partitions, req.Handoffs, req.Relays, req.Copies)}, nil
	case *proto.Pull:
		return m.r.ServePull(req), nil
	case *proto.TopologyRequest:
		x := m.ring.Load()
		if x == nil {
			return nil, fmt.Errorf("%w: no ring yet", proto.ErrBadRequest)
		}
		t := &proto.Topology{Epoch: x.Epoch(), Partitions: x.Partitions(), Replicas: x.Replicas(), Owners: x.Table()}
		for _, mb := range x.Members() {
			t.Members = append(t.Members, proto.Member{Name: mb.Name, Addr: mb.Addr, State: uint8(mb.State), Incarnation: mb.Incarnation})
		}
		return t, nil
	case *proto.StatusRequest:
		x := m.ring.Load()
		if x == nil {
			return nil, fmt.Errorf("%w: no ring yet", proto.ErrBadRequest)
		}
		return &proto.Status{Name: m.name, Epoch: x.Epoch(), Syncing: uint64(m.r.SyncingCount(x))}, nil
	case *proto.Verify:
		x := m.ring.Load()
		if x == nil {
			return nil, fmt.Errorf("%w: no ring yet", proto.ErrBadRequest)
		}
		_, in := x.Find(m.name)
		res, err := storage.Verify(m.eng, nil, m.eng.Config(), x, m.name, in, m.r.Holds, req)
		if err == nil && !req.Viewers {
			n := uint64(0)
			for _, pd := range res.Partitions {
				n += pd.Viewers
			}
			m.digestedMu.Lock()
			m.digested = append(m.digested, n)
			m.digestedMu.Unlock()
		}
		return res, err
	}
	return nil, fmt.Errorf("%w: memnet nodes do not serve %s", proto.ErrBadRequest, req.Type())
}

// fakeClock is a clock tests step by hand.
type fakeClock struct{ ns atomic.Int64 }

func newFakeClock() *fakeClock {
	c := &fakeClock{}
	c.ns.Store(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	return c
}

func (c *fakeClock) Now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *fakeClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }

// noLog is a node that keeps no write-ahead log.
type noLog struct{}

func (noLog) Changed(uint64) uint64 { return 0 }
func (noLog) Wait(uint64)           {}

// cluster is a set of memNodes on one memnet, with one fake clock.
type cluster struct {
	t     *testing.T
	net   *memnet
	clock *fakeClock
	rcfg  ring.Config
	nodes map[string]*memNode
	incs  map[string]int64 // incarnations
}

// newCluster starts a Replicator per name; cfg adjusts their Config.
func newCluster(t *testing.T, cfg func(*Config), names ...string) *cluster {
	t.Helper()
	rcfg := ring.DefaultConfig()
	rcfg.Partitions = 13
	c := &cluster{t: t, net: newMemnet(t), clock: newFakeClock(), rcfg: rcfg, nodes: map[string]*memNode{}, incs: map[string]int64{}}
	for _, name := range names {
		c.start(name, cfg)
	}
	return c
}

// start starts (or restarts, with a new incarnation and an empty
// engine) the named node.
func (c *cluster) start(name string, cfg func(*Config)) *memNode {
	c.t.Helper()
	if old := c.nodes[name]; old != nil {
		old.r.Close()
		old.r.Wait()
	}
	ecfg := engine.DefaultConfig()
	ecfg.Stripes = 16
	eng, err := engine.New(ecfg)
	if err != nil {
		c.t.Fatal(err)
	}
	rc := DefaultConfig()
	rc.Name, rc.Ring = name, c.rcfg
	rc.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	if cfg != nil {
		cfg(&rc)
	}
	if err := rc.Validate(); err != nil {
		c.t.Fatal(err)
	}
	m := &memNode{name: name, eng: eng, metrics: newTestMetrics()}
	m.r = New(rc, Deps{Engine: eng, Log: noLog{}, Peers: c.net.peers(name), Metrics: m.metrics,
		Hooks: Hooks{HoldingsChanged: func() { m.holdings.Add(1) }, Left: m.left.Load, Failed: func() int { return int(m.failed.Load()) }}, Clock: c.clock.Now})
	c.incs[name]++
	c.net.mu.Lock()
	c.net.nodes[name] = m
	c.net.mu.Unlock()
	c.nodes[name] = m
	c.t.Cleanup(func() {
		m.r.Close()
		m.r.Wait()
	})
	return m
}

func newTestMetrics() Metrics {
	c := func(name string) prometheus.Counter { return prometheus.NewCounter(prometheus.CounterOpts{Name: name}) }
	return Metrics{
		Transfers: c("transfers"), ReplicatedBytes: c("bytes"), Errors: c("errors"),
		Refused: c("refused"), Claimed: c("claimed"),
		AntiEntropyRounds: c("ae_rounds"), DifferingPartitions: c("ae_differing"), RepairedViewers: c("ae_repaired"),
	}
}

// value reads a counter.
func value(x prometheus.Counter) float64 { return testutil.ToFloat64(x) }

// ring builds a ring of the named members, each in the state given
// (Active when states has no entry for it).
func (c *cluster) ring(states map[string]ring.State, names ...string) *ring.Ring {
	c.t.Helper()
	var ms []ring.Member
	for _, name := range names {
		st, ok := states[name]
		if !ok {
			st = ring.Active
		}
		ms = append(ms, ring.Member{Name: name, Addr: name, State: st, Incarnation: c.incs[name]})
	}
	x, err := ring.Build(c.rcfg, ms)
	if err != nil {
		c.t.Fatal(err)
	}
	return x
}

// onRing gives ring x to the named nodes (all of x's members when none
// are named), each planning and then starting its moves, as a node does.
func (c *cluster) onRing(x *ring.Ring, names ...string) {
	if len(names) == 0 {
		for _, m := range x.Members() {
			names = append(names, m.Name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		m := c.nodes[name]
		pl, start := m.r.OnRing(x)
		m.ring.Store(x)
		m.plan.Store(pl)
		start()
	}
}

// record records an impression of viewer on node name, at the cluster's
// clock, and marks the viewer for the node's targets, as a handler does.
func (c *cluster) record(name, viewer, id string) uint64 {
	c.t.Helper()
	pl := c.nodes[name].plan.Load()
	pl.Enter(0)
	defer pl.Leave(0)
	key := c.recordOnly(name, viewer, id)
	pl.Mark(key)
	return key
}

// recordOnly records an impression of viewer on node name's engine, at
// the cluster's clock, and returns the viewer's key; nothing marks it.
func (c *cluster) recordOnly(name, viewer, id string) uint64 {
	c.t.Helper()
	imp := fcap.Impression{ID: id, Time: c.clock.Now().UnixMilli(), Caps: []fcap.Cap{{Scope: "campaign", ID: "c1", Limit: 100, Window: time.Hour}}}
	if _, err := c.nodes[name].eng.Record(viewer, imp); err != nil {
		c.t.Fatal(err)
	}
	return fcap.ViewerKey(viewer)
}

// keyOf is the key of a viewer.
func keyOf(viewer string) uint64 { return fcap.ViewerKey(viewer) }

// digest is what node name's copy of viewer key counts now.
func (c *cluster) digest(name string, key uint64) uint64 {
	d, _ := c.nodes[name].eng.Digest(key, c.clock.Now().UnixMilli())
	return d
}

// viewerIn returns a viewer id of partition p.
func (c *cluster) viewerIn(p int, salt string) string {
	for i := 0; ; i++ {
		v := fmt.Sprintf("viewer-%s-%d", salt, i)
		if ring.PartitionOf(fcap.ViewerKey(v), c.rcfg.Partitions) == p {
			return v
		}
	}
}

// eventually polls cond until it holds, failing the test with what
// after a generous deadline.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

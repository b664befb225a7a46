package gossip

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fcap-io/fcap/ring"
	"github.com/hashicorp/memberlist"
)

// Membership follows the cluster through memberlist gossip and keeps the
// current Ring. Each membership change (a node joining, leaving, failing,
// or changing its metadata) builds a new immutable Ring on Membership's own
// goroutine and swaps it in whole; readers load it without a lock.
//
// It owns three goroutines, all stopped and waited for by Shutdown: one
// rebuilds the ring, one joins seeds (retrying with backoff until some seed
// answers, and re-joining seeds that are not members every
// ReconcileInterval so clusters that formed apart merge), and one tries
// to reach failed members again (reconnect.go).
type Membership struct {
	cfg     Config
	log     *slog.Logger
	list    *memberlist.Memberlist
	current atomic.Pointer[ring.Ring]

	dirty  chan struct{}      // size 1: the membership changed, rebuild
	kick   chan struct{}      // size 1: we may be alone, join now
	left   chan struct{}      // closed by Leave: stop joining
	stop   chan struct{}      // closed by Shutdown
	cancel context.CancelFunc // cancels the join loop's context (seed lookups)
	wg     sync.WaitGroup     // the goroutines

	viewMu sync.Mutex
	// view is guarded by viewMu: each live node as memberlist's event
	// callbacks last described it. They run while memberlist holds its
	// node lock, the only time a memberlist.Node may be read: Members()
	// and LocalNode() return pointers into structs memberlist rewrites in
	// place (hashicorp/memberlist#306), so Membership never reads those.
	view map[string]nodeView
	// failed and tombs are guarded by viewMu too: the members that
	// vanished without leaving, and the incarnations that left or were
	// forgotten (failed.go).
	failed map[string]FailedMember
	tombs  map[string]tombstone
	// retired is guarded by viewMu too: the peer regions an operator
	// retired (retired.go).
	retired map[string]RetiredRegion

	// gossip is our gossip address, read once after memberlist.Create
	// (only our own UpdateNode rewrites it afterwards, to the same value).
	gossip netip.AddrPort

	selfMu sync.Mutex
	// self and meta are guarded by selfMu. meta is never modified, only
	// replaced, so it may be handed to memberlist without a copy.
	self ring.Member
	meta []byte

	lifeMu sync.Mutex
	// hasLeft and isShutdown are guarded by lifeMu. SetState and Leave
	// hold it while they call memberlist, so neither runs into Shutdown
	// (memberlist panics on Leave after Shutdown).
	hasLeft    bool
	isShutdown bool

	// badMeta remembers the members whose metadata did not decode, so
	// each bad value is logged once; only the rebuild goroutine uses it.
	badMeta map[string]string

	// nameTaken receives the first name conflict found while Joining
	// (size 1, never blocks memberlist).
	nameTaken chan *ErrNameTaken

	// reconnecting is guarded by viewMu: the failed members a reconnect
	// try is under way for (reconnect.go).
	reconnecting map[string]bool

	joinMu sync.Mutex
	// joinFailures and lastJoinWarn are guarded by joinMu: each seed's
	// last failed join (cleared when it answers), and when the node last
	// warned that it is alone.
	joinFailures map[string]SeedFailure
	lastJoinWarn time.Time
}

// New creates the memberlist, builds the first ring (just us,
// owning every partition if Self is Active) and starts the goroutines
// that join seeds and rebuild the ring. It returns without waiting for a
// join: Ring() holds just us until some seed answers.
func New(cfg Config) (*Membership, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.UpdateTimeout == 0 {
		cfg.UpdateTimeout = defaultUpdateTimeout
	}
	cfg.Seeds = append([]string(nil), cfg.Seeds...)
	meta, err := cfg.Self.MarshalMeta()
	if err != nil {
		return nil, err
	}
	first, err := ring.Build(cfg.Ring, []ring.Member{cfg.Self})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Membership{
		log:     cfg.Logger,
		dirty:   make(chan struct{}, 1),
		kick:    make(chan struct{}, 1),
		left:    make(chan struct{}),
		stop:    make(chan struct{}),
		cancel:  cancel,
		self:    cfg.Self,
		meta:    meta,
		badMeta: make(map[string]string),
		view:    make(map[string]nodeView),
		failed:  make(map[string]FailedMember),
		tombs:   make(map[string]tombstone),
		retired: make(map[string]RetiredRegion),

		reconnecting: make(map[string]bool),

		nameTaken:    make(chan *ErrNameTaken, 1),
		joinFailures: make(map[string]SeedFailure),
	}
	m.current.Store(first)

	// memberlist writes to its Config (the port it bound, for one), so
	// it gets a copy with our hooks.
	ml := *cfg.Memberlist
	ml.Delegate = hooks{m}
	ml.Events = hooks{m}
	ml.Conflict = hooks{m}
	ml.LogOutput = nil
	ml.Logger = newStdLogger(cfg.Logger)
	cfg.Memberlist = &ml
	m.cfg = cfg

	list, err := memberlist.Create(&ml)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("ring: memberlist: %w", err)
	}
	m.list = list
	local := list.LocalNode()
	m.gossip = netip.AddrPortFrom(addrOf(local.Addr), local.Port)
	m.wg.Add(3)
	go m.rebuildLoop()
	go m.joinLoop(ctx)
	go m.reconnectLoop()
	m.markDirty()
	return m, nil
}

// Ring returns the current ring: an atomic load, no lock.
func (m *Membership) Ring() *ring.Ring { return m.current.Load() }

// Self returns our own metadata as last set.
func (m *Membership) Self() ring.Member {
	m.selfMu.Lock()
	defer m.selfMu.Unlock()
	return m.self
}

// GossipAddr returns the "host:port" other nodes reach our gossip on: the
// address memberlist advertises, with the port it actually bound (a
// BindPort of 0 resolves to the kernel's choice).
func (m *Membership) GossipAddr() string { return m.gossip.String() }

// NumMembers returns the number of members memberlist knows alive
// (including suspect ones, and us).
func (m *Membership) NumMembers() int { return m.list.NumMembers() }

// SetState updates our metadata and gossips it (memberlist's UpdateNode);
// every node's ring rebuilds with it. It waits up to UpdateTimeout for the
// update to reach some other node; on timeout the new state is already in
// effect here and spreads with the next gossip, and the error says so.
func (m *Membership) SetState(s ring.State) error {
	if !s.Valid() {
		return fmt.Errorf("%w: unknown %v", ring.ErrMember, s)
	}
	m.lifeMu.Lock()
	defer m.lifeMu.Unlock()
	if m.isShutdown {
		return ErrShutdown
	}
	if m.hasLeft {
		return ErrLeft
	}
	m.selfMu.Lock()
	self := m.self
	self.State = s
	meta, err := self.MarshalMeta()
	if err == nil {
		m.self, m.meta = self, meta
	}
	m.selfMu.Unlock()
	if err != nil {
		return err
	}
	m.markDirty()
	if err := m.list.UpdateNode(m.cfg.UpdateTimeout); err != nil {
		return fmt.Errorf("ring: state %v is set here but not yet gossiped: %w", s, err)
	}
	return nil
}

// Leave announces that we leave the cluster and waits up to timeout for
// the announcement to reach some other node. It gossips the Leaving
// state first (if not yet), so the others count it gone, not failed. The
// others drop us from their rings at once instead of after failure
// detection. We stop joining
// seeds; our own ring keeps the other members. Call Shutdown afterwards.
// Leaving twice is a no-op.
func (m *Membership) Leave(timeout time.Duration) error {
	m.lifeMu.Lock()
	defer m.lifeMu.Unlock()
	if m.isShutdown {
		return ErrShutdown
	}
	if m.hasLeft {
		return nil
	}
	m.hasLeft = true
	close(m.left)
	// Others tell a member that left from one that failed by its last
	// state (failed.go): gossip Leaving first if it is not yet.
	m.selfMu.Lock()
	self := m.self
	m.selfMu.Unlock()
	if self.State != ring.Leaving {
		self.State = ring.Leaving
		if meta, err := self.MarshalMeta(); err == nil {
			m.selfMu.Lock()
			m.self, m.meta = self, meta
			m.selfMu.Unlock()
			if err := m.list.UpdateNode(timeout); err != nil {
				m.log.Warn("ring: leaving without having gossiped the Leaving state; others may count this node failed", "err", err)
			}
		}
	}
	err := m.list.Leave(timeout)
	m.markDirty()
	if err != nil {
		return fmt.Errorf("ring: leave: %w", err)
	}
	return nil
}

// Shutdown stops gossip and Membership's goroutines and waits for them.
// Without a Leave first, other nodes drop us only once their failure
// detection declares us dead. It waits for a SetState or Leave in
// progress, and for a join in progress (up to memberlist's TCPTimeout).
// It is safe to call twice; Ring keeps returning the last ring.
func (m *Membership) Shutdown() error {
	m.lifeMu.Lock()
	if m.isShutdown {
		m.lifeMu.Unlock()
		return nil
	}
	m.isShutdown = true
	m.lifeMu.Unlock()

	m.cancel()
	close(m.stop)
	m.wg.Wait()
	if err := m.list.Shutdown(); err != nil {
		return fmt.Errorf("ring: memberlist shutdown: %w", err)
	}
	return nil
}

// markDirty asks the rebuild goroutine for a new ring without blocking:
// a pending request already covers this one.
func (m *Membership) markDirty() {
	select {
	case m.dirty <- struct{}{}:
	default:
	}
}

// rebuildLoop rebuilds the ring each time the membership changes.
func (m *Membership) rebuildLoop() {
	defer m.wg.Done()
	for {
		select {
		case <-m.stop:
			return
		case <-m.dirty:
		}
		if d := m.cfg.Coalesce; d > 0 && m.setChanges() {
			t := time.NewTimer(d)
			select {
			case <-m.stop:
				t.Stop()
				return
			case <-t.C:
			}
		}
		m.rebuild()
	}
}

// setChanges reports whether a rebuild now would change the member set
// other than by a drain: drop a member of the current ring that was not
// leaving (it failed), or add one.
func (m *Membership) setChanges() bool {
	cur := m.current.Load()
	if cur == nil {
		return false
	}
	m.viewMu.Lock()
	defer m.viewMu.Unlock()
	for _, mem := range cur.Members() {
		if _, ok := m.view[mem.Name]; !ok && mem.State != ring.Leaving {
			return true
		}
	}
	for name := range m.view {
		if _, ok := cur.Find(name); !ok {
			return true
		}
	}
	return false
}

// nodeView is what Membership keeps of a live memberlist node.
type nodeView struct {
	addr netip.AddrPort // gossip address
	meta []byte
}

// observe records a node a memberlist event described (with memberlist's
// node lock held): a copy, never the node itself.
func (m *Membership) observe(n *memberlist.Node) {
	v := nodeView{addr: netip.AddrPortFrom(addrOf(n.Addr), n.Port), meta: bytes.Clone(n.Meta)}
	m.viewMu.Lock()
	m.view[n.Name] = v
	delete(m.failed, n.Name) // it came back
	delete(m.tombs, n.Name)
	m.viewMu.Unlock()
	m.markDirty()
}

// snapshot returns a copy of the view.
func (m *Membership) snapshot() map[string]nodeView {
	m.viewMu.Lock()
	defer m.viewMu.Unlock()
	return maps.Clone(m.view)
}

// rebuild builds a ring from the live nodes and swaps it in if its epoch
// differs from the current one.
func (m *Membership) rebuild() {
	nodes := m.snapshot()
	members := make([]ring.Member, 0, len(nodes))
	for name, n := range nodes {
		mem, err := ring.UnmarshalMeta(name, n.meta)
		if err != nil {
			if m.badMeta[name] != string(n.meta) {
				m.badMeta[name] = string(n.meta)
				m.log.Warn("ring: skipping a member whose metadata does not decode", "node", name, "addr", n.addr, "err", err)
			}
			continue
		}
		delete(m.badMeta, name)
		members = append(members, mem)
	}
	for name := range m.badMeta {
		if _, ok := nodes[name]; !ok {
			delete(m.badMeta, name)
		}
	}
	if len(nodes) <= 1 {
		m.kickJoin()
	}
	r, err := ring.Build(m.cfg.Ring, members)
	if err != nil {
		m.log.Error("ring: cannot build a ring; keeping the current one", "members", len(members), "err", err)
		return
	}
	old := m.current.Load()
	if r.Epoch() == old.Epoch() {
		return
	}
	m.current.Store(r)
	m.log.Info("ring: new ring", "epoch", fmt.Sprintf("%016x", r.Epoch()), "members", len(r.Members()),
		"active", r.ActiveMembers(), "moved_primaries", ring.MovedPrimaries(old, r))
	if m.cfg.OnChange != nil {
		m.cfg.OnChange(old, r)
	}
}

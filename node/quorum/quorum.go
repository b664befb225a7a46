// Package quorum tells a node whether it may grant strict writes: only
// while a majority of the cluster's member set confirmed, recently, that
// it routes by the same ring.
//
// The member set is the ring's members plus the failed ones (a member
// that vanished counts until it returns, leaves by a drain, or an
// operator forgets it: node/gossip). The tracker asks every other member
// of the ring for its epoch (a Ping, answered with a Pong carrying it)
// every Interval, each on a connection of its own. A Pong whose epoch is
// this node's current epoch confirms that member as of the moment the
// Ping was sent. The node holds the quorum for epoch E until
//
//	the k-th newest confirmation of E + Lease,   k = floor(N/2)
//
// where N is the member set's size: with itself, k confirmations make
// more than half. So a node cut off from the others stops granting at
// most Lease after the last Ping that got through was sent, whatever its
// own failure detector believes; a node paused (SIGSTOP) finds its lease
// run out when it resumes, since the monotonic clock ran on.
//
// Confirmations are of an epoch, not only of liveness: two nodes hold a
// quorum at once only for the same ring (two majorities of one member set
// intersect, and the member in both answers with one epoch at a time), so
// they agree on each partition's primary. Only times on this node's own
// monotonic clock are compared: clock drift between nodes does not enter.
package quorum

import (
	"context"
	"log/slog"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fcap-io/fcap/proto"
	"github.com/fcap-io/fcap/ring"
)

// Conn is a connection to one peer: calls one at a time.
type Conn interface {
	Call(ctx context.Context, req, resp proto.Message) error
	Close() error
}

// Dialer opens connections to peers' data planes.
type Dialer interface {
	Dial(ctx context.Context, addr string) (Conn, error)
}

// Members is what the tracker needs of the membership.
type Members interface {
	// Ring is the current ring.
	Ring() *ring.Ring
	// OutsideRing counts the members of the member set that ring r does
	// not hold: failed members not forgotten, and live members r does
	// not show yet (back from a cut, or joining, while the ring change
	// that adds them waits). The member set is r's members and those.
	OutsideRing(r *ring.Ring) int
}

// Config configures a Tracker.
type Config struct {
	// Self is this node's name.
	Self string
	// Interval is how often each peer is asked for its epoch. Default
	// 200ms.
	Interval time.Duration
	// Lease is how long a peer's confirmation counts, from when its Ping
	// was sent. Default 1s: a node cut off from the majority stops
	// granting strict writes at most this long after its last Ping that
	// got through.
	Lease time.Duration
	// Logger receives transitions (quorum gained, lost). Default
	// slog.Default().
	Logger *slog.Logger
	// Now is the clock, for tests: a monotonic reading. Default
	// time.Now.
	Now func() time.Time
	// Reacquire, if not nil, is called when this node's quorum lapsed and
	// a peer says it routed by a ring without this node meanwhile
	// (Pong.Absent): others may have granted strict writes on this node's
	// partitions, so it must take their copies before it grants again.
	// It is called on a pinger's goroutine before the confirmation in the
	// same Pong counts, and must not block.
	Reacquire func()
	// Gained, if not nil, is called each time this node comes to hold
	// the quorum (its ring confirmed by a majority), with the tracker's
	// lock held: it must not block nor call the Tracker. The node asks
	// at once for the copies its claims wait for, which count only when
	// asked under the quorum (replication/copies.go).
	Gained func()
}

// DefaultConfig returns the defaults for a node named self.
func DefaultConfig(self string) Config {
	return Config{Self: self, Interval: 200 * time.Millisecond, Lease: time.Second}
}

// Tracker keeps the quorum of one node.
type Tracker struct {
	cfg     Config
	members Members
	dial    Dialer
	base    time.Time // the monotonic origin of every stored time

	held atomic.Pointer[holding] // read on every strict write, without a lock

	ctx    context.Context // canceled by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // the pingers

	mu sync.Mutex
	// peers, confirmed, closed and wasHeld are guarded by mu.
	peers     map[string]*peer // the pinger of each other ring member, by name
	confirmed map[string]stamp // each member's last confirmation
	closed    bool
	wasHeld   bool   // for logging transitions only
	epoch     uint64 // the epoch the confirmations are of
	everHeld  bool   // it held a quorum since it started or last reacquired
	heldUntil int64  // until when it held a quorum last, whatever the epoch (ns since base)
	lapsed    bool   // it held the quorum and lost it since the last Reacquire
	// reacquiring counts Reacquire calls under way: no quorum holds
	// meanwhile, whichever peer confirms (absent).
	reacquiring int
}

// holding is the quorum as last computed: for which epoch and until when.
type holding struct {
	epoch uint64
	until int64 // ns since base; math.MaxInt64: forever (a member set of one)
	state State
}

// stamp is a peer's confirmation: its epoch, and when the Ping it
// answered was sent.
type stamp struct {
	epoch uint64
	sent  int64 // ns since base
}

// peer is the goroutine asking one member.
type peer struct {
	name, addr string
	ctx        context.Context // canceled when the member left the ring
	stop       context.CancelFunc
	kick       chan struct{} // size 1: ask now (the epoch changed)
}

// State describes the quorum for status and metrics.
type State struct {
	// Epoch is the epoch the quorum is counted for.
	Epoch uint64
	// Members is the member set's size: ring members plus failed ones.
	Members int
	// Confirmed is how many members (itself included) confirmed Epoch
	// within the lease.
	Confirmed int
	// Needed is how many make a majority.
	Needed int
}

// Holds reports whether Confirmed reaches Needed.
func (s State) Holds() bool { return s.Confirmed >= s.Needed }

// New returns a Tracker; Update starts its pingers.
func New(cfg Config, members Members, dial Dialer) *Tracker {
	d := DefaultConfig(cfg.Self)
	if cfg.Interval <= 0 {
		cfg.Interval = d.Interval
	}
	if cfg.Lease <= 0 {
		cfg.Lease = d.Lease
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	t := &Tracker{cfg: cfg, members: members, dial: dial, peers: map[string]*peer{}, confirmed: map[string]stamp{}}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	t.base = cfg.Now()
	t.held.Store(&holding{})
	return t
}

func (t *Tracker) now() int64 { return int64(t.cfg.Now().Sub(t.base)) }

// Holds reports whether this node holds a quorum for epoch now: an
// atomic load and a clock reading.
func (t *Tracker) Holds(epoch uint64) bool {
	h := t.held.Load()
	return h.epoch == epoch && epoch != 0 && t.now() < h.until
}

// State returns the quorum as of now.
func (t *Tracker) State() State {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.computeLocked().state
}

// Update follows a new ring or member set: it starts a pinger for each
// new peer, stops those of members gone, asks every peer at once (an
// epoch change needs new confirmations) and recomputes the quorum.
func (t *Tracker) Update() {
	r := t.members.Ring()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	if r.Epoch() != t.epoch {
		// A new ring: what peers confirmed was the old one. Peers that
		// promised it (Promises) see this node's next Ping name the new
		// epoch and release the promise.
		t.epoch = r.Epoch()
		clear(t.confirmed)
		if t.heldUntil == math.MaxInt64 {
			// A member set of one held its quorum without end; it ends
			// with that ring, as a lease confirmed now would: a node
			// that joins others and is confirmed by them within it has
			// not lapsed.
			t.heldUntil = t.now() + int64(t.cfg.Lease)
		}
	}
	want := map[string]string{}
	for _, m := range r.Members() {
		if m.Name != t.cfg.Self {
			want[m.Name] = m.Addr
		}
	}
	for name, p := range t.peers {
		if addr, ok := want[name]; !ok || addr != p.addr {
			p.stop()
			delete(t.peers, name)
		}
	}
	for name := range t.confirmed {
		if _, ok := want[name]; !ok {
			delete(t.confirmed, name)
		}
	}
	for name, addr := range want {
		p, ok := t.peers[name]
		if !ok {
			p = &peer{name: name, addr: addr, kick: make(chan struct{}, 1)}
			p.ctx, p.stop = context.WithCancel(t.ctx)
			t.peers[name] = p
			t.wg.Add(1)
			go t.ping(p)
			continue
		}
		select {
		case p.kick <- struct{}{}:
		default:
		}
	}
	t.storeLocked()
}

// Close stops the pingers and waits for them; the quorum is lost. It is
// safe to call twice.
func (t *Tracker) Close() {
	t.mu.Lock()
	if !t.closed {
		t.closed = true
		t.cancel()
		t.held.Store(&holding{})
	}
	t.mu.Unlock()
	t.wg.Wait()
}

// ping asks one peer for its epoch every Interval, on one connection
// redialled after any error, until it is stopped.
func (t *Tracker) ping(p *peer) {
	defer t.wg.Done()
	var conn Conn
	defer func() {
		if conn != nil {
			conn.Close()
		}
	}()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-p.ctx.Done():
			return
		case <-timer.C:
		case <-p.kick:
		}
		sent := t.now()
		epoch := t.members.Ring().Epoch()
		cctx, ccancel := context.WithTimeout(p.ctx, t.cfg.Lease)
		if conn == nil {
			c, err := t.dial.Dial(cctx, p.addr)
			if err == nil {
				conn = c
			}
		}
		if conn != nil {
			var pong proto.Pong
			if err := conn.Call(cctx, &proto.Ping{From: t.cfg.Self, FromEpoch: epoch}, &pong); err != nil {
				conn.Close()
				conn = nil
			} else if pong.Name == "" || pong.Name == p.name {
				if pong.Absent {
					t.absent(p.name)
				}
				if pong.Epoch == epoch {
					t.confirm(p.name, pong.Epoch, sent)
				}
			}
		}
		ccancel()
		t.refresh() // a lease may have run out meanwhile
		timer.Reset(t.cfg.Interval)
	}
}

// confirm records that peer name routed by epoch when a Ping sent at
// sent was answered.
func (t *Tracker) confirm(name string, epoch uint64, sent int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	if _, ok := t.peers[name]; !ok || epoch != t.epoch {
		return // a confirmation of a ring this node left meanwhile
	}
	if old, ok := t.confirmed[name]; ok && old.sent > sent {
		return
	}
	t.confirmed[name] = stamp{epoch: epoch, sent: sent}
	t.storeLocked()
}

// absent handles a peer's word that it routed by a ring without this
// node: if this node's quorum lapsed meanwhile, it reacquires its
// partitions before any confirmation counts again.
func (t *Tracker) absent(peer string) {
	t.mu.Lock()
	t.noteLapseLocked()
	reacquire := t.lapsed && !t.closed
	if reacquire {
		// A lapse again only once a quorum was held again after this.
		t.lapsed, t.everHeld = false, false
		// Until the partitions are reacquired no quorum holds: another
		// peer's pinger, whose Pong says Absent too, finds no lapse left
		// and confirms at once, and one confirmation may be a majority.
		// The partsuite's one-way caught it: the node cut off granted a
		// strict Allow from its copy of before the cut in the 0.7 ms
		// between the other pinger's confirmation and the claims.
		t.reacquiring++
		t.storeLocked()
	}
	t.mu.Unlock()
	if !reacquire {
		return
	}
	t.cfg.Logger.Warn("quorum: lost the majority while others routed without this node: taking the current copies of its partitions before granting strict writes again", "peer", peer)
	if t.cfg.Reacquire != nil {
		t.cfg.Reacquire()
	}
	t.mu.Lock()
	t.reacquiring--
	if !t.closed {
		t.storeLocked()
	}
	t.mu.Unlock()
}

// noteLapseLocked notes that the quorum held before ran out. t.mu must
// be held.
//
// A lapse is time without any quorum: a ring change whose new epoch a
// majority confirms before the old quorum would have run out is none.
func (t *Tracker) noteLapseLocked() {
	if t.everHeld && t.now() >= t.heldUntil {
		t.lapsed = true
	}
}

// refresh recomputes the quorum, so an expiry is published (and logged)
// even when no confirmation arrives.
func (t *Tracker) refresh() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.closed {
		t.storeLocked()
	}
}

// storeLocked recomputes the quorum and publishes it. t.mu must be held.
func (t *Tracker) storeLocked() {
	t.noteLapseLocked()
	h := t.computeLocked()
	t.held.Store(h)
	holds := t.now() < h.until
	if holds {
		t.everHeld = true
		t.heldUntil = max(t.heldUntil, h.until)
	}
	if holds != t.wasHeld {
		t.wasHeld = holds
		if holds {
			t.cfg.Logger.Info("quorum: a majority of the member set routes by this node's ring; strict writes allowed",
				"members", h.state.Members, "confirmed", h.state.Confirmed)
			if t.cfg.Gained != nil {
				t.cfg.Gained()
			}
		} else {
			t.cfg.Logger.Warn("quorum: lost the majority of the member set; strict writes fail closed",
				"members", h.state.Members, "confirmed", h.state.Confirmed, "needed", h.state.Needed)
		}
	}
}

// computeLocked computes the quorum from the current ring, the failed
// members and the confirmations. t.mu must be held.
func (t *Tracker) computeLocked() *holding {
	r := t.members.Ring()
	epoch := r.Epoch()
	_, in := r.Find(t.cfg.Self)
	n := len(r.Members()) + t.members.OutsideRing(r)
	if !in {
		n++ // not in its own ring (it left): it still counts itself
	}
	need := n/2 + 1
	st := State{Epoch: epoch, Members: n, Needed: need}
	if t.closed || !in || t.reacquiring > 0 {
		return &holding{state: st}
	}
	now := t.now()
	var sents []int64
	for _, m := range r.Members() {
		if m.Name == t.cfg.Self {
			continue
		}
		if c, ok := t.confirmed[m.Name]; ok && c.epoch == epoch {
			sents = append(sents, c.sent)
		}
	}
	slices.Sort(sents)
	slices.Reverse(sents) // newest first
	k := need - 1         // confirmations needed besides its own
	h := &holding{epoch: epoch, state: st}
	switch {
	case k == 0:
		h.until = math.MaxInt64
	case len(sents) >= k:
		h.until = sents[k-1] + int64(t.cfg.Lease)
	}
	for _, s := range sents {
		if now < s+int64(t.cfg.Lease) {
			st.Confirmed++
		}
	}
	st.Confirmed++ // itself
	h.state = st
	return h
}

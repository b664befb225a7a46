// Package client is the smart client an ad server embeds to talk to an
// fcap cluster: it learns the topology from any seed node and keeps it
// current, routes each call to the viewer's owner in one hop over
// persistent multiplexed connections, bounds every call with a deadline,
// and never lets a slow or dead cluster stop ads: a call the cluster
// cannot answer in time returns a verdict marked FailOpen (soft caps) or
// FailClosed (strict caps) instead of an error. Impressions are recorded
// asynchronously through a bounded queue with retries.
//
// Config{Seeds: seeds} is a complete configuration: every zero field
// means its documented default. New refuses, with ErrBadConfig, a
// configuration that can never work (no seeds, a seed that is not
// host:port); it does not wait for the cluster, as grpc-go's NewClient
// does not. WaitReady does: it returns once every member that owns
// partitions is connected, or an error naming each seed and what
// answered there (nothing, an HTTP server, a TLS server, another
// protocol), so a typo or a node's HTTP port shows at startup:
//
//	c, err := client.New(client.Config{Seeds: seeds})
//	if err != nil { ... }          // ErrBadConfig
//	if err := c.WaitReady(ctx); err != nil { ... } // ErrUnavailable, naming each seed
//
// A client that has never reached its cluster is misconfigured or
// started before it, not slow: every Check, Allow and Reserve then
// returns the failure policy's verdicts together with an error wrapping
// ErrUnavailable that names the seeds, and Record queues the impression
// and returns the same error; fcap_client_cluster_reached is 0. Once a
// node has answered, a cluster that is late or down is the failure
// policy's business alone: verdicts marked FailOpen or FailClosed and
// err == nil. A caller that serves ads whatever happens keeps the
// verdicts and logs the error. Errors are described beside ErrClosed
// (errors.go): a cancelled context is an error, not a verdict; an
// operation without a failure policy that the cluster cannot answer
// returns ErrUnavailable.
package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fcap-io/fcap/proto"
	"github.com/fcap-io/fcap/ring"
)

// Client is safe for concurrent use. Create it with New and stop it with
// Close.
type Client struct {
	cfg    Config
	log    *slog.Logger
	m      *metrics
	margin time.Duration // Config.Margin resolved

	// hedgeShare is Config.HedgeBudget resolved, in thousandths of a
	// hedge per check that could hedge; hedgeTokens is the budget saved
	// up, in thousandths (see earnHedge).
	hedgeShare  int64
	hedgeTokens atomic.Int64

	topo atomic.Pointer[topology]

	peersMu sync.Mutex
	// peers holds a peer per data-plane address in use; guarded by peersMu.
	peers map[string]*peer
	// retired holds connections that take no new call but still wait
	// for the answers to calls sent on them (retire); guarded by
	// peersMu. Close closes them.
	retired map[*conn]struct{}

	refreshMu sync.Mutex // one topology fetch at a time
	// departed holds, by name, the incarnation of each member that left
	// the topology after it was seen draining (Leaving); guarded by
	// refreshMu (install). A ring that shows one of them Leaving again
	// is older than the one installed: a drained node comes back only
	// as a new process.
	departed    map[string]int64
	refreshErr  atomic.Pointer[error]           // why the last topology fetch failed; nil after one succeeds
	unreached   atomic.Pointer[unreachedReport] // neverReached's last report
	refreshHint chan string                     // addresses whose responses carried another epoch
	rec         *recorder                       // the asynchronous Record path
	undos       chan giveBack                   // late strict grants to give back (undo.go)
	resolved    *resolveCache                   // device resolutions (identity.go)
	stop        chan struct{}                   // closed by Close
	wg          sync.WaitGroup

	closeOnce sync.Once
	closeErr  error
}

// topology is what the client routes by: a ring snapshot and a peer for
// each member.
type topology struct {
	ring     *ring.Ring    // nil until a node has answered
	peers    []*peer       // by member index; nil for members without an address
	replaced chan struct{} // closed when a newer topology is installed
}

func newTopology(r *ring.Ring, peers []*peer) *topology {
	return &topology{ring: r, peers: peers, replaced: make(chan struct{})}
}

// New starts a client. It asks the seeds for the topology (waiting at
// most about twice DialTimeout) and returns even if none answered: the
// client then keeps trying in the background, and until a node answers
// every call gives the failure policy's verdicts with an error wrapping
// ErrUnavailable. Use WaitReady to block until the cluster is reachable
// and learn what answered at each seed if it is not. New returns an
// error only for an invalid configuration (ErrBadConfig, naming the
// field and the value) or metrics that clash on Config.Registerer.
func New(cfg Config) (*Client, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c := &Client{
		cfg:         cfg,
		margin:      margin(cfg),
		hedgeShare:  hedgeShare(cfg),
		log:         cfg.Logger.With("component", "fcap-client"),
		peers:       map[string]*peer{},
		refreshHint: make(chan string, 1),
		stop:        make(chan struct{}),
		undos:       make(chan giveBack, undoQueue),
	}
	c.hedgeTokens.Store(min(c.hedgeShare, 1) * hedgeBurst) // a client starts with the budget saved up
	var err error
	gauges := nodeGauges{
		reached: func() float64 {
			if c.reached() {
				return 1
			}
			return 0
		},
		active:    func() float64 { a, _ := c.nodeCounts(); return float64(a) },
		connected: func() float64 { _, n := c.nodeCounts(); return float64(n) },
	}
	if c.m, err = newMetrics(metricsRegisterer(cfg), gauges); err != nil {
		return nil, err
	}
	c.topo.Store(newTopology(nil, nil))
	c.resolved = newResolveCache(cfg.ResolveCacheSize, cfg.ResolveTTL)
	c.rec = newRecorder(c)
	ctx, cancel := context.WithTimeout(context.Background(), 2*cfg.DialTimeout)
	if err := c.refresh(ctx, ""); err != nil {
		c.log.Warn("no fcap node answered yet; until one does, calls give the failure policy's verdicts and ErrUnavailable", "seeds", cfg.Seeds, "err", err)
	}
	cancel()
	c.goFunc(c.refreshLoop)
	c.goFunc(c.undoLoop)
	c.rec.start()
	return c, nil
}

func (c *Client) goFunc(f func()) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		f()
	}()
}

// WaitReady blocks until the client is as ready as it will get: it knows
// the topology, at least one member owns partitions, and every member
// that does has all its Config.ConnsPerNode connections up, each
// answered by an fcap node (see DialError). The first call after it is
// then served like any later one: no connection is still opening, no
// member still joining. Like grpc-go's lazy connect and
// WaitForStateChange, New never waits for the cluster and WaitReady is
// how a program waits (go-redis users: it is the Ping).
//
// It returns nil, ErrClosed after Close, or an error wrapping
// ErrUnavailable (and ctx's error, when ctx ended) that names each seed
// (or, once the topology is known, each member not connected) and what
// answered there: nothing (refused, timed out), an HTTP server, a TLS
// server, another protocol, or an fcap node that refused the client;
// errors.As finds each *DialError. It returns before ctx ends when no
// node was ever reached and every seed answered with something that
// waiting will not change (another protocol, a refused token or
// certificate); for nothing at all (a refused connection, a node still
// starting) it keeps trying until ctx ends.
func (c *Client) WaitReady(ctx context.Context) error {
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		t := c.topo.Load()
		switch {
		case t.ring == nil:
			if c.seedsSettled() {
				return c.notReady(t, nil)
			}
			c.unroutable() // ask the seeds again now, not at the refresh loop's backoff
		case t.ring.ActiveMembers() == 0:
			c.unroutable() // every member still joining: ask again until one owns partitions
		case c.ready(t):
			return nil
		}
		select {
		case <-ctx.Done():
			return c.notReady(c.topo.Load(), ctx.Err())
		case <-c.stop:
			return ErrClosed
		case <-tick.C:
		}
	}
}

// ready reports whether every member of t that owns partitions has all
// its connections up (and starts dials for those that have not).
func (c *Client) ready(t *topology) bool {
	for i, m := range t.ring.Members() {
		if m.State != ring.Active {
			continue
		}
		if p := t.peers[i]; p == nil || !p.full() {
			return false
		}
	}
	return true
}

// reached reports whether a node has ever answered the client with the
// topology. It stays true from then on.
func (c *Client) reached() bool { return c.topo.Load().ring != nil }

// nodeCounts returns the members of the topology that own partitions,
// and how many of them have a connection up.
func (c *Client) nodeCounts() (active, connected int64) {
	t := c.topo.Load()
	if t.ring == nil {
		return 0, 0
	}
	for i, m := range t.ring.Members() {
		if m.State != ring.Active {
			continue
		}
		active++
		if p := t.peers[i]; p != nil && p.live() {
			connected++
		}
	}
	return active, connected
}

// seedsSettled reports whether every seed's last dial failed in a way
// that waiting will not change (see DialError).
func (c *Client) seedsSettled() bool {
	c.peersMu.Lock()
	defer c.peersMu.Unlock()
	for _, s := range c.cfg.Seeds {
		p := c.peers[s]
		if p == nil || !settledErr(p.dialError()) {
			return false
		}
	}
	return true
}

// notReady is WaitReady's error for topology t: ErrUnavailable, cause
// (ctx's error) when not nil, and what each seed (no topology yet) or
// each member that owns partitions and is not connected answered.
func (c *Client) notReady(t *topology, cause error) error {
	causes := []error{ErrUnavailable}
	msg := ErrUnavailable.Error() + ": not ready"
	if cause != nil {
		causes = append(causes, cause)
		msg += " (" + cause.Error() + ")"
	}
	var lines []string
	switch {
	case t.ring == nil:
		lines, causes = c.seedReport(causes)
	case t.ring.ActiveMembers() == 0:
		lines = append(lines, fmt.Sprintf("the topology (%d members) has none that owns partitions yet: every node still joining?", len(t.ring.Members())))
	default:
		for i, m := range t.ring.Members() {
			p := t.peers[i]
			if m.State != ring.Active || p == nil || p.full() {
				continue
			}
			err := p.dialError()
			if err == nil {
				lines = append(lines, "member "+m.Name+" "+m.Addr+": connecting")
				continue
			}
			causes = append(causes, err)
			lines = append(lines, describeAddr("member "+m.Name, m.Addr, err))
		}
	}
	return &causedError{msg: msg + ": " + strings.Join(lines, "; "), causes: causes}
}

// seedReport says, for each seed, what answered there; it appends the
// seeds' errors to causes.
func (c *Client) seedReport(causes []error) ([]string, []error) {
	lines := []string{"no node has answered with the topology"}
	c.peersMu.Lock()
	defer c.peersMu.Unlock()
	for _, s := range c.cfg.Seeds {
		var err error
		if p := c.peers[s]; p == nil {
			err = errors.New("not tried yet")
		} else if err = p.dialError(); err == nil {
			if p.live() {
				if rerr := c.refreshErr.Load(); rerr != nil {
					err = fmt.Errorf("connected, but the topology request failed: %w", *rerr)
				}
			} else {
				err = errors.New("connecting")
			}
		}
		if err != nil {
			causes = append(causes, err)
		}
		lines = append(lines, describeAddr("seed", s, err))
	}
	return lines, causes
}

// neverReached is the error every call returns beside its policy verdict
// while no node has ever answered the client: ErrUnavailable, naming each
// seed and what answered there. It is nil once a node has answered. The
// report is rebuilt at most every unreachedEvery, so a busy ad server
// with a misconfigured client does not lock and format on every call.
func (c *Client) neverReached() error {
	if c.reached() {
		return nil
	}
	if r := c.unreached.Load(); r != nil && time.Since(r.at) < unreachedEvery {
		return r.err
	}
	lines, causes := c.seedReport([]error{ErrUnavailable})
	err := &causedError{
		msg:    ErrUnavailable.Error() + ": the client has never reached the cluster (verdicts by the failure policy): " + strings.Join(lines, "; "),
		causes: causes,
	}
	c.unreached.Store(&unreachedReport{at: time.Now(), err: err})
	return err
}

const unreachedEvery = 100 * time.Millisecond

type unreachedReport struct {
	at  time.Time
	err error
}

// Close flushes queued impressions (until ctx ends), then closes every
// connection and waits for the client's goroutines. Every call after
// Close returns ErrClosed (Record too, and Check, Allow and Reserve give
// no verdict). Calling it again returns the first result.
func (c *Client) Close(ctx context.Context) error {
	c.closeOnce.Do(func() {
		c.closeErr = c.rec.close(ctx)
		close(c.stop)
		c.peersMu.Lock()
		for _, p := range c.peers {
			p.close(errClientClosed)
		}
		retired := c.retired
		c.retired = nil
		c.peersMu.Unlock()
		for cn := range retired {
			cn.close(errClientClosed)
		}
		c.wg.Wait()
	})
	return c.closeErr
}

// Ring returns the topology the client routes by, nil before any node
// answered.
func (c *Client) Ring() *ring.Ring { return c.topo.Load().ring }

// peerFor returns the peer for an address, creating it.
func (c *Client) peerFor(addr string) *peer {
	c.peersMu.Lock()
	defer c.peersMu.Unlock()
	p := c.peers[addr]
	if p == nil {
		p = newPeer(c, addr)
		c.peers[addr] = p
	}
	return p
}

// route returns the owners of a viewer in the current topology.
func (c *Client) route(viewer string) (*topology, []uint16) {
	t := c.topo.Load()
	if t.ring == nil {
		return t, nil
	}
	_, owners := t.ring.Lookup(viewer)
	return t, owners
}

// noteEpoch asks for a topology refresh when a node answered with an
// epoch other than the client's.
func (c *Client) noteEpoch(epoch uint64, from *peer) {
	if t := c.topo.Load(); t.ring != nil && t.ring.Epoch() == epoch {
		return
	}
	select {
	case c.refreshHint <- from.addr:
	default:
	}
}

// unroutable asks for a topology refresh when the client's topology names
// no reachable owner for a viewer: a node that was still joining when the
// topology was fetched, say. No answer would carry a new epoch to prompt
// a refresh, so without this the client would wait for RefreshInterval.
// The refresh loop paces these (one refresh per 50 ms at most).
func (c *Client) unroutable() {
	select {
	case c.refreshHint <- "":
	default:
	}
}

func (c *Client) refreshLoop() {
	tick := time.NewTicker(c.cfg.RefreshInterval)
	defer tick.Stop()
	retry := 50 * time.Millisecond
	for {
		hint := ""
		var wait <-chan time.Time
		if c.topo.Load().ring == nil {
			wait = time.After(retry) // nothing known yet: keep asking
			retry = min(2*retry, c.cfg.RefreshInterval)
		}
		select {
		case <-c.stop:
			return
		case hint = <-c.refreshHint:
		case <-tick.C:
		case <-wait:
		}
		ctx, cancel := context.WithTimeout(context.Background(), max(4*c.cfg.DialTimeout, time.Second))
		if err := c.refresh(ctx, hint); err != nil {
			c.log.Debug("topology refresh", "err", err)
		}
		cancel()
		// Nodes disagree for a moment while gossip converges: do not
		// refetch on every response.
		select {
		case <-c.stop:
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// refreshAfter gets a topology newer than t by deadline (and within ctx):
// it fetches one (from hint first) unless a fetch is already under way,
// in which case it waits for that one. It never waits past either. The
// wait has a timer of its own rather than a context deadline's: a
// context's timer closes Done from another goroutine, which must be
// scheduled before the caller is, and on a busy machine that second
// wake-up is what makes a call late.
func (c *Client) refreshAfter(ctx context.Context, t *topology, hint string, deadline time.Time) *topology {
	c.m.notOwnerRefreshes.Inc()
	if c.refreshMu.TryLock() {
		if c.topo.Load() == t {
			rctx, cancel := context.WithDeadline(ctx, deadline)
			c.refreshLocked(rctx, hint)
			cancel()
		}
		c.refreshMu.Unlock()
	} else {
		timer := getTimer(time.Until(deadline))
		select {
		case <-t.replaced:
		case <-ctx.Done():
		case <-timer.C:
		}
		putTimer(timer)
	}
	return c.topo.Load()
}

// refresh fetches the topology from the hinted address, else from the
// known members in random order, else from the seeds, and installs the
// first answer.
func (c *Client) refresh(ctx context.Context, hint string) error {
	c.refreshMu.Lock()
	defer c.refreshMu.Unlock()
	return c.refreshLocked(ctx, hint)
}

// topologyHedge is how long a topology fetch from one node may go
// unanswered before the next node is asked as well. A node answers in
// well under a millisecond; one that is dead but still in the topology,
// or a seed that accepts connections and never answers, would otherwise
// hold the refresh for its whole budget, every time.
const topologyHedge = 100 * time.Millisecond

// refreshLocked asks the topology sources one after another, hedged: the
// next as soon as every fetch in flight has failed (a refused
// connection fails at once) or topologyHedge after the last one started.
// The first answer is installed; the other fetches are cancelled.
func (c *Client) refreshLocked(ctx context.Context, hint string) error {
	addrs := c.topologySources(hint)
	ctx, cancel := context.WithCancel(ctx)
	answers := make(chan topologyAnswer, len(addrs)) // never blocks a fetch
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait() // cancelled fetches return at once
	}()
	hedge := time.NewTimer(topologyHedge)
	defer hedge.Stop()
	started := 0
	launch := func() {
		addr := addrs[started]
		started++
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := c.fetchTopology(ctx, addr)
			answers <- topologyAnswer{r, err}
		}()
		hedge.Reset(topologyHedge)
	}
	var errs []error
	for len(errs) < len(addrs) {
		if started == len(errs) { // nothing in flight
			launch()
		}
		select {
		case a := <-answers:
			if a.err == nil {
				c.install(a.r)
				c.refreshErr.Store(nil)
				return nil
			}
			errs = append(errs, a.err)
		case <-hedge.C:
			if started < len(addrs) {
				launch()
			}
		case <-ctx.Done():
			errs = append(errs, fmt.Errorf("topology: %w", ctx.Err()))
			return c.refreshFailed(errors.Join(errs...))
		}
	}
	return c.refreshFailed(errors.Join(errs...))
}

// refreshFailed counts and keeps a failed topology fetch's error.
func (c *Client) refreshFailed(err error) error {
	c.m.refreshErrors.Inc()
	c.refreshErr.Store(&err)
	return err
}

type topologyAnswer struct {
	r   *ring.Ring
	err error
}

// topologySources lists, without repeats, where a topology may be asked:
// the hinted address, the known members in random order (every live
// member is a source, not only the seeds), then the seeds.
func (c *Client) topologySources(hint string) []string {
	var addrs []string
	if hint != "" {
		addrs = append(addrs, hint)
	}
	if t := c.topo.Load(); t.ring != nil {
		ms := t.ring.Members()
		for _, i := range rand.Perm(len(ms)) {
			if ms[i].Addr != "" && ms[i].State != ring.Leaving {
				addrs = append(addrs, ms[i].Addr)
			}
		}
	}
	addrs = append(addrs, c.cfg.Seeds...)
	seen := map[string]bool{}
	out := addrs[:0]
	for _, a := range addrs {
		if !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	return out
}

func (c *Client) fetchTopology(ctx context.Context, addr string) (*ring.Ring, error) {
	p := c.peerFor(addr)
	cn, err := p.waitConn(ctx)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(time.Second)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	cl, err := c.roundTripOn(ctx, cn, &proto.TopologyRequest{}, proto.TypeTopology, deadline)
	if err != nil {
		return nil, fmt.Errorf("topology from %s: %w", addr, err)
	}
	defer putCall(cl)
	t := &cl.topology
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

// install swaps in a new ring, connecting to new members and closing
// peers no longer in use.
func (c *Client) install(r *ring.Ring) {
	old := c.topo.Load()
	if old.ring != nil && old.ring.Epoch() == r.Epoch() {
		return
	}
	for _, m := range r.Members() {
		if inc, ok := c.departed[m.Name]; ok && inc == m.Incarnation && m.State == ring.Leaving {
			// A node still routing by the ring of the drain answered:
			// installed, it took the client back to the drained node,
			// whose peer was gone, and a strict call failed closed at
			// once ("no live connection"; the drain test, 1 run in 15
			// on a busy machine).
			c.log.Debug("topology older than the one installed, ignored", "epoch", fmt.Sprintf("%016x", r.Epoch()), "departed", m.Name)
			return
		}
	}
	t := newTopology(r, make([]*peer, len(r.Members())))
	keep := map[string]bool{}
	for _, s := range c.cfg.Seeds {
		keep[s] = true
	}
	was := map[string]bool{}
	leaving := map[string]bool{} // members the old ring showed draining
	if old.ring != nil {
		for _, m := range old.ring.Members() {
			was[m.Addr] = true
			leaving[m.Addr] = m.State == ring.Leaving
		}
	}
	for i, m := range r.Members() {
		if m.Addr == "" {
			continue
		}
		if old.ring != nil && !was[m.Addr] {
			// Back in the topology (a heal): a connection kept to it as a
			// seed may have sent into a silent cut and sit in TCP's
			// retransmission back-off for seconds; the first calls on it
			// timed out (the partition suite's minority, 2.2 s after the
			// heal). Dial afresh.
			c.peersMu.Lock()
			p := c.peers[m.Addr]
			c.peersMu.Unlock()
			if p != nil {
				p.renew(fmt.Errorf("%w: %s is back in the topology; dialing it afresh", errPeerGone, m.Addr))
			}
		}
		t.peers[i] = c.peerFor(m.Addr)
		t.peers[i].pick() // start dialing now, not on the first call
		keep[m.Addr] = true
	}
	if old.ring != nil {
		for _, m := range old.ring.Members() {
			if _, ok := r.Find(m.Name); !ok && m.State == ring.Leaving {
				if c.departed == nil || len(c.departed) >= maxDeparted {
					c.departed = map[string]int64{}
				}
				c.departed[m.Name] = m.Incarnation
			}
		}
	}
	c.topo.Store(t)
	close(old.replaced)
	c.m.topologyChanges.Inc()
	var gone []*peer
	c.peersMu.Lock()
	for addr, p := range c.peers {
		if !keep[addr] {
			delete(c.peers, addr)
			gone = append(gone, p)
		}
	}
	c.peersMu.Unlock()
	for _, p := range gone {
		why := fmt.Errorf("%w: %s", errPeerGone, p.addr)
		if leaving[p.addr] {
			// Drained: calls in flight on it keep waiting for their
			// answers. The node still answers them (NotOwner once it
			// left, and the call moves on); failed here, a strict call
			// is failed closed though its node may have granted it (the
			// drain test's strict calls, in 1 run of 15 on a busy
			// machine).
			p.retire(why)
			c.log.Debug("peer left the topology draining; its calls in flight wait for their answers", "addr", p.addr)
			continue
		}
		// Failed, or cut off: its calls in flight fail over now rather
		// than at their deadlines (a soft Allow goes to a backup; a
		// strict one fails closed as it would at its deadline). Kept
		// waiting, they held the partition suite's majority to its
		// clients' 1 s deadline after the ring dropped the cut-off
		// node: served again 2.0 s after the cut, not 1.0 s.
		p.close(why)
		c.log.Debug("peer left the topology; its calls in flight fail over", "addr", p.addr)
	}
	c.log.Debug("topology", "epoch", fmt.Sprintf("%016x", r.Epoch()), "members", len(r.Members()))
}

// maxDeparted bounds Client.departed: past it, the drained members
// remembered are forgotten (the next ring of a drain is as likely to be
// missed as before they were kept).
const maxDeparted = 1024

// deadline is when a call stops waiting: now + Timeout, or the context's
// deadline if sooner, less the margin that lets it return by then.
func (c *Client) deadline(ctx context.Context, now time.Time) time.Time {
	d := now.Add(c.cfg.Timeout)
	if cd, ok := ctx.Deadline(); ok && cd.Before(d) {
		d = cd
	}
	// Give up a little early (Config.Margin), never by more than a tenth
	// of the budget, and never move a passed deadline later.
	return d.Add(-min(c.margin, max(d.Sub(now)/10, 0)))
}

// maxMargin caps the default margin: a goroutine woken by its timer ran
// up to 6ms late at p99 in the chaos suite's busy, race-built 2-vCPU
// runs, and p99 1-2ms without the race detector.
const maxMargin = 5 * time.Millisecond

// margin resolves Config.Margin: 0 is Timeout/10 up to maxMargin, below 0
// none.
func margin(cfg Config) time.Duration {
	switch {
	case cfg.Margin < 0:
		return 0
	case cfg.Margin == 0:
		return min(cfg.Timeout/10, maxMargin)
	}
	return cfg.Margin
}

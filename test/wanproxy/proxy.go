// Package wanproxy is a TCP proxy that plays a wide-area link for tests:
// one-way latency and jitter, a bandwidth cap, loss and a silent cut,
// each per direction and changeable while connections are open.
//
// It works on the byte stream, not on packets: the kernel under the
// tests has no netem, and what a WAN does to packets reaches a TCP
// application only as time. So the proxy reads chunks of bytes from one
// side and writes them to the other after
//
//   - Latency ± Jitter (a chunk never overtakes the one before it: TCP
//     delivers in order whatever the packets did);
//   - a token bucket's wait, when a Bandwidth is set (shared by every
//     connection through the proxy, as a link is);
//   - a retransmission timeout, with probability Loss per chunk: how TCP
//     shows a lost segment (see Link.Loss);
//   - the end of a cut: while cut, nothing crosses in either direction,
//     not even a FIN or a reset, and the sockets stay open; what was sent
//     meanwhile is delivered after the heal, as TCP retransmits it.
//
// What it does not model: packet reordering and duplication (invisible
// above TCP), the kernel's growing backoff between retransmissions during
// a long cut, a connection that TCP itself gives up on (the sender's
// retransmission limit, ~15 min on Linux), congestion control's slow
// start, and a connect during a cut (the proxy's listener accepts it at
// once; a real WAN would let the SYN time out). A chunk is what one read
// returned, up to 32 KiB: one or many segments.
package wanproxy

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Proxy forwards the TCP connections made to its loopback address to an
// upstream address, through an emulated WAN link. All its methods are
// safe for concurrent use.
type Proxy struct {
	ln   net.Listener
	done chan struct{} // closed by Close
	wg   sync.WaitGroup

	forwarded [2]atomic.Int64 // bytes written out, per Dir
	pending   [2]atomic.Int64 // bytes read and not yet written, per Dir
	open      atomic.Int64    // accepted connections not yet ended

	mu sync.Mutex
	// The fields below are guarded by mu.
	upstream string
	links    [2]Link
	buckets  [2]bucket
	rewrite  [2]func(io.Reader) io.Reader
	cut      bool
	changed  chan struct{} // closed and replaced when cut or upstream changes
	conns    map[net.Conn]struct{}
	closed   bool
}

// bucket is a token bucket of bytes for one direction. tokens may go
// below zero: a writer reserves its bytes and then waits until the debt
// is paid, so writers queue in the order they asked.
type bucket struct {
	tokens float64
	last   time.Time
}

// New listens on an ephemeral loopback port and forwards each accepted
// connection to upstream (host:port). upstream may be empty, to be set
// later with SetUpstream (a harness that needs the proxy's address
// before the upstream has started): until then accepted connections
// wait, as a connect to a host that is not up yet would.
func New(upstream string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{
		ln:       ln,
		done:     make(chan struct{}),
		upstream: upstream,
		changed:  make(chan struct{}),
		conns:    map[net.Conn]struct{}{},
	}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the address to dial instead of the upstream.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetUpstream points the connections accepted from now on at addr (a
// node restarted on another port); open ones keep their upstream.
func (p *Proxy) SetUpstream(addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.upstream = addr
	p.notify()
}

// notify wakes whoever waits for a change of cut or upstream. The
// caller holds mu.
func (p *Proxy) notify() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// Upstream returns the address new connections go to.
func (p *Proxy) Upstream() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.upstream
}

// Set changes what direction d does from now on. A new Latency, Jitter
// or Loss applies to bytes read after the call; a new Bandwidth at
// once, starting from a full bucket.
func (p *Proxy) Set(d Dir, l Link) error {
	if !d.valid() {
		return ErrBadDir
	}
	if err := l.Validate(); err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.links[d] = l
	p.buckets[d] = bucket{tokens: float64(l.burst()), last: time.Now()}
	return nil
}

// SetBoth sets both directions to l.
func (p *Proxy) SetBoth(l Link) error {
	if err := p.Set(Forward, l); err != nil {
		return err
	}
	return p.Set(Reverse, l)
}

// Rewrite makes the connections accepted from now on read direction d
// through wrap(src) instead of src: a test's hook to change what crosses
// (a harness that must make a peer's answers name the proxies). wrap's
// reader is read from one goroutine; an error other than io.EOF from it
// ends the connection. nil: the bytes as sent.
func (p *Proxy) Rewrite(d Dir, wrap func(io.Reader) io.Reader) error {
	if !d.valid() {
		return ErrBadDir
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rewrite[d] = wrap
	return nil
}

// Link returns what direction d does (the zero Link for a bad d).
func (p *Proxy) Link(d Dir) Link {
	if !d.valid() {
		return Link{}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.links[d]
}

// Cut stops forwarding in both directions, silently: no byte, FIN or
// reset crosses, every socket stays open, and the proxy keeps reading
// until its queues are full. Heal resumes.
func (p *Proxy) Cut() { p.setCut(true) }

// Heal ends a cut: what was held is forwarded, in order, and after it
// everything new.
func (p *Proxy) Heal() { p.setCut(false) }

func (p *Proxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut == cut {
		return
	}
	p.cut = cut
	p.notify()
}

// IsCut reports whether the proxy is cut.
func (p *Proxy) IsCut() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cut
}

// Forwarded returns how many bytes the proxy has written out in
// direction d, over every connection since it started.
func (p *Proxy) Forwarded(d Dir) int64 {
	if !d.valid() {
		return 0
	}
	return p.forwarded[d].Load()
}

// Pending returns how many bytes the proxy has read in direction d and
// not yet written out: in flight on the emulated link, or held by a cut.
func (p *Proxy) Pending(d Dir) int64 {
	if !d.valid() {
		return 0
	}
	return p.pending[d].Load()
}

// Conns returns how many accepted connections have not ended yet.
func (p *Proxy) Conns() int { return int(p.open.Load()) }

// Close stops listening, closes every connection (dropping what was in
// flight) and waits for the proxy's goroutines. Safe to call twice.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.done)
		p.ln.Close()
		for c := range p.conns {
			c.Close()
		}
	}
	p.mu.Unlock()
	p.wg.Wait()
	return nil
}

// track registers an open connection; it reports false (and closes c)
// when the proxy is closed.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, c)
	c.Close()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			continue
		}
		p.open.Add(1)
		p.wg.Add(1)
		go p.serve(c)
	}
}

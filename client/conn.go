package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fcap-io/fcap/proto"
)

// A peer is one node's data-plane address and the connections the client
// keeps to it. A call waits (within its deadline) only for a peer's first
// dial, the one started when the node entered the topology: a node that
// just joined is not failed open for the microseconds its connection
// takes. After that, calls never wait for a dial: a peer that lost its
// connections reports none and redials in the background, so a dead node
// costs a call nothing but the fallback.
type peer struct {
	cl   *Client
	addr string
	rr   atomic.Uint32 // round robin over conns
	lat  latencies     // recent check latencies: the hedge delay

	mu sync.Mutex
	// The fields below are guarded by mu.
	conns   []*conn // ConnsPerNode places; nil or closed ones are redialed
	dialing bool
	backoff time.Duration
	closed  bool
	lastErr error // why the last dial failed; nil once one succeeds
	// connected is set by the first successful dial and stays set.
	connected bool
	// wake cuts short a dial's back-off wait (renew).
	wake chan struct{}
}

// firstDial reports whether the peer has never been reached and its first
// dial has not failed yet: a call may wait for that dial.
func (p *peer) firstDial() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.connected && p.lastErr == nil && !p.closed
}

func newPeer(cl *Client, addr string) *peer {
	return &peer{cl: cl, addr: addr, conns: make([]*conn, cl.cfg.ConnsPerNode), wake: make(chan struct{}, 1)}
}

// pick returns a live connection, or nil after starting a dial.
func (p *peer) pick() *conn {
	n := len(p.conns)
	start := int(p.rr.Add(1))
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	var live *conn
	missing := false
	for i := range n {
		c := p.conns[(start+i)%n]
		if c == nil || c.isClosed() {
			missing = true
			continue
		}
		if live == nil {
			live = c
		}
	}
	if missing {
		p.dialLocked()
	}
	return live
}

// dialLocked starts a background dial that fills every empty place.
func (p *peer) dialLocked() {
	if p.dialing || p.closed {
		return
	}
	p.dialing = true
	wait := p.backoff
	p.cl.goFunc(func() { p.dialAll(wait) })
}

func (p *peer) dialAll(wait time.Duration) {
	if wait > 0 {
		t := time.NewTimer(wait)
		select {
		case <-p.cl.stop:
		case <-p.wake:
		case <-t.C:
		}
		t.Stop()
	}
	var err error
	for i := range p.conns {
		p.mu.Lock()
		c := p.conns[i]
		stop := p.closed
		p.mu.Unlock()
		if stop {
			break
		}
		if c != nil && !c.isClosed() {
			continue
		}
		var nc *conn
		if nc, err = p.cl.dialConn(p); err != nil {
			break
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			nc.close(errClientClosed)
			break
		}
		p.conns[i] = nc
		p.mu.Unlock()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.dialing = false
	p.lastErr = err
	if err != nil {
		p.backoff = min(max(2*p.backoff, 25*time.Millisecond), 2*time.Second)
		p.cl.m.dialErrors.Inc()
		if errors.Is(err, proto.ErrUnauthenticated) || errors.Is(err, proto.ErrUnsupported) {
			p.cl.log.Warn("node refused the client's token", "addr", p.addr, "err", err, "retry_in", p.backoff)
		} else {
			p.cl.log.Debug("dial", "addr", p.addr, "err", err, "retry_in", p.backoff)
		}
		// Retry even if no call asks: the node may be back by then.
		p.dialLocked()
	} else {
		p.backoff = 0
		p.connected = true
	}
}

// waitConn returns a live connection, dialing if needed, until ctx ends
// or a dial fails: a refused connection is evidence enough that the node
// is down, and waiting out ctx on it would hold up whoever asked (a
// topology fetch that could ask another node). For topology fetches and
// Records, which may wait for a dial; calls use pick.
func (p *peer) waitConn(ctx context.Context) (*conn, error) {
	deadline, hasDeadline := ctx.Deadline()
	for {
		if c := p.pick(); c != nil {
			return c, nil
		}
		if err := p.dialError(); err != nil {
			return nil, err // a *DialError, naming the address
		}
		// The deadline is checked here too, not only through Done: Done
		// is closed by another goroutine, which a busy machine may run
		// late.
		if hasDeadline && !time.Now().Before(deadline) {
			return nil, fmt.Errorf("connect to %s: %w", p.addr, context.DeadlineExceeded)
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("connect to %s: %w", p.addr, ctx.Err())
		case <-p.cl.stop:
			return nil, errClientClosed
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// close closes the peer's connections; their pending calls fail with
// why: errClientClosed when the client closes (Records are then dropped),
// errPeerGone when the node left the topology (they fail over, Records
// are retried on the new owner).
func (p *peer) close(why error) {
	p.mu.Lock()
	p.closed = true
	conns := append([]*conn(nil), p.conns...)
	p.mu.Unlock()
	for _, c := range conns {
		if c != nil {
			c.close(why)
		}
	}
}

// renew retires the peer's connections, keeping the peer, and ends any
// back-off its failed dials built up: the next pick dials afresh at once
// (the back-off grew to 2 s while the node was cut off, and calls fail
// fast while no connection is up). A retired connection takes no new
// call; the calls already on it keep waiting for their answers (the
// node may have applied them: failing a strict call there would report
// a grant the node counted as refused) and it is closed once every one
// of them is past its deadline.
func (p *peer) renew(why error) {
	p.mu.Lock()
	old := append([]*conn(nil), p.conns...)
	clear(p.conns)
	p.backoff = 0
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
	p.cl.retire(old, why)
}

// retire ends the peer (a node that left the topology): it takes no new
// call and dials no more, and its connections are retired (Client.retire).
func (p *peer) retire(why error) {
	p.mu.Lock()
	p.closed = true
	old := append([]*conn(nil), p.conns...)
	clear(p.conns)
	p.mu.Unlock()
	p.cl.retire(old, why)
}

// retire closes each connection of conns once no call waits on it, or
// once the longest call deadline has passed, whichever is first; until
// then the answers to calls already sent still reach them. Close closes
// them all at once.
func (cl *Client) retire(conns []*conn, why error) {
	after := max(cl.cfg.Timeout, cl.cfg.RecordTimeout) + retireMargin
	for _, c := range conns {
		if c == nil || !c.retire(why) {
			continue
		}
		cl.peersMu.Lock()
		closing := cl.retired == nil && isClosed(cl.stop)
		if !closing {
			if cl.retired == nil {
				cl.retired = map[*conn]struct{}{}
			}
			cl.retired[c] = struct{}{}
		}
		cl.peersMu.Unlock()
		if closing {
			c.close(errClientClosed)
			continue
		}
		time.AfterFunc(after, func() {
			c.close(why)
			cl.peersMu.Lock()
			delete(cl.retired, c)
			cl.peersMu.Unlock()
		})
	}
}

// isClosed reports whether ch is closed.
func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// retireMargin is how long past the longest call deadline a retired
// connection stays open.
const retireMargin = 100 * time.Millisecond

// conn is one multiplexed connection. A caller that finds no write in
// progress writes its frame itself (no goroutine hand-off on an idle
// connection); frames queued meanwhile are written by a writer goroutine
// (many frames per write under load). A reader goroutine hands each
// response to the call waiting on its request id.
type conn struct {
	p    *peer
	nc   net.Conn
	kick chan struct{} // wakes the writer; capacity 1

	closedFlag atomic.Bool

	mu sync.Mutex
	// The fields below are guarded by mu.
	pending map[uint64]*call
	// abandoned holds the viewers of strict calls that gave up before
	// their answer came, by request id, until it comes (at most
	// maxAbandoned; the connection's close drops them).
	abandoned map[uint64]string
	out       []byte        // frames waiting to be written
	outTraced []tracedFrame // the traced calls among them (trace.go)
	spare     []byte        // a written buffer for reuse; never one being written
	writing   bool          // someone (a caller, or the writer goroutine) owns writing
	handed    bool          // the writer goroutine owns writing
	err       error         // why the connection closed
	// retiring, when set, is why the connection closes once no call
	// waits on it (retire).
	retiring error

	yield func() // a test's stand-in for the yield before a write; nil: runtime.Gosched

	nextID atomic.Uint64 // request ids; frames may reach the wire out of id order

	// A connection on which calls time out while nothing at all comes
	// back is dead to this client, whatever TCP says: a stuck node, a
	// middlebox that black-holes it, a stream that lost bytes mid-frame.
	// lastRead is when the reader last delivered a frame (see monoNow);
	// silent counts calls in a row that timed out with nothing read
	// since they were sent.
	lastRead atomic.Int64
	silent   atomic.Int32
}

// A connection is closed (its pending calls fail over, the peer
// redials) once silentStrikes calls in a row timed out on it and nothing
// at all was read for silentFor. A slow node still answers something and
// keeps its connection; one stalled for a moment (a GC pause, a busy
// machine) does not lose every call in flight on it.
const (
	silentStrikes = 3
	silentFor     = time.Second
)

// clockBase anchors monoNow: monotonic, cheap to compare.
var clockBase = time.Now()

// monoNow is monotonic nanoseconds since the package was loaded.
func monoNow() int64 { return int64(time.Since(clockBase)) }

// noAnswer notes a call, sent at sent, that timed out.
func (c *conn) noAnswer(sent int64) {
	if c.lastRead.Load() >= sent {
		return // something came back since: slow, not silent
	}
	if c.silent.Add(1) >= silentStrikes && monoNow()-c.lastRead.Load() >= int64(silentFor) {
		c.close(fmt.Errorf("%w: %s answered none of the last %d calls, nothing read for %v", errSilent, c.p.addr, c.silent.Load(), silentFor))
	}
}

func (cl *Client) dialConn(p *peer) (*conn, error) {
	nc, err := cl.dialFcap(p.addr)
	if err != nil {
		return nil, err
	}
	c := &conn{p: p, nc: nc, kick: make(chan struct{}, 1), pending: map[uint64]*call{}}
	c.lastRead.Store(monoNow()) // silence counts from the dial
	cl.goFunc(c.writeLoop)
	cl.goFunc(c.readLoop)
	return c, nil
}

func (c *conn) isClosed() bool { return c.closedFlag.Load() }

// retire has the connection close with why once no call waits on it
// (the reader closes it after delivering the last answer). It reports
// whether calls still wait; if none does, it closes it now.
func (c *conn) retire(why error) bool {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return false
	}
	c.retiring = why
	waiting := len(c.pending) > 0
	c.mu.Unlock()
	if !waiting {
		c.close(why)
	}
	return waiting
}

// send registers a call and writes its request frame, or queues it
// behind a write in progress.
//
// The frame is encoded before the connection's lock is taken: a
// 100-candidate request takes tens of microseconds to encode (tens of
// milliseconds under the race detector), and a caller preempted while
// encoding under the lock would hold up every other caller on the
// connection, including those giving up at their deadline.
func (c *conn) send(cl *call, m proto.Message, deadline time.Time) error {
	cl.id, cl.conn = c.nextID.Add(1), c
	fb := getFrame()
	frame, err := proto.AppendFrame(fb.b[:0], cl.id, m)
	fb.b = frame
	if err != nil {
		putFrame(fb)
		return fmt.Errorf("%w: %v", ErrBadRequest, err)
	}
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		putFrame(fb)
		return err
	}
	t := time.Now()
	cl.sent = int64(t.Sub(clockBase))
	var tag uint64
	if tracing.Load() {
		cl.traced, tag = true, cl.stamps.start(cl.sent)
	}
	if c.writing {
		c.out = append(c.out, frame...)
		if cl.traced {
			c.outTraced = append(c.outTraced, tracedFrame{cl, tag})
		}
		c.pending[cl.id] = cl
		c.mu.Unlock() // the writer in progress sends it
		putFrame(fb)
		return nil
	}
	if !t.Before(deadline) {
		// The caller's budget ran out while it waited for a CPU or
		// encoded: a write now would fail at once and close the
		// connection under every call pending on it (a burst of
		// fail-opens for one starved caller). Drop the frame, which
		// nobody else has seen; the stream stays whole.
		c.mu.Unlock()
		putFrame(fb)
		return fmt.Errorf("%w (%s, before sending)", errTimeout, c.p.addr)
	}
	c.pending[cl.id] = cl
	c.writing = true
	c.mu.Unlock()
	// Callers made runnable together (an ad server's burst of requests,
	// the load generator's batch) are about to send too: the caller
	// yields once, so that those ready to run queue their frames behind
	// its own (the branch above) and one write carries them all, where a
	// write each costs this process and the node a system call each
	// (12-20us of CPU on a VM). With nothing else runnable the yield
	// returns at once and the frame goes alone, as before.
	if c.yield != nil {
		c.yield()
	} else {
		runtime.Gosched()
	}
	c.mu.Lock()
	if c.err == nil && !time.Now().Before(deadline) {
		// The yield ran past the deadline (a busy process): drop the
		// frame, as above, and leave whatever others queued meanwhile
		// to the writer goroutine.
		delete(c.pending, cl.id)
		if len(c.out) > 0 {
			c.handed = true
			c.mu.Unlock()
			c.kickWriter()
		} else {
			c.writing = false
			c.mu.Unlock()
		}
		putFrame(fb)
		return fmt.Errorf("%w (%s, before sending)", errTimeout, c.p.addr)
	}
	var queued []byte
	var traced []tracedFrame
	if len(c.out) > 0 && c.err == nil {
		queued, traced = c.takeLocked()
	}
	c.mu.Unlock()
	if cl.traced {
		traced = append(traced, tracedFrame{cl, tag})
	}
	var began int64
	if traced != nil {
		began = monoNow()
	}
	// The caller writes inline, but never past its own deadline: a node
	// that stopped reading (paused, overloaded) fills the socket buffer,
	// and a blocked write would hold the ad request hostage. A write cut
	// short leaves a partial frame, so it closes the connection and the
	// calls pending on it fail over.
	if queued == nil {
		c.writeOnce(frame, deadline)
	} else {
		c.write(append(queued, frame...), deadline)
	}
	if traced != nil {
		stampWrite(traced, began, monoNow())
	}
	putFrame(fb)
	c.mu.Lock()
	if c.err == nil && len(c.out) > 0 {
		// Frames queued during our write: the writer goroutine takes
		// over, so this caller goes back to wait for its answer.
		c.handed = true
		c.mu.Unlock()
		c.kickWriter()
		return nil
	}
	c.writing = false
	c.mu.Unlock()
	return nil
}

// frameBuf is a caller's scratch buffer for encoding one request.
type frameBuf struct{ b []byte }

var framePool = sync.Pool{New: func() any { return &frameBuf{b: make([]byte, 0, 4096)} }}

func getFrame() *frameBuf { return framePool.Get().(*frameBuf) }

func putFrame(fb *frameBuf) {
	if cap(fb.b) > 1<<20 { // do not keep a burst's buffer forever
		return
	}
	framePool.Put(fb)
}

// takeLocked takes the queued frames for writing, leaving the spare
// buffer to queue into, and the traced calls among them.
func (c *conn) takeLocked() ([]byte, []tracedFrame) {
	buf, traced := c.out, c.outTraced
	c.out, c.spare, c.outTraced = c.spare[:0], nil, nil
	return buf, traced
}

// write sends queued frames and keeps the buffer for reuse.
func (c *conn) write(buf []byte, deadline time.Time) {
	if !c.writeOnce(buf, deadline) {
		return
	}
	c.mu.Lock()
	if c.spare == nil && cap(buf) <= 1<<20 { // do not keep a burst's buffer forever
		c.spare = buf[:0]
	}
	c.mu.Unlock()
}

// writeOnce sends buf, within a second at most; a failed write closes the
// connection (its pending calls fail over).
func (c *conn) writeOnce(buf []byte, deadline time.Time) bool {
	if d := time.Now().Add(time.Second); deadline.IsZero() || d.Before(deadline) {
		deadline = d
	}
	c.nc.SetWriteDeadline(deadline)
	if _, err := c.nc.Write(buf); err != nil {
		c.close(fmt.Errorf("write to %s: %w", c.p.addr, err))
		return false
	}
	return true
}

func (c *conn) kickWriter() {
	select {
	case c.kick <- struct{}{}:
	default: // already due to run
	}
}

// forget removes a call that gave up waiting. It reports false when the
// reader has already taken the call to deliver its response.
func (c *conn) forget(cl *call) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending[cl.id] != cl {
		return false
	}
	delete(c.pending, cl.id)
	if cl.strictViewer != "" && len(c.abandoned) < maxAbandoned {
		if c.abandoned == nil {
			c.abandoned = make(map[uint64]string)
		}
		c.abandoned[cl.id] = cl.strictViewer // its grant, if one comes, goes back
	}
	return true
}

// writeLoop writes the frames callers queued while a write was in
// progress, until none are left, then hands writing back to callers.
func (c *conn) writeLoop() {
	for {
		select {
		case <-c.kick:
		case <-c.p.cl.stop:
			c.close(errClientClosed)
			return
		}
		for {
			c.mu.Lock()
			if c.err != nil {
				c.mu.Unlock()
				return
			}
			if !c.handed { // a stale kick: a caller owns writing, or nobody
				c.mu.Unlock()
				break
			}
			if len(c.out) == 0 {
				c.handed, c.writing = false, false
				c.mu.Unlock()
				break
			}
			buf, traced := c.takeLocked()
			c.mu.Unlock()
			var began int64
			if traced != nil {
				began = monoNow()
			}
			c.write(buf, time.Time{})
			if traced != nil {
				stampWrite(traced, began, monoNow())
			}
		}
	}
}

func (c *conn) readLoop() {
	r := proto.NewReader(c.nc, c.p.cl.cfg.MaxFrame)
	for {
		hdr, body, err := r.Next()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				err = fmt.Errorf("read from %s: %w", c.p.addr, err)
			}
			c.close(err)
			return
		}
		now := monoNow()
		c.lastRead.Store(now)
		if c.silent.Load() != 0 { // no store per frame on a healthy connection
			c.silent.Store(0)
		}
		c.mu.Lock()
		cl := c.pending[hdr.ID]
		delete(c.pending, hdr.ID)
		viewer, strict := "", false
		if cl == nil {
			viewer, strict = c.abandoned[hdr.ID]
			delete(c.abandoned, hdr.ID)
		}
		var last error // why a retired connection closes, once its last call is answered
		if c.retiring != nil && len(c.pending) == 0 {
			last = c.retiring
		}
		c.mu.Unlock()
		if cl != nil {
			if cl.traced {
				cl.stamps.read.Store(now)
			}
			cl.deliver(hdr, body)
		} else if g, ok := c.p.cl.m.late(hdr, body); ok && strict { // its caller gave up: count what it missed
			g.viewer = viewer
			c.p.cl.giveBack(g) // and give a strict slot back
		}
		if last != nil {
			c.close(last)
			return
		}
	}
}

// close fails every pending call with err and closes the socket. The peer
// redials on the next pick.
func (c *conn) close(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	c.closedFlag.Store(true)
	pending := c.pending
	c.pending, c.abandoned = nil, nil
	c.mu.Unlock()
	c.nc.Close()
	for _, cl := range pending {
		cl.failWith(err)
	}
	c.kickWriter() // let the writer see the close
}

// full reports whether every connection place of the peer holds a live
// connection; if not, it starts a dial that fills them.
func (p *peer) full() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	for _, c := range p.conns {
		if c == nil || c.isClosed() {
			p.dialLocked()
			return false
		}
	}
	return true
}

// live reports whether the peer has a live connection. Unlike pick, it
// starts no dial.
func (p *peer) live() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		if c != nil && !c.isClosed() {
			return !p.closed
		}
	}
	return false
}

// dialError is why the peer's last dial failed, nil if it succeeded.
func (p *peer) dialError() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastErr
}

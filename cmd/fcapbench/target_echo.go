package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/proto"
)

// echoTarget drives an echo server (echo_server.go) the way the fcap
// client drives a node, minus everything fcap does: --conns multiplexed
// connections per address, round robin; the caller writes its frame
// itself and waits for the reader goroutine to hand it the answer
// matched by request id, until its deadline (the call's context, at
// most --timeout, as the client's Timeout). Requests and answers have
// the sizes fcap's would have for the workload. A request is a frame
// built once, not encoded per call, and an answer is read, not decoded:
// the floor is the machine's (network, scheduling, this process's
// goroutines), not a client's.
type echoTarget struct {
	name    string   // "echo", "echo-Nprocs" (newEchoProcsTarget), or "raw" (target_raw.go)
	addrs   []string // per place in conns
	rr      atomic.Uint32
	timeout time.Duration
	// callerWork is the CPU each call spends before it sends: a stand-in
	// for a client's encoding (--echo-caller-work).
	callerWork time.Duration
	// byViewer sends every call to the address its viewer hashes to
	// (conns holds perAddr connections per address, address after
	// address, round robin within one), as the fcap client sends a
	// check to its viewer's owner; otherwise calls go round robin over
	// every connection.
	byViewer bool
	perAddr  int

	mu sync.Mutex
	// conns is guarded by mu; a closed one is redialed by the next call
	// that picks it.
	conns []*echoConn
	// The request frames, id 0, built once: patched per call.
	check, allow []byte
	calls        sync.Pool // *echoCall
	timers       sync.Pool // *time.Timer
}

// echoSizes are the body sizes fcap's request and answer frames have for
// a workload: a Check of --candidates campaign caps and its CheckResult
// (a verdict and the impressions left per cap), an Allow of one cap and
// its AllowResult.
type echoSizes struct {
	check, checkResult, allow, allowResult int
}

// fcapFrameSizes encodes a request of the workload as the fcap client
// would and returns the sizes of the bodies. The viewer and campaign ids
// are the longest the workload uses: a floor never smaller than fcap's
// frames.
func fcapFrameSizes(w *workload, x *ids) (echoSizes, error) {
	viewer := x.viewer(x.viewerCount() - 1)
	mode := fcap.Soft
	if w.Mode == "strict" {
		mode = fcap.Strict
	}
	var chk proto.Check
	chk.Viewer, chk.Now, chk.HasNow = viewer, time.Now().UnixMilli(), true
	var res proto.CheckResult
	res.Epoch, res.Now = 1<<20, chk.Now
	for i := range w.Candidates {
		id := x.campaigns[len(x.campaigns)-1-i]
		chk.Table.Caps = append(chk.Table.Caps, fcap.Cap{Scope: "campaign", ID: id, Limit: w.Limit, Window: fcap.Millis(w.Window), Mode: mode})
		chk.Table.Refs = append(chk.Table.Refs, uint16(i))
		chk.Table.Ends = append(chk.Table.Ends, uint32(i+1))
		res.Verdicts = append(res.Verdicts, fcap.Verdict{Allowed: true, Remaining: w.Limit - 1, Blocking: -1})
		res.Left = append(res.Left, uint16(min(w.Limit, 0xFFFF)))
	}
	alw := proto.Allow{Viewer: viewer, Now: chk.Now, HasNow: true, Caps: chk.Table.Caps[:1]}
	alr := proto.AllowResult{Epoch: res.Epoch, Now: chk.Now, Verdict: res.Verdicts[0]}
	var s echoSizes
	for _, m := range []struct {
		msg  proto.Message
		size *int
	}{{&chk, &s.check}, {&res, &s.checkResult}, {&alw, &s.allow}, {&alr, &s.allowResult}} {
		f, err := proto.AppendFrame(nil, 0, m.msg)
		if err != nil {
			return s, fmt.Errorf("sizing fcap's frames: %w", err)
		}
		*m.size = max(len(f)-proto.HeaderSize, echoSizeField)
	}
	return s, nil
}

func newEchoTarget(addrs string, w *workload, x *ids, o targetOpts) (*echoTarget, error) {
	sz, err := fcapFrameSizes(w, x)
	if err != nil {
		return nil, err
	}
	t := &echoTarget{
		name:       "echo",
		timeout:    o.timeout,
		callerWork: o.callerWork,
		check:      appendEchoFrame(nil, proto.TypeCheck, 0, sz.check, sz.checkResult),
		allow:      appendEchoFrame(nil, proto.TypeAllow, 0, sz.allow, sz.allowResult),
	}
	t.calls.New = func() any { return &echoCall{done: make(chan error, 1)} }
	conns := max(o.conns, 1)
	t.perAddr = conns
	for _, addr := range strings.Split(addrs, ",") {
		for range conns {
			c, err := dialEcho(addr)
			if err != nil {
				t.Close()
				return nil, err
			}
			t.addrs, t.conns = append(t.addrs, addr), append(t.conns, c)
		}
	}
	return t, nil
}

// newEchoProcsTarget drives several echo servers (one per address, each
// a process of its own) the way the fcap client drives as many nodes: a
// call goes, whole, to the server its viewer hashes to, as a check goes
// to its viewer's owner (the routing key is the viewer: one request per
// check, however many nodes). Frames and connections are the echo's.
func newEchoProcsTarget(addrs []string, w *workload, x *ids, o targetOpts) (*echoTarget, error) {
	if len(addrs) < 2 {
		return nil, fmt.Errorf("an echo over several processes needs two addresses or more, got %d", len(addrs))
	}
	t, err := newEchoTarget(strings.Join(addrs, ","), w, x, o)
	if err != nil {
		return nil, err
	}
	t.name = fmt.Sprintf("echo-%dprocs", len(addrs))
	t.byViewer = true
	return t, nil
}

// procs is how many echo servers the target drives.
func (t *echoTarget) procs() int { return len(t.addrs) / t.perAddr }

// viewerHash is FNV-1a of a viewer id: where an echo over several
// processes sends the viewer's calls.
func viewerHash(viewer string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(viewer); i++ {
		h ^= uint32(viewer[i])
		h *= 16777619
	}
	return h
}

// place returns the index in conns of the connection a call for viewer
// takes next.
func (t *echoTarget) place(viewer string) int {
	n := int(t.rr.Add(1))
	if !t.byViewer {
		return n % len(t.addrs)
	}
	return int(viewerHash(viewer)%uint32(t.procs()))*t.perAddr + n%t.perAddr
}

// pick returns the connection a call for viewer takes, redialing it if
// it closed (a write cut short by its deadline closes one, as in the
// fcap client).
func (t *echoTarget) pick(viewer string) (*echoConn, error) {
	i := t.place(viewer)
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.conns[i]
	if c != nil && !c.closed.Load() {
		return c, nil
	}
	if c != nil {
		<-c.readerDone
	}
	c, err := dialEcho(t.addrs[i])
	if err != nil {
		t.conns[i] = nil
		return nil, err
	}
	t.conns[i] = c
	return c, nil
}

func (t *echoTarget) Name() string { return t.name }

var errEchoTimeout = errors.New("echo: no answer before the deadline")

// roundTrip sends one request frame and waits for its answer.
func (t *echoTarget) roundTrip(ctx context.Context, viewer string, frame []byte) error {
	deadline := time.Now().Add(t.timeout)
	spin(t.callerWork)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	c, err := t.pick(viewer)
	if err != nil {
		return err
	}
	if !time.Now().Before(deadline) {
		return errEchoTimeout // as the fcap client: never write past the deadline
	}
	cl := t.calls.Get().(*echoCall)
	var tr *client.CallTrace
	if echoTracing.Load() {
		tr, _ = ctx.Value(echoTraceKey{}).(*client.CallTrace)
	}
	cl.traced = tr != nil
	if cl.traced {
		cl.seq.Add(1)
		cl.queued.Store(echoNow())
		cl.writing.Store(0)
		cl.written.Store(0)
		cl.read.Store(0)
	}
	if err := c.send(cl, frame, deadline); err != nil {
		// Closing the connection may hand cl an error still: leave it
		// to the GC, not the pool.
		return err
	}
	tm, _ := t.timers.Get().(*time.Timer)
	if tm == nil {
		tm = time.NewTimer(time.Until(deadline))
	} else {
		tm.Reset(time.Until(deadline))
	}
	defer func() { tm.Stop(); t.timers.Put(tm) }()
	select {
	case err := <-cl.done:
		if tr != nil && err == nil {
			*tr = client.CallTrace{Queued: echoTime(cl.queued.Load()), Writing: echoTime(cl.writing.Load()), Written: echoTime(cl.written.Load()),
				Read: echoTime(cl.read.Load()), Resumed: time.Now(), Node: c.nc.RemoteAddr().String()}
		}
		t.calls.Put(cl)
		return err
	case <-tm.C:
		if c.forget(cl) { // else the reader holds it: leave it to the GC
			t.calls.Put(cl)
		}
		return errEchoTimeout
	case <-ctx.Done():
		if c.forget(cl) {
			t.calls.Put(cl)
		}
		return ctx.Err()
	}
}

func (t *echoTarget) Allow(ctx context.Context, viewer string, _ int, _ int64) (bool, error) {
	return true, t.roundTrip(ctx, viewer, t.allow)
}

func (t *echoTarget) Check(ctx context.Context, viewer string, campaigns []int, _ int64) (int, error) {
	return len(campaigns), t.roundTrip(ctx, viewer, t.check)
}

// Record is not measured (an impression is off the ad request's path);
// the echo floor has none.
func (t *echoTarget) Record(context.Context, string, int, string, int64) error { return nil }

func (t *echoTarget) Failed() int64 { return 0 }

func (t *echoTarget) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, c := range t.conns {
		if c != nil {
			c.close(net.ErrClosed)
			<-c.readerDone
		}
	}
	return nil
}

// echoCall is one request in flight.
type echoCall struct {
	id   uint64
	done chan error // capacity 1
	// With --phases, its times as the fcap client's CallTrace has them
	// (monotonic ns since echoClock; the writer and the reader note them):
	// the floor's calls split the same way as fcap's.
	traced                         bool
	queued, writing, written, read atomic.Int64
	seq                            atomic.Uint64 // which request the stamps are for: a pooled call is reused
}

// tracedEcho is a traced call whose frame waits to be written.
type tracedEcho struct {
	cl  *echoCall
	seq uint64
}

// echoTracing is set with --phases: echo calls look for a trace in their
// context (echoTraceKey), and note their times.
var echoTracing atomic.Bool

// echoTraceKey carries the CallTrace an echo call fills in.
type echoTraceKey struct{}

var echoClock = time.Now()

func echoNow() int64 { return int64(time.Since(echoClock)) }

func echoTime(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return echoClock.Add(time.Duration(ns))
}

// echoConn is one multiplexed connection to an echo server.
type echoConn struct {
	nc         net.Conn
	nextID     atomic.Uint64
	readerDone chan struct{}
	closed     atomic.Bool

	wmu sync.Mutex
	// The fields below are guarded by wmu.
	out     []byte       // frames queued for the caller that is writing
	outCall []tracedEcho // the traced calls among them (--phases)
	spare   []byte       // a written buffer, for reuse
	writing bool         // a caller is writing

	mu sync.Mutex
	// The fields below are guarded by mu.
	pending map[uint64]*echoCall
	err     error // why the connection closed
}

func dialEcho(addr string) (*echoConn, error) {
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, fmt.Errorf("echo at %s: %w", addr, err)
	}
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	c := &echoConn{nc: nc, pending: map[uint64]*echoCall{}, readerDone: make(chan struct{})}
	go c.readLoop() // owned by the target: Close waits for readerDone
	return c, nil
}

// send registers cl and writes frame with cl's request id. As the fcap
// client's send, a caller that finds another writing queues its frame
// for that one; one that writes yields first, so that the callers ready
// to run queue theirs and one write carries them all.
func (c *echoConn) send(cl *echoCall, frame []byte, deadline time.Time) error {
	cl.id = c.nextID.Add(1)
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return err
	}
	c.pending[cl.id] = cl
	c.mu.Unlock()
	c.wmu.Lock()
	n := len(c.out)
	c.out = append(c.out, frame...)
	binary.BigEndian.PutUint64(c.out[n+8:], cl.id)
	if cl.traced {
		c.outCall = append(c.outCall, tracedEcho{cl, cl.seq.Load()})
	}
	if c.writing {
		c.wmu.Unlock()
		return nil // the caller writing sends it
	}
	c.writing = true
	c.wmu.Unlock()
	runtime.Gosched()
	for {
		c.wmu.Lock()
		buf := c.out
		if len(buf) == 0 {
			c.writing = false
			c.wmu.Unlock()
			return nil
		}
		c.out, c.spare = c.spare[:0], nil
		traced := c.outCall
		c.outCall = nil
		c.wmu.Unlock()
		var began int64
		if traced != nil {
			began = echoNow()
		}
		// A deadline the yield ran past would fail the write at once and
		// close the connection under every call on it; the fcap client
		// leaves such frames to its writer goroutine, which allows a
		// second.
		d := deadline
		if now := time.Now(); !now.Before(d) {
			d = now.Add(time.Second)
		}
		c.nc.SetWriteDeadline(d)
		_, err := c.nc.Write(buf)
		if traced != nil {
			// The answer may be back, and the caller reading the stamps,
			// before this: atomics; and its call pooled and carrying
			// another request: seq.
			ended := echoNow()
			for _, tc := range traced {
				if tc.cl.seq.Load() == tc.seq {
					tc.cl.writing.Store(began)
					tc.cl.written.Store(ended)
				}
			}
		}
		c.wmu.Lock()
		c.spare = buf[:0]
		if err != nil {
			c.out, c.writing = c.out[:0], false
		}
		c.wmu.Unlock()
		if err != nil {
			err = fmt.Errorf("echo: write: %w", err)
			c.close(err) // a partial frame: the stream is lost, and every call pending on it
			return err
		}
	}
}

// forget removes a call that gave up. It reports false when the reader
// already took it to deliver its answer.
func (c *echoConn) forget(cl *echoCall) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending[cl.id] != cl {
		return false
	}
	delete(c.pending, cl.id)
	return true
}

func (c *echoConn) readLoop() {
	defer close(c.readerDone)
	r := proto.NewReader(c.nc, proto.DefaultMaxFrame)
	for {
		hdr, _, err := r.Next()
		if err != nil {
			c.close(fmt.Errorf("echo: read: %w", err))
			return
		}
		c.mu.Lock()
		cl := c.pending[hdr.ID]
		delete(c.pending, hdr.ID)
		c.mu.Unlock()
		if cl != nil {
			if cl.traced {
				cl.read.Store(echoNow())
			}
			cl.done <- nil
		}
	}
}

// close fails every pending call with err and closes the socket.
func (c *echoConn) close(err error) {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = err
	c.closed.Store(true)
	pending := c.pending
	c.pending = nil
	c.mu.Unlock()
	c.nc.Close()
	for _, cl := range pending {
		cl.done <- err
	}
}

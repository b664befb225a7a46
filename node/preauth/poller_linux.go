package preauth

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/fcap-io/fcap/node/conns"
)

// Poller watches connections until their first frame is whole, on one
// goroutine (Run) with an epoll instance of its own. An event names a
// connection by an id the poller gave it, never by its descriptor: a
// connection closed elsewhere (conns.Places.CloseAll) leaves the set with
// its descriptor, whose number a new connection may then have. For the
// same reason the poller reaches a descriptor only through the
// connection's syscall.RawConn, which does not run on a closed one.
type Poller struct {
	cfg     Config
	epfd    int
	ep      *os.File        // epfd in Go's network poller: Run waits there, not in epoll_wait
	epRaw   syscall.RawConn // ep's
	scratch []byte          // what a read takes; Run's alone

	mu sync.Mutex
	// The fields below are guarded by mu.
	watched map[uint64]*pending
	lastID  uint64
	stopped bool
}

// New returns a poller; Run runs it.
func New(cfg Config) (*Poller, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("preauth: epoll: %w", err)
	}
	// A goroutine blocked in epoll_wait would hold its P until the
	// runtime's monitor takes it back (up to 10 ms later when it has
	// been idle): with GOMAXPROCS=1 every served connection would wait
	// for it. Non-blocking, the epoll descriptor is itself watched by
	// Go's network poller (it is readable when an event is ready), and
	// Run parks there like any reader.
	if err := syscall.SetNonblock(epfd, true); err != nil {
		syscall.Close(epfd)
		return nil, fmt.Errorf("preauth: epoll: %w", err)
	}
	ep := os.NewFile(uintptr(epfd), "preauth-epoll")
	raw, err := ep.SyscallConn()
	if err != nil {
		ep.Close()
		return nil, fmt.Errorf("preauth: epoll: %w", err)
	}
	return &Poller{cfg: cfg, epfd: epfd, ep: ep, epRaw: raw, scratch: make([]byte, 64<<10), watched: map[uint64]*pending{}}, nil
}

// Add watches c, whose first frame may be at most maxFrame long; tokens
// says the node requires them (the frame is the Hello). It reports false
// when it cannot (c is not a socket, or the poller stopped): the caller
// serves c itself.
func (p *Poller) Add(c *conns.Conn, maxFrame int, tokens bool) bool {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	w := newPending(c, raw, maxFrame, tokens, &p.cfg, p.cfg.Now())
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return false
	}
	// Under mu: Run finds the id as soon as an event names it.
	id := p.lastID + 1
	var addErr error
	err = raw.Control(func(fd uintptr) {
		ev := syscall.EpollEvent{Events: syscall.EPOLLIN | syscall.EPOLLRDHUP, Fd: int32(id), Pad: int32(id >> 32)}
		addErr = syscall.EpollCtl(p.epfd, syscall.EPOLL_CTL_ADD, int(fd), &ev)
	})
	if err != nil || addErr != nil {
		return false
	}
	p.lastID = id
	p.watched[id] = w
	return true
}

// Stop makes Run let every connection go (Stopped) and return, within
// sweepEvery. Safe to call twice.
func (p *Poller) Stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped = true
}

// Run reads the watched connections as their bytes arrive and lets them
// go, until Stop.
func (p *Poller) Run() {
	defer p.ep.Close()
	events := make([]syscall.EpollEvent, 64)
	var swept time.Time
	for {
		k, err := p.wait(events)
		if err != nil {
			// Not on a valid instance: let everything go; Add refuses
			// from now on and the caller serves connections itself.
			p.Stop()
		}
		now := p.cfg.Now()
		for _, ev := range events[:max(k, 0)] {
			p.readable(uint64(uint32(ev.Fd))|uint64(uint32(ev.Pad))<<32, now)
		}
		if k == len(events) {
			// A burst (thousands opening or closing at once): let the
			// served connections' readers in between batches, rather
			// than after the scheduler's 10 ms slice.
			runtime.Gosched()
		}
		p.mu.Lock()
		stopped := p.stopped
		p.mu.Unlock()
		if stopped {
			p.letGo(func(*pending) (Result, bool) { return Stopped, true })
			return
		}
		// The clock may be a test's: how often is the machine's.
		if time.Since(swept) >= sweepEvery {
			swept = time.Now()
			p.letGo(func(w *pending) (Result, bool) {
				switch {
				case w.c.Lost():
					return Evicted, true
				case !now.Before(w.deadline):
					return w.late, true
				}
				return 0, false
			})
		}
	}
}

// wait returns the events ready, after at most sweepEvery: it parks in
// Go's network poller until the epoll descriptor is readable or the
// deadline passes (then k is 0).
func (p *Poller) wait(events []syscall.EpollEvent) (k int, err error) {
	p.ep.SetReadDeadline(time.Now().Add(sweepEvery))
	var waitErr error
	err = p.epRaw.Read(func(fd uintptr) bool {
		k, waitErr = syscall.EpollWait(int(fd), events, 0)
		return k != 0 || waitErr != nil && waitErr != syscall.EINTR
	})
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return 0, nil
	case err != nil:
		return 0, err
	case waitErr != nil && waitErr != syscall.EINTR:
		return 0, waitErr
	}
	return max(k, 0), nil
}

// readable reads what has arrived on connection id and lets it go if its
// first frame is whole or it closed.
func (p *Poller) readable(id uint64, now time.Time) {
	p.mu.Lock()
	w := p.watched[id]
	p.mu.Unlock()
	if w == nil {
		return
	}
	if r, done := p.read(w, now); done {
		p.release(id, w, r)
	}
}

// read takes what has arrived, up to the first frame's end, and reports
// whether the connection is to be let go, and why.
func (p *Poller) read(w *pending, now time.Time) (Result, bool) {
	for {
		room := min(w.room(), len(p.scratch))
		var k int
		var readErr error
		// One attempt: the callback never asks to wait.
		err := w.raw.Read(func(fd uintptr) bool {
			k, readErr = syscall.Read(int(fd), p.scratch[:room])
			return true
		})
		switch {
		case err != nil:
			// Closed, or its read deadline passed: a newer connection
			// took its place (conns) and woke it.
			if w.c.Lost() {
				return Evicted, true
			}
			return Closed, true
		case readErr == syscall.EAGAIN || readErr == syscall.EINTR:
			return 0, false
		case readErr != nil || k == 0:
			return Closed, true
		}
		if w.arrived(p.scratch[:k], &p.cfg, now) {
			return Ready, true
		}
		if k < room {
			return 0, false // all there was
		}
	}
}

// letGo lets go of every connection for which why reports true.
func (p *Poller) letGo(why func(*pending) (Result, bool)) {
	type gone struct {
		id uint64
		w  *pending
		r  Result
	}
	var due []gone
	p.mu.Lock()
	for id, w := range p.watched {
		if r, ok := why(w); ok {
			due = append(due, gone{id, w, r})
		}
	}
	p.mu.Unlock()
	for _, g := range due {
		p.release(g.id, g.w, g.r)
	}
}

// release stops watching a connection and hands it to Done.
func (p *Poller) release(id uint64, w *pending, r Result) {
	p.mu.Lock()
	delete(p.watched, id)
	p.mu.Unlock()
	if r != Ready {
		// Done closes it, which takes it out of the set: one system
		// call fewer a connection when a flood's thousands close.
		p.cfg.Done(w.c, r)
		return
	}
	// On a closed connection Control does not run: the kernel took the
	// descriptor out of the set when it closed, and its number may be
	// another connection's by now.
	w.raw.Control(func(fd uintptr) {
		syscall.EpollCtl(p.epfd, syscall.EPOLL_CTL_DEL, int(fd), nil)
	})
	w.c.SetReadDeadline(w.deadline)
	w.c.Give(w.buf)
	p.cfg.Done(w.c, r)
}

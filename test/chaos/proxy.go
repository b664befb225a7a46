// Package chaos drives real fcapd processes under an ad-server-like load
// while it injects faults at random (kill -9 and restart, SIGSTOP and
// SIGCONT, slow, reset and black-holed client connections, gossip
// partitions) and checks the cluster's promises at the end of the run.
// See README.md in this folder for the command and the figures.
//
// This file holds the fault-injecting TCP proxy that sits between the
// client and one node.
package chaos

import (
	"net"
	"sync"
	"time"
)

// Fault is what a Proxy does to the traffic it carries.
type Fault int

const (
	// Pass forwards bytes as they come.
	Pass Fault = iota
	// Slow holds every chunk of bytes for the proxy's delay before it
	// forwards it, both ways.
	Slow
	// Reset closes every connection at once and every new one as soon
	// as it is accepted (a node the network refuses).
	Reset
	// BlackHole accepts and reads, but forwards nothing either way (a
	// node that vanished without a FIN or RST).
	BlackHole
)

func (f Fault) String() string {
	switch f {
	case Pass:
		return "pass"
	case Slow:
		return "slow"
	case Reset:
		return "reset"
	case BlackHole:
		return "black-hole"
	}
	return "unknown"
}

// Proxy forwards TCP connections from a loopback port to a target
// address and injects faults on demand. The target may change (a node
// restarted on a new port); connections opened after the change go to
// the new target.
type Proxy struct {
	ln net.Listener
	wg sync.WaitGroup // the accept loop and every pump

	mu sync.Mutex
	// The fields below are guarded by mu.
	target string
	fault  Fault
	delay  time.Duration
	conns  map[net.Conn]struct{} // both ends of every open connection
	closed bool
}

// NewProxy listens on an ephemeral loopback port and forwards to target.
func NewProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the address clients dial.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// SetTarget points new connections at addr.
func (p *Proxy) SetTarget(addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.target = addr
}

// Set switches the fault; delay matters for Slow only. Reset closes every
// open connection at once.
func (p *Proxy) Set(f Fault, delay time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fault, p.delay = f, delay
	if f == Reset {
		for c := range p.conns {
			c.Close()
		}
	}
}

func (p *Proxy) state() (Fault, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.fault, p.delay
}

// Close stops listening, closes every connection and waits for the
// proxy's goroutines. Safe to call twice.
func (p *Proxy) Close() {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		p.ln.Close()
		for c := range p.conns {
			c.Close()
		}
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// track registers an open connection; it reports false (and closes c)
// when the proxy is closed or refuses connections.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.fault == Reset {
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
		p.wg.Add(1)
		go p.serve(c)
	}
}

// serve dials the target and pumps both ways until either side closes.
func (p *Proxy) serve(front net.Conn) {
	defer p.wg.Done()
	defer p.untrack(front)
	p.mu.Lock()
	target := p.target
	p.mu.Unlock()
	back, err := net.DialTimeout("tcp", target, time.Second)
	if err != nil {
		return
	}
	if !p.track(back) {
		return
	}
	defer p.untrack(back)
	var pumps sync.WaitGroup
	pumps.Add(2)
	go func() {
		defer pumps.Done()
		p.pump(back, front)
	}()
	go func() {
		defer pumps.Done()
		p.pump(front, back)
	}()
	pumps.Wait()
}

// pump copies src to dst, applying the fault in force at each chunk.
// When it ends it closes both, so the other direction ends too.
func (p *Proxy) pump(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			switch f, d := p.state(); f {
			case BlackHole:
				n = 0 // swallowed
			case Slow:
				time.Sleep(d)
			}
			if n > 0 {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
		}
		if err != nil {
			return
		}
	}
}

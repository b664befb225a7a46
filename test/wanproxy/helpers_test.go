package wanproxy

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// server is a loopback TCP server whose handler runs once per
// connection; it is closed, and its goroutines waited for, when the test
// ends.
type server struct {
	ln net.Listener
	wg sync.WaitGroup

	mu    sync.Mutex // guards conns
	conns map[net.Conn]struct{}
}

func newServer(t *testing.T, handle func(net.Conn)) *server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &server{ln: ln, conns: map[net.Conn]struct{}{}}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns[c] = struct{}{}
			s.mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer c.Close()
				handle(c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		s.mu.Lock()
		for c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return s
}

func (s *server) addr() string { return s.ln.Addr().String() }

// echo copies everything back, then closes its side.
func echo(c net.Conn) { io.Copy(c, c) }

// newProxy starts a proxy to upstream, closed when the test ends.
func newProxy(t *testing.T, upstream string) *Proxy {
	t.Helper()
	p, err := New(upstream)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// dial connects to addr, closed when the test ends.
func dial(t *testing.T, addr string) *net.TCPConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c.(*net.TCPConn)
}

// roundTrip writes one byte and polls for its echo (10 s at most),
// returning how long it took.
func roundTrip(t *testing.T, c net.Conn) time.Duration {
	t.Helper()
	start := time.Now()
	if _, err := c.Write([]byte{'x'}); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	defer c.SetReadDeadline(time.Time{})
	b := make([]byte, 1)
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatalf("echo: %v", err)
	}
	if b[0] != 'x' {
		t.Fatalf("echo garbled: %q", b)
	}
	return time.Since(start)
}

// eventually polls cond until it holds or 10 s pass.
func eventually(t *testing.T, cond func() bool, what string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after 10s: %s", what)
		}
	}
}

// never polls cond for window and fails the test if it ever holds: the
// only way to see that something does not happen.
func never(t *testing.T, window time.Duration, cond func() bool, what string) {
	t.Helper()
	for deadline := time.Now().Add(window); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			t.Fatalf("%s", what)
		}
	}
}

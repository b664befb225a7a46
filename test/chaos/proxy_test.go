package chaos

import (
	"bufio"
	"errors"
	"net"
	"os"
	"testing"
	"time"
)

// echoServer answers every line with the same line.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadBytes('\n')
					if err != nil {
						return
					}
					if _, err := c.Write(line); err != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return ln.Addr().String()
}

// roundTrip writes a line and reads the echo, bounded by timeout.
func roundTrip(c net.Conn, timeout time.Duration) error {
	c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "ping\n" {
		return errors.New("echo garbled: " + line)
	}
	return nil
}

func TestProxyFaults(t *testing.T) {
	p, err := NewProxy(echoServer(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	dial := func() net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}

	c := dial()
	if err := roundTrip(c, 5*time.Second); err != nil {
		t.Fatalf("pass: %v", err)
	}

	const delay = 50 * time.Millisecond
	p.Set(Slow, delay)
	start := time.Now()
	if err := roundTrip(c, 5*time.Second); err != nil {
		t.Fatalf("slow: %v", err)
	}
	if took := time.Since(start); took < 2*delay { // held once each way
		t.Fatalf("slow: the echo took %v, want at least %v", took, 2*delay)
	}

	p.Set(BlackHole, 0)
	if err := roundTrip(c, 300*time.Millisecond); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("black hole: got %v, want a timeout", err)
	}

	p.Set(Reset, 0)
	if err := roundTrip(c, 5*time.Second); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("reset, open connection: got %v, want it closed", err)
	}
	if err := roundTrip(dial(), 5*time.Second); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("reset, new connection: got %v, want it closed", err)
	}

	p.Set(Pass, 0)
	if err := roundTrip(dial(), 5*time.Second); err != nil {
		t.Fatalf("healed: %v", err)
	}
}

package wanproxy

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The tests below assert lower bounds on time only: the proxy may be
// slower than its knobs on a busy machine, never faster.

func TestLatency(t *testing.T) {
	p := newProxy(t, newServer(t, echo).addr())
	if err := p.Set(Forward, Link{Latency: 30 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if err := p.Set(Reverse, Link{Latency: 20 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	c := dial(t, p.Addr())
	for i := range 3 {
		if rt := roundTrip(t, c); rt < 50*time.Millisecond {
			t.Fatalf("round trip %d took %v, below the 50ms the two directions add up to", i, rt)
		}
	}
	// Changed while the connection is open: the next bytes pay it.
	if err := p.SetBoth(Link{Latency: 80 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if rt := roundTrip(t, c); rt < 160*time.Millisecond {
		t.Fatalf("round trip after the change took %v, below 160ms", rt)
	}
	if got := p.Link(Forward).Latency; got != 80*time.Millisecond {
		t.Fatalf("Link(Forward).Latency = %v", got)
	}
	eventually(t, func() bool { return p.Forwarded(Forward) == 4 && p.Forwarded(Reverse) == 4 },
		"4 bytes forwarded each way")
}

func TestLossHoldsForRTO(t *testing.T) {
	p := newProxy(t, newServer(t, echo).addr())
	// Every chunk lost: each waits a retransmission timeout of
	// max(MinRTO, 2*RTT) = MinRTO on top of the latency.
	if err := p.Set(Forward, Link{Latency: 10 * time.Millisecond, Loss: 1}); err != nil {
		t.Fatal(err)
	}
	if err := p.Set(Reverse, Link{Latency: 10 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	c := dial(t, p.Addr())
	if rt := roundTrip(t, c); rt < MinRTO+20*time.Millisecond {
		t.Fatalf("round trip with every chunk lost took %v, below MinRTO plus the latency", rt)
	}
	// A long RTT stretches the timeout: 2 * (150ms + 150ms).
	if err := p.SetBoth(Link{Latency: 150 * time.Millisecond, Loss: 1}); err != nil {
		t.Fatal(err)
	}
	if rt := roundTrip(t, c); rt < 2*150*time.Millisecond+2*600*time.Millisecond {
		t.Fatalf("round trip took %v, below two latencies and two RTOs of 2*RTT", rt)
	}
}

func TestRTO(t *testing.T) {
	for _, tc := range []struct {
		a, b time.Duration
		want time.Duration
	}{
		{0, 0, MinRTO},
		{40 * time.Millisecond, 40 * time.Millisecond, MinRTO},
		{100 * time.Millisecond, 60 * time.Millisecond, 320 * time.Millisecond},
	} {
		if got := rto(Link{Latency: tc.a}, Link{Latency: tc.b}); got != tc.want {
			t.Errorf("rto(%v, %v) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

// TestJitterKeepsOrder streams through both directions of a jittery
// link in many small writes: a chunk that overtook another would garble
// the echo.
func TestJitterKeepsOrder(t *testing.T) {
	p := newProxy(t, newServer(t, echo).addr())
	if err := p.SetBoth(Link{Latency: 3 * time.Millisecond, Jitter: 3 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	c := dial(t, p.Addr())
	const total = 2 << 20
	sent, got := sha256.New(), sha256.New()
	var wg sync.WaitGroup
	wg.Add(1)
	var werr error
	go func() {
		defer wg.Done()
		r := rand.New(rand.NewPCG(1, 2))
		buf := make([]byte, 1024)
		for n := 0; n < total; n += len(buf) {
			for i := range buf {
				buf[i] = byte(r.Uint32())
			}
			sent.Write(buf)
			if _, werr = c.Write(buf); werr != nil {
				return
			}
		}
		werr = c.CloseWrite()
	}()
	c.SetReadDeadline(time.Now().Add(60 * time.Second))
	n, err := io.Copy(got, c)
	wg.Wait()
	if werr != nil || err != nil {
		t.Fatalf("write: %v, read: %v", werr, err)
	}
	if n != total {
		t.Fatalf("echoed %d bytes, want %d", n, total)
	}
	if !bytes.Equal(sent.Sum(nil), got.Sum(nil)) {
		t.Fatal("the echo differs from what was sent: the jitter reordered the stream")
	}
	if p.Forwarded(Forward) != total || p.Forwarded(Reverse) != total {
		t.Fatalf("forwarded %d forward, %d reverse, want %d each", p.Forwarded(Forward), p.Forwarded(Reverse), total)
	}
}

// sink counts what it reads, until EOF.
type sink struct {
	n   atomic.Int64
	eof atomic.Bool
}

func (s *sink) handle(c net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := c.Read(buf)
		s.n.Add(int64(n))
		if err != nil {
			s.eof.Store(errors.Is(err, io.EOF))
			return
		}
	}
}

func TestBandwidthCap(t *testing.T) {
	var s sink
	p := newProxy(t, newServer(t, s.handle).addr())
	const (
		rate  = 256 << 10
		burst = 16 << 10
		total = 256 << 10
	)
	if err := p.Set(Forward, Link{Bandwidth: rate, Burst: burst}); err != nil {
		t.Fatal(err)
	}
	c := dial(t, p.Addr())
	start := time.Now()
	if _, err := c.Write(make([]byte, total)); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() bool { return s.n.Load() == total }, "the sink got every byte")
	elapsed := time.Since(start)
	floor := time.Duration(float64(total-burst) / rate * float64(time.Second))
	if elapsed < floor {
		t.Fatalf("%d bytes at %d B/s took %v, below (bytes - burst)/rate = %v", total, rate, elapsed, floor)
	}
}

// TestBandwidthShared: two connections share one direction's cap.
func TestBandwidthShared(t *testing.T) {
	var s sink
	p := newProxy(t, newServer(t, s.handle).addr())
	const (
		rate  = 256 << 10
		burst = 16 << 10
		each  = 128 << 10
	)
	if err := p.Set(Forward, Link{Bandwidth: rate, Burst: burst}); err != nil {
		t.Fatal(err)
	}
	a, b := dial(t, p.Addr()), dial(t, p.Addr())
	start := time.Now()
	var wg sync.WaitGroup
	for _, c := range []net.Conn{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.Write(make([]byte, each))
		}()
	}
	wg.Wait()
	eventually(t, func() bool { return s.n.Load() == 2*each }, "the sink got every byte of both")
	floor := time.Duration(float64(2*each-burst) / rate * float64(time.Second))
	if elapsed := time.Since(start); elapsed < floor {
		t.Fatalf("2 x %d bytes at %d B/s took %v, below %v", each, rate, elapsed, floor)
	}
}

func TestCutHoldsEverythingUntilHeal(t *testing.T) {
	var s sink
	var toClient sync.WaitGroup // the server's write during the cut
	toClient.Add(1)
	srv := newServer(t, func(c net.Conn) {
		c.Write([]byte("from upstream"))
		toClient.Done()
		s.handle(c)
	})
	p := newProxy(t, srv.addr())
	p.Cut()
	if !p.IsCut() {
		t.Fatal("IsCut false after Cut")
	}
	c := dial(t, p.Addr())
	const total = 100 << 10
	if _, err := c.Write(bytes.Repeat([]byte{7}, total)); err != nil {
		t.Fatal(err)
	}
	if err := c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	toClient.Wait()
	eventually(t, func() bool { return p.Pending(Forward) == total && p.Pending(Reverse) == 13 },
		"the proxy read both sides' bytes")
	// Nothing crosses: no byte, no FIN either way, and the client's
	// socket stays open (a read times out rather than ending).
	never(t, 300*time.Millisecond, func() bool {
		return s.n.Load() > 0 || s.eof.Load() || p.Forwarded(Forward) > 0 || p.Forwarded(Reverse) > 0
	}, "bytes or a FIN crossed a cut link")
	c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read from the client's side during the cut: %v, want a timeout", err)
	}
	p.Heal()
	eventually(t, func() bool { return s.n.Load() == total && s.eof.Load() }, "every byte and the FIN after the heal")
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	b := make([]byte, 13)
	if _, err := io.ReadFull(c, b); err != nil || string(b) != "from upstream" {
		t.Fatalf("read after the heal: %q, %v", b, err)
	}
	if p.Forwarded(Forward) != total || p.Pending(Forward) != 0 {
		t.Fatalf("forwarded %d, pending %d after the heal", p.Forwarded(Forward), p.Pending(Forward))
	}
}

// TestCutHidesReset: a side that resets its connection during a cut is
// not seen by the other side until the heal.
func TestCutHidesReset(t *testing.T) {
	var s sink
	p := newProxy(t, newServer(t, s.handle).addr())
	c := dial(t, p.Addr())
	if _, err := c.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	eventually(t, func() bool { return s.n.Load() == 5 }, "the sink got hello")
	p.Cut()
	c.SetLinger(0)
	c.Close() // a reset
	never(t, 300*time.Millisecond, func() bool { return p.Conns() == 0 },
		"the proxy closed the upstream side during the cut")
	p.Heal()
	eventually(t, func() bool { return p.Conns() == 0 }, "the connection ended after the heal")
}

func TestCutAndHealTwice(t *testing.T) {
	p := newProxy(t, newServer(t, echo).addr())
	c := dial(t, p.Addr())
	for range 2 {
		roundTrip(t, c)
		p.Cut()
		p.Cut() // a second Cut changes nothing
		if _, err := c.Write([]byte{'x'}); err != nil {
			t.Fatal(err)
		}
		eventually(t, func() bool { return p.Pending(Forward) == 1 }, "the proxy read the byte")
		p.Heal()
		p.Heal()
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestSetUpstream(t *testing.T) {
	a := newServer(t, func(c net.Conn) { c.Write([]byte("a")) })
	b := newServer(t, func(c net.Conn) { c.Write([]byte("b")) })
	p := newProxy(t, "")
	read := func(c net.Conn) string {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		got, _ := io.ReadAll(c)
		return string(got)
	}
	// Dialed before the proxy has an upstream: it waits for one.
	early := dial(t, p.Addr())
	eventually(t, func() bool { return p.Conns() == 1 }, "the proxy accepted the early connection")
	p.SetUpstream(a.addr())
	if got := read(early); got != "a" {
		t.Fatalf("the connection made before the upstream was set got %q", got)
	}
	if got := read(dial(t, p.Addr())); got != "a" {
		t.Fatalf("got %q from upstream a", got)
	}
	p.SetUpstream(b.addr())
	if got := read(dial(t, p.Addr())); got != "b" || p.Upstream() != b.addr() {
		t.Fatalf("got %q after the move to b", got)
	}
}

// upper is a rewrite that upper-cases ASCII letters.
type upper struct{ r io.Reader }

func (u upper) Read(b []byte) (int, error) {
	n, err := u.r.Read(b)
	copy(b, bytes.ToUpper(b[:n]))
	return n, err
}

func TestRewrite(t *testing.T) {
	p := newProxy(t, newServer(t, echo).addr())
	before := dial(t, p.Addr())
	roundTrip(t, before) // set up before the change: it keeps the bytes as sent
	if err := p.Rewrite(Reverse, func(r io.Reader) io.Reader { return upper{r} }); err != nil {
		t.Fatal(err)
	}
	if err := p.Rewrite(Dir(7), nil); !errors.Is(err, ErrBadDir) {
		t.Fatalf("Rewrite(Dir(7)): %v, want ErrBadDir", err)
	}
	after := dial(t, p.Addr())
	for _, tc := range []struct {
		c    *net.TCPConn
		want string
	}{{before, "echo"}, {after, "ECHO"}} {
		if _, err := tc.c.Write([]byte("echo")); err != nil {
			t.Fatal(err)
		}
		tc.c.SetReadDeadline(time.Now().Add(10 * time.Second))
		b := make([]byte, 4)
		if _, err := io.ReadFull(tc.c, b); err != nil || string(b) != tc.want {
			t.Fatalf("read %q, %v; want %q", b, err, tc.want)
		}
	}
}

func TestBadKnobs(t *testing.T) {
	p := newProxy(t, "")
	for _, tc := range []struct {
		name string
		l    Link
	}{
		{"negative latency", Link{Latency: -1}},
		{"negative jitter", Link{Jitter: -1}},
		{"negative bandwidth", Link{Bandwidth: -1}},
		{"negative burst", Link{Burst: -1}},
		{"loss above 1", Link{Loss: 1.5}},
		{"negative loss", Link{Loss: -0.1}},
		{"NaN loss", Link{Loss: math.NaN()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := p.Set(Forward, tc.l); !errors.Is(err, ErrBadLink) {
				t.Fatalf("Set: %v, want ErrBadLink", err)
			}
			if err := p.SetBoth(tc.l); !errors.Is(err, ErrBadLink) {
				t.Fatalf("SetBoth: %v, want ErrBadLink", err)
			}
		})
	}
	if err := p.Set(Dir(2), Link{}); !errors.Is(err, ErrBadDir) {
		t.Fatalf("Set(Dir(2)): %v, want ErrBadDir", err)
	}
	if p.Link(Forward) != (Link{}) {
		t.Fatalf("a refused Set changed the link: %+v", p.Link(Forward))
	}
}

// TestCloseWithTrafficHeld: Close ends connections held by a cut, a
// latency, a bandwidth wait and a missing upstream, twice over; goleak
// (TestMain) sees that every goroutine went.
func TestCloseWithTrafficHeld(t *testing.T) {
	srv := newServer(t, echo)
	read := func(p *Proxy) bool { return p.Pending(Forward) > 0 || p.Forwarded(Forward) > 0 }
	for _, tc := range []struct {
		name  string
		set   func(*Proxy)
		ready func(*Proxy) bool
	}{
		{"cut", func(p *Proxy) { p.Cut() }, read},
		{"latency", func(p *Proxy) { p.SetBoth(Link{Latency: time.Hour}) }, read},
		{"bandwidth", func(p *Proxy) { p.SetBoth(Link{Bandwidth: 1, Burst: 1}) }, read},
		{"no upstream", func(p *Proxy) { p.SetUpstream("") }, func(p *Proxy) bool { return p.Conns() == 1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New(srv.addr())
			if err != nil {
				t.Fatal(err)
			}
			tc.set(p)
			c := dial(t, p.Addr())
			c.Write([]byte("held"))
			eventually(t, func() bool { return tc.ready(p) }, "the proxy holds the connection")
			p.Close()
			p.Close()
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			// It ends with a FIN or a reset (unread bytes), not a timeout.
			if _, err := io.ReadAll(c); errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("the client's side did not end after Close: %v", err)
			}
			if p.Conns() != 0 {
				t.Fatalf("%d connections open after Close", p.Conns())
			}
			if _, err := net.DialTimeout("tcp", p.Addr(), time.Second); err == nil {
				t.Fatal("a closed proxy accepted a connection")
			}
		})
	}
}

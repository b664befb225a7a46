package preauth

import (
	"net"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fcap-io/fcap/node/conns"
	"github.com/fcap-io/fcap/proto"
	"github.com/prometheus/client_golang/prometheus"
)

const (
	testIdle      = time.Minute
	testHandshake = 2 * time.Second
)

// clock is the poller's, moved by the test; it counts the poller's
// rounds (Run reads it once after each wait for events).
type clock struct {
	mu     sync.Mutex
	now    time.Time
	rounds int
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rounds++
	return c.now
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func (c *clock) round() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rounds
}

type done struct {
	c *conns.Conn
	r Result
}

// harness is a listener, the places of its connections and a poller
// watching them; what the poller lets go arrives on done.
type harness struct {
	t      *testing.T
	ln     net.Listener
	places *conns.Places
	clock  *clock
	p      *Poller
	done   chan done
}

func newHarness(t *testing.T, maxPending int) *harness {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	h := &harness{
		t:     t,
		ln:    ln,
		clock: &clock{now: time.Unix(1_000_000, 0)},
		places: conns.New(100, maxPending, conns.Metrics{
			Open:    prometheus.NewGauge(prometheus.GaugeOpts{Name: "open"}),
			Pending: prometheus.NewGauge(prometheus.GaugeOpts{Name: "pending"}),
			Evicted: prometheus.NewCounter(prometheus.CounterOpts{Name: "evicted"}),
		}),
		done: make(chan done, 100),
	}
	h.p, err = New(Config{
		IdleTimeout:      testIdle,
		HandshakeTimeout: testHandshake,
		Now:              h.clock.Now,
		Done: func(c *conns.Conn, r Result) {
			if r != Ready {
				h.places.Untrack(c)
			}
			h.done <- done{c, r}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(h.p.Run)
	t.Cleanup(func() {
		h.p.Stop()
		wg.Wait()
		for len(h.done) > 0 {
			// The clients' ends close first (t.Cleanup's order).
			if d := <-h.done; d.r != Stopped && d.r != Closed {
				t.Errorf("a connection was let go as %d, unexpected", d.r)
			}
		}
		h.places.CloseAll()
	})
	return h
}

// accept connects a client and gives the poller the node's end.
func (h *harness) accept(tokens bool) (net.Conn, *conns.Conn) {
	h.t.Helper()
	return h.acceptAfter(tokens, func() {})
}

// acceptAfter connects a client, calls connected, then accepts the
// connection and gives the poller the node's end, with the node's limit
// on a first frame.
func (h *harness) acceptAfter(tokens bool, connected func()) (net.Conn, *conns.Conn) {
	h.t.Helper()
	client, err := net.Dial("tcp", h.ln.Addr().String())
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { client.Close() })
	connected()
	c, err := h.ln.Accept()
	if err != nil {
		h.t.Fatal(err)
	}
	st := h.places.Track(c)
	if st == nil {
		h.t.Fatal("no place")
	}
	maxFrame := proto.DefaultMaxFrame
	if tokens {
		maxFrame = 4 << 10
	}
	if !h.p.Add(st, maxFrame, tokens) {
		h.t.Fatal("the poller did not take the connection")
	}
	return client, st
}

// settle waits until the poller has read what was written before: a
// write on loopback is readable when it returns, and three rounds later
// the poller has waited for events after it, and read.
func (h *harness) settle() {
	h.t.Helper()
	start := h.clock.round()
	deadline := time.Now().Add(10 * time.Second)
	for h.clock.round() < start+3 {
		if time.Now().After(deadline) {
			h.t.Fatal("the poller stopped going round")
		}
		time.Sleep(time.Millisecond)
	}
}

// next waits for the poller to let a connection go.
func (h *harness) next() done {
	h.t.Helper()
	select {
	case d := <-h.done:
		return d
	case <-time.After(10 * time.Second):
		h.t.Fatal("the poller let no connection go in 10 s")
		return done{}
	}
}

// expect waits for the poller to let st go, for r.
func (h *harness) expect(st *conns.Conn, r Result) {
	h.t.Helper()
	if d := h.next(); d.c != st || d.r != r {
		h.t.Fatalf("the poller let a connection go as %d (the expected one: %v), want %d", d.r, d.c == st, r)
	}
}

// quiet fails if the poller let a connection go.
func (h *harness) quiet() {
	h.t.Helper()
	h.settle()
	select {
	case d := <-h.done:
		h.t.Fatalf("the poller let a connection go as %d", d.r)
	default:
	}
}

func frame(t *testing.T, id uint64) []byte {
	b, err := proto.AppendFrame(nil, id, &proto.Ping{})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func write(t *testing.T, c net.Conn, b []byte) {
	t.Helper()
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
}

// TestFirstFrameInPieces: a first frame that arrives in pieces is handed
// over whole when its last byte arrives, and the connection's reads go on
// to what follows it.
func TestFirstFrameInPieces(t *testing.T) {
	for _, tokens := range []bool{false, true} {
		h := newHarness(t, 10)
		client, st := h.accept(tokens)
		first := frame(t, 1)
		for _, piece := range [][]byte{first[:1], first[1:6], first[6 : len(first)-1]} {
			write(t, client, piece)
			h.quiet()
		}
		write(t, client, first[len(first)-1:])
		h.expect(st, Ready)
		write(t, client, frame(t, 2))
		r := proto.NewReader(st, proto.DefaultMaxFrame)
		for id := uint64(1); id <= 2; id++ {
			st.SetReadDeadline(time.Now().Add(10 * time.Second))
			hdr, _, err := r.Next()
			if err != nil || hdr.Type != proto.TypePing || hdr.ID != id {
				t.Fatalf("tokens %v: frame %d read as %v %d: %v", tokens, id, hdr.Type, hdr.ID, err)
			}
		}
		h.places.Untrack(st)
	}
}

// TestRefusedLengthHandedOver: a length the frame reader refuses is
// handed over as soon as it arrives, for the reader to say why.
func TestRefusedLengthHandedOver(t *testing.T) {
	h := newHarness(t, 10)
	client, st := h.accept(true)
	write(t, client, []byte{0, 0x10, 0, 0}) // 1 MiB, before Hello
	h.expect(st, Ready)
	h.places.Untrack(st)
}

// TestClosedBeforeFirstFrame: a connection that closes before its first
// frame is whole is closed by the poller and gives up its place.
func TestClosedBeforeFirstFrame(t *testing.T) {
	h := newHarness(t, 10)
	client, st := h.accept(false)
	write(t, client, frame(t, 1)[:5])
	client.Close()
	h.expect(st, Closed)
	if n := h.places.Open(); n != 0 {
		t.Fatalf("%d connections hold a place", n)
	}
}

// TestFirstFrameDeadlines: a connection is let go at its deadline, for
// the reason the deadline was for.
func TestFirstFrameDeadlines(t *testing.T) {
	for _, c := range []struct {
		name   string
		tokens bool
		send   int // bytes of a first frame sent
		wait   time.Duration
		want   Result
	}{
		{"idle", false, 0, testIdle, Idle},
		{"header", false, 5, testHandshake, Handshake},
		{"body", false, proto.HeaderSize, testIdle, Idle},
		{"hello", true, 0, testHandshake, Handshake},
		{"hello-begun", true, proto.HeaderSize, testHandshake, Handshake},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, 10)
			// A frame longer than the header, so that the body is due.
			first, err := proto.AppendFrame(nil, 1, &proto.Hello{Token: "0123456789"})
			if err != nil {
				t.Fatal(err)
			}
			client, st := h.accept(c.tokens)
			if c.send > 0 {
				write(t, client, first[:c.send])
			}
			h.settle()
			h.clock.advance(c.wait - time.Millisecond)
			h.quiet()
			h.clock.advance(time.Millisecond)
			h.expect(st, c.want)
		})
	}
}

// TestEvictedWhileWatched: a connection that loses its place to a newer
// one is let go as evicted; the newer one is still watched.
func TestEvictedWhileWatched(t *testing.T) {
	h := newHarness(t, 1)
	_, old := h.accept(false)
	_, _ = h.accept(false)
	h.expect(old, Evicted)
	h.quiet()
}

// TestClosedElsewhereDescriptorReused: a watched connection closed by
// someone else (the node's CloseAll) leaves the set with its descriptor;
// when the poller lets it go later, it must not take out of the set the
// new connection that now has the same descriptor number, nor take one
// for the other.
func TestClosedElsewhereDescriptorReused(t *testing.T) {
	h := newHarness(t, 10)
	_, old := h.accept(false)
	oldFD := fd(t, old)
	h.clock.advance(testIdle / 2)
	client, st := h.acceptAfter(false, func() { old.Conn.Close() })
	if newFD := fd(t, st); newFD != oldFD {
		t.Skipf("the new connection has descriptor %d, not the closed one's %d", newFD, oldFD)
	}
	h.clock.advance(testIdle / 2)
	h.expect(old, Idle)
	write(t, client, frame(t, 1))
	h.expect(st, Ready)
	h.places.Untrack(st)
}

func fd(t *testing.T, c *conns.Conn) int {
	t.Helper()
	raw, err := c.Conn.(syscall.Conn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := raw.Control(func(fd uintptr) { n = int(fd) }); err != nil {
		t.Fatal(err)
	}
	return n
}

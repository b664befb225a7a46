package client

import (
	"testing"
	"time"

	"github.com/fcap-io/fcap/internal/connrec"
	"github.com/fcap-io/fcap/proto"
)

// TestTracedFramesQueuedBehindAWriteAreStamped: a traced request queued
// while another caller held the write (here: during its yield) gets the
// start and end of the write that carried it, the same as that caller's;
// a call that carries another request by the time the write ends (a
// pooled call reused) is not stamped with it.
func TestTracedFramesQueuedBehindAWriteAreStamped(t *testing.T) {
	defer tracing.Store(tracing.Load())
	tracing.Store(true)
	w := &connrec.Conn{}
	c := &conn{p: &peer{addr: "counter", cl: &Client{stop: make(chan struct{})}}, nc: w, kick: make(chan struct{}, 1), pending: map[uint64]*call{}}
	stopped := make(chan struct{})
	go func() { defer close(stopped); c.writeLoop() }()
	defer func() { close(c.p.cl.stop); <-stopped }()

	first, queued, reused := getCall(proto.TypePong), getCall(proto.TypePong), getCall(proto.TypePong)
	deadline := time.Now().Add(time.Hour)
	var reusedTag uint64
	c.yield = func() {
		// While the first caller yields, two others queue their frames
		// behind it; one of their calls is then reused for a new request
		// before the write that carries the old one.
		for _, cl := range []*call{queued, reused} {
			if err := c.send(cl, &proto.Ping{}, deadline); err != nil {
				t.Errorf("queued send: %v", err)
			}
		}
		reusedTag = reused.stamps.start(monoNow())
	}
	if err := c.send(first, &proto.Ping{}, deadline); err != nil {
		t.Fatal(err)
	}
	if n := len(w.Writes()); n != 1 {
		t.Fatalf("%d writes, want the three frames in one", n)
	}
	if !first.traced || !queued.traced {
		t.Fatalf("calls sent while tracing are not traced: %v, %v", first.traced, queued.traced)
	}
	f, q := &first.stamps, &queued.stamps
	if f.writing.Load() == 0 || f.written.Load() < f.writing.Load() || f.writing.Load() < f.queued.Load() {
		t.Errorf("the writer's own stamps: queued %d, writing %d, written %d", f.queued.Load(), f.writing.Load(), f.written.Load())
	}
	if q.writing.Load() != f.writing.Load() || q.written.Load() != f.written.Load() {
		t.Errorf("a frame queued behind the write: writing %d, written %d; the write that carried it: %d, %d",
			q.writing.Load(), q.written.Load(), f.writing.Load(), f.written.Load())
	}
	if q.queued.Load() < f.queued.Load() || q.queued.Load() > q.writing.Load() {
		t.Errorf("queued at %d: not between the first caller's %d and the write's start %d", q.queued.Load(), f.queued.Load(), q.writing.Load())
	}
	if r := &reused.stamps; r.tag.Load() != reusedTag || r.writing.Load() != 0 || r.written.Load() != 0 {
		t.Errorf("a reused call took the stamps of its old request's write: tag %d (want %d), writing %d, written %d",
			r.tag.Load(), reusedTag, r.writing.Load(), r.written.Load())
	}
}

// Without a CallTrace ever given, calls note no times.
func TestUntracedCallsAreNotStamped(t *testing.T) {
	defer tracing.Store(tracing.Load())
	tracing.Store(false)
	w := &connrec.Conn{}
	c := &conn{p: &peer{addr: "counter", cl: &Client{stop: make(chan struct{})}}, nc: w, kick: make(chan struct{}, 1), pending: map[uint64]*call{}}
	cl := getCall(proto.TypePong)
	if err := c.send(cl, &proto.Ping{}, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if cl.traced || cl.stamps.queued.Load() != 0 || cl.stamps.writing.Load() != 0 {
		t.Errorf("an untraced call was stamped: traced %v, queued %d, writing %d", cl.traced, cl.stamps.queued.Load(), cl.stamps.writing.Load())
	}
}

package node

import (
	"bytes"
	"net"
	"sync"
	"time"

	"github.com/fcap-io/fcap/node/metrics"
	"github.com/fcap-io/fcap/proto"
)

// Requests that wait run apart from their connection.
//
// A connection's reader handles its requests in order, but no request
// waits behind another: a write that must wait before it is answered
// (for its log record under a data dir, for its backups under a strict
// cap) does its engine work on the reader, so a request read after it
// sees its effect, and then waits on a goroutine of its own. Identity
// writes and admin requests, which call other nodes or run long, run
// whole on such a goroutine. Answers go out as they complete, so they
// may overtake one another: clients match them by request id. A request
// that waits for nothing (a Check, a soft Allow on a memory-only node)
// is answered on the reader, with no goroutine and no allocation.

// maxPendingPerConn bounds a connection's requests waiting apart; past
// it the reader waits for one to finish before reading more, so a client
// cannot pile up goroutines (each strict write to a dead backup waits up
// to StrictTimeout).
const maxPendingPerConn = 256

// connWriter is a connection's write side, shared by its reader and the
// requests waiting apart.
type connWriter struct {
	n *Node
	c net.Conn

	mu sync.Mutex // serializes writes to c, whole frames at a time

	pending sync.WaitGroup // requests waiting apart
	slots   chan struct{}  // one per pending request
}

func newConnWriter(n *Node, c net.Conn) *connWriter {
	return &connWriter{n: n, c: c, slots: make(chan struct{}, maxPendingPerConn)}
}

// write sends whole frames. A failure closes the connection: its reader
// stops, and answers still pending are dropped (the client times out).
func (w *connWriter) write(b []byte) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.c.SetWriteDeadline(time.Now().Add(w.n.cfg.WriteTimeout))
	if _, err := w.c.Write(b); err != nil {
		w.n.metrics.WriteErrors.Inc()
		w.c.Close()
		return false
	}
	return true
}

// wait returns once every request waiting apart has been answered.
func (w *connWriter) wait() { w.pending.Wait() }

// respond is the part of a request that answers it, appending the
// response to out.
type respond func(out []byte) ([]byte, metrics.Op, metrics.Outcome)

var respBufs = sync.Pool{New: func() any { b := make([]byte, 0, 512); return &b }}

// later runs finish apart from the connection's reader when the handler
// serves a connection, and at once (appending to out) otherwise: the
// handler benchmarks and in-process calls. start is when the request's
// handling began, for its latency.
func (h *handler) later(out []byte, start time.Time, finish respond) ([]byte, metrics.Op, metrics.Outcome) {
	w := h.conn
	if w == nil {
		return finish(out)
	}
	w.slots <- struct{}{}
	w.pending.Add(1)
	go func() {
		defer func() {
			<-w.slots
			w.pending.Done()
		}()
		bp := respBufs.Get().(*[]byte)
		b, op, oc := finish((*bp)[:0])
		h.n.metrics.Observe(op, oc, time.Since(start))
		w.write(b)
		if cap(b) <= 64<<10 {
			*bp = b[:0]
			respBufs.Put(bp)
		}
	}()
	return out, metrics.OpUnknown, metrics.OutcomeApart
}

// apart runs a whole request apart from the connection's reader, on a
// handler of its own with the connection's permissions and a copy of the
// body (the reader reuses its buffer).
func (h *handler) apart(out []byte, start time.Time, hdr proto.Header, body []byte) ([]byte, metrics.Op, metrics.Outcome) {
	sub := &handler{n: h.n, slot: h.slot, perms: h.perms, role: h.role, session: h.session}
	body = bytes.Clone(body)
	return h.later(out, start, func(out []byte) ([]byte, metrics.Op, metrics.Outcome) {
		return sub.dispatch(out, sub.n.view.Load(), hdr, body)
	})
}

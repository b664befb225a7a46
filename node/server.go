package node

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"time"

	"github.com/fcap-io/fcap/proto"
)

// The data plane: length-prefixed msgpack frames over long-lived TCP
// connections. A connection's requests are read in order on its own
// goroutine; those that wait for nothing are answered there, their
// responses appended to one buffer, which is written when no further
// request is already waiting in the read buffer: a pipelining client gets
// many responses per write. Requests that wait (the log, strict
// replication, calls to other nodes) are answered apart, as they
// complete (pending.go).

func (n *Node) acceptLoop() {
	var backoff time.Duration
	for {
		c, err := n.data.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Out of file descriptors and the like: wait, then retry.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			n.log.Warn("accept", "err", err, "retry_in", backoff)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		if !n.track(c) {
			n.metrics.refusedConns.Inc()
			n.goFunc(func() { n.refuse(c) })
			continue
		}
		n.goFunc(func() {
			defer n.untrack(c)
			n.serveConn(c)
		})
	}
}

// track registers a connection unless the node is draining or at
// MaxConns.
func (n *Node) track(c net.Conn) bool {
	n.connMu.Lock()
	defer n.connMu.Unlock()
	if n.draining.Load() || len(n.conns) >= n.cfg.MaxConns {
		return false
	}
	n.conns[c] = struct{}{}
	n.metrics.conns.Inc()
	return true
}

func (n *Node) untrack(c net.Conn) {
	n.connMu.Lock()
	delete(n.conns, c)
	n.connMu.Unlock()
	n.metrics.conns.Dec()
	c.Close()
}

// refuse tells a connection past the limit why it is closed.
func (n *Node) refuse(c net.Conn) {
	defer c.Close()
	c.SetWriteDeadline(time.Now().Add(time.Second))
	msg := &proto.Error{Code: proto.CodeOverloaded, Message: "too many connections", Epoch: n.view.Load().ring.Epoch()}
	if n.draining.Load() {
		msg.Code, msg.Message = proto.CodeShuttingDown, "node is shutting down"
	}
	if b, err := proto.AppendFrame(nil, 0, msg); err == nil {
		c.Write(b)
	}
}

// drainConns makes every connection stop after the requests it has
// already read, and waits for them until ctx is done. The caller has set
// n.draining; a connection re-arming its idle deadline checks draining
// after doing so, and this sets deadlines after draining, so no read
// sleeps through the drain.
func (n *Node) drainConns(ctx context.Context) {
	n.connMu.Lock()
	for c := range n.conns {
		// Wake blocked reads; buffered requests are still answered.
		c.SetReadDeadline(time.Now())
	}
	n.connMu.Unlock()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		n.connMu.Lock()
		left := len(n.conns)
		n.connMu.Unlock()
		if left == 0 {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (n *Node) closeConns() {
	n.connMu.Lock()
	defer n.connMu.Unlock()
	for c := range n.conns {
		c.Close()
	}
}

// serveConn reads and answers requests until the peer closes, a frame is
// malformed beyond recovery, the connection idles out, or the node
// drains.
func (n *Node) serveConn(c net.Conn) {
	if !n.handshake(c) {
		return
	}
	// A connection that sends nothing costs no buffers: they are made
	// when its first byte arrives, so MaxConns idle connections (a flood,
	// or clients' spare pools) hold a goroutine each and little else.
	c.SetReadDeadline(time.Now().Add(n.cfg.IdleTimeout))
	if n.draining.Load() {
		return
	}
	var first [1]byte
	if _, err := io.ReadFull(c, first[:]); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) && !n.draining.Load() {
			n.metrics.idleClosed.Inc()
		}
		return
	}
	r := proto.NewReader(io.MultiReader(bytes.NewReader(first[:]), c), n.cfg.MaxFrame)
	w := newConnWriter(n, c)
	defer w.wait() // answers still pending go out before the connection closes
	h := newHandler(n)
	h.conn = w
	var out []byte
	flush := func() bool {
		if len(out) == 0 {
			return true
		}
		ok := w.write(out)
		out = out[:0]
		return ok
	}
	for {
		if r.Buffered() == 0 {
			if !flush() {
				return
			}
			c.SetReadDeadline(time.Now().Add(n.cfg.IdleTimeout))
			if n.draining.Load() {
				return
			}
		}
		waited := r.Buffered() == 0
		hdr, body, err := r.Next()
		if waited || h.arrived.IsZero() {
			// The frame came off the socket just now; one already
			// buffered came with an earlier read, no later than the
			// stamp of that read.
			h.arrived = time.Now()
		}
		switch {
		case err == nil:
			out = h.handle(out, hdr, body)
			if h.hangup {
				flush()
				return
			}
		case errors.Is(err, proto.ErrUnsupportedVersion):
			out = h.fail(out, hdr, proto.CodeUnsupported, "unsupported protocol version")
		case errors.Is(err, proto.ErrFrameTooLarge), errors.Is(err, proto.ErrFrameTooShort):
			// The stream cannot be trusted past a bad length: say why, close.
			n.metrics.badFrames.Inc()
			n.log.Debug("connection closed: bad frame", "remote", c.RemoteAddr().String(), "err", err)
			out = h.fail(out, proto.Header{}, proto.CodeBadRequest, err.Error())
			flush()
			return
		default:
			if errors.Is(err, os.ErrDeadlineExceeded) && !n.draining.Load() {
				n.metrics.idleClosed.Inc()
			}
			if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrDeadlineExceeded) && !errors.Is(err, net.ErrClosed) {
				n.log.Debug("connection read", "remote", c.RemoteAddr().String(), "err", err)
			}
			flush()
			return
		}
		if len(out) >= 256<<10 && !flush() {
			return
		}
	}
}

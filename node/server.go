package node

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime"
	"time"

	"github.com/fcap-io/fcap/node/conns"
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
	pre := n.startPreauth()
	if pre != nil {
		defer pre.Stop()
	}
	var backoff time.Duration
	for accepted := 0; ; accepted++ {
		if accepted%32 == 31 {
			// A burst of connects (a flood): let the served connections'
			// readers in between, rather than after the scheduler's
			// 10 ms slice. Accept parks when none is waiting.
			runtime.Gosched()
		}
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
		st := n.conns.Track(c)
		if st == nil {
			n.metrics.RefusedConns.Inc()
			n.wg.Go(func() { n.refuse(c) })
			continue
		}
		tokens := n.tokens.Required()
		if pre != nil && pre.Add(st, firstMaxFrame(n.cfg.MaxFrame, tokens), tokens) {
			continue
		}
		n.wg.Go(func() {
			defer n.conns.Untrack(st)
			n.serveConn(st)
		})
	}
}

// Read buffers of a data-plane connection: small until it has
// authenticated, so thousands of connections that never do hold little;
// then the 64 KiB that lets a pipelining client's requests arrive in
// few reads.
const (
	pendingReadBuffer = 1 << 10
	authedReadBuffer  = 64 << 10
)

// keepAlive turns TCP keep-alives on (Go's defaults: probes after 15 s
// idle, every 15 s, 9 of them) for a connection that has authenticated;
// the data listener accepts with them off (Node.listen).
func keepAlive(c net.Conn) {
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetKeepAliveConfig(net.KeepAliveConfig{Enable: true, Idle: 15 * time.Second})
	}
}

// helloMaxFrame bounds the frames of a connection that has not said its
// Hello on a node with tokens: a Hello holds one token.
const helloMaxFrame = 4 << 10

// firstMaxFrame bounds a connection's frames until it has authenticated.
func firstMaxFrame(maxFrame int, tokens bool) int {
	if tokens {
		return min(maxFrame, helloMaxFrame)
	}
	return maxFrame
}

// firstBytes waits for a connection's first bytes: its first frame's
// header without tokens, its first byte with them; the connection's
// place holds them (conns.Conn.ReadFirst) for the frame reader. It
// reports false when the connection is to be closed (it idled out,
// failed, lost its place, or the node drains).
//
// It serves the connections the pre-authentication poller does not
// (poller.go): TLS ones, and all where there is no poller. A connection
// that sends nothing costs no buffers: they are made when its first byte
// arrives, so idle connections (a flood, or clients' spare pools) hold a
// goroutine each and little else. With tokens, the
// Hello is due HandshakeTimeout after the connect. Without, an idle
// connection is idle (IdleTimeout), and the header of its first request
// is due HandshakeTimeout after its first byte; the body, which may be a
// megabyte, is read as any request's.
func (n *Node) firstBytes(st *conns.Conn, tokens bool) bool {
	c := st.Conn
	if tokens {
		c.SetReadDeadline(time.Now().Add(n.cfg.HandshakeTimeout))
	} else {
		c.SetReadDeadline(time.Now().Add(n.cfg.IdleTimeout))
	}
	if n.draining.Load() || n.evicted(st) {
		return false
	}
	first, err := st.ReadFirst(1)
	if err != nil {
		if !n.evicted(st) {
			n.readFailed(c, err, tokens)
		}
		return false
	}
	if tokens {
		return true
	}
	if len(first) < proto.HeaderSize {
		c.SetReadDeadline(time.Now().Add(n.cfg.HandshakeTimeout))
		if n.draining.Load() || n.evicted(st) {
			return false
		}
		// The length first: one the Reader refuses is refused now, not
		// after a header that may never come.
		if first, err = st.ReadFirst(4); err == nil {
			if length := binary.BigEndian.Uint32(first); length >= proto.HeaderSize-4 && uint64(length) <= uint64(n.cfg.MaxFrame) {
				_, err = st.ReadFirst(proto.HeaderSize)
			}
		}
		if err != nil {
			if !n.evicted(st) && errors.Is(err, os.ErrDeadlineExceeded) {
				n.readFailed(c, err, true)
			}
			return false
		}
	}
	c.SetReadDeadline(time.Now().Add(n.cfg.IdleTimeout))
	return !n.draining.Load() && !n.evicted(st)
}

// serveConn serves a connection from its connect: its TLS handshake, its
// first bytes, then its frames.
func (n *Node) serveConn(st *conns.Conn) {
	if !n.handshake(st.Conn) {
		return
	}
	tokens := n.tokens.Required()
	if !n.firstBytes(st, tokens) {
		return
	}
	n.serveFrames(st, tokens)
}

// serveFrames reads and answers requests until the peer closes, a frame
// is malformed beyond recovery, the connection idles out or does not
// authenticate in time, loses its place to a newer one, or the node
// drains. The connection's first bytes may have been read already
// (firstBytes, the pre-authentication poller); its read deadline is set.
func (n *Node) serveFrames(st *conns.Conn, tokens bool) {
	c := st.Conn
	r := proto.NewReaderSize(st, firstMaxFrame(n.cfg.MaxFrame, tokens), pendingReadBuffer)
	// The handler and the write side are made when the first frame has
	// arrived whole: not for a connection that never sends one.
	var w *connWriter
	var h *handler
	defer func() {
		if w != nil {
			w.wait() // answers still pending go out before the connection closes
		}
	}()
	authed := false
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
			// Until it authenticates, the handshake deadline stands.
			if authed {
				c.SetReadDeadline(time.Now().Add(n.cfg.IdleTimeout))
			}
			if n.draining.Load() || n.evicted(st) {
				return
			}
		}
		waited := r.Buffered() == 0
		hdr, body, err := r.Next()
		if h == nil {
			w, h = newConnWriter(n, c), newHandler(n)
			h.conn = w
		}
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
			if !authed && (!tokens || h.role != 0) {
				// Authenticated: a Hello with a token, or, on a node
				// without tokens, a first complete request.
				if !n.conns.Promote(st) {
					// It lost its place meanwhile; its answer may be
					// pending apart, so the notice goes through w too.
					out = h.fail(out, proto.Header{}, proto.CodeOverloaded, evictedMessage)
					flush()
					return
				}
				authed = true
				keepAlive(c)
				r.SetMaxFrame(n.cfg.MaxFrame)
				r.GrowBuffer(authedReadBuffer)
			}
		case errors.Is(err, proto.ErrUnsupportedVersion):
			out = h.fail(out, hdr, proto.CodeUnsupported, "unsupported protocol version")
		case errors.Is(err, proto.ErrFrameTooLarge), errors.Is(err, proto.ErrFrameTooShort):
			// The stream cannot be trusted past a bad length: say why, close.
			n.metrics.BadFrames.Inc()
			n.log.Debug("connection closed: bad frame", "remote", c.RemoteAddr().String(), "err", err)
			msg := err.Error()
			if tokens && !authed && errors.Is(err, proto.ErrFrameTooLarge) {
				msg += ": a connection says Hello before anything larger"
			}
			out = h.fail(out, proto.Header{}, proto.CodeBadRequest, msg)
			flush()
			return
		default:
			flush()
			if !n.evicted(st) {
				// Without tokens, the handshake ended with the header.
				n.readFailed(c, err, tokens && !authed)
			}
			return
		}
		if len(out) >= 256<<10 && !flush() {
			return
		}
	}
}

// readFailed counts and logs why a connection's read ended: a deadline
// (idle, or the handshake's while it had not authenticated), the peer's
// close, or an error.
func (n *Node) readFailed(c net.Conn, err error, handshaking bool) {
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		if n.draining.Load() {
			return
		}
		if handshaking {
			n.metrics.HandshakeClosed.Inc()
		} else {
			n.metrics.IdleClosed.Inc()
		}
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed):
	default:
		// Not for nothing: a flood of connections that close together
		// comes through here, and the address is made into a string.
		if n.log.Enabled(context.Background(), slog.LevelDebug) {
			n.log.Debug("connection read", "remote", c.RemoteAddr().String(), "err", err)
		}
	}
}

// Package preauth watches data-plane connections that have not yet sent
// their first frame whole, all of them on one goroutine.
//
// A connection costs its goroutine from its first complete frame on, not
// before: thousands that connect and send little or nothing (a flood, a
// scan, clients' spare connections) hold a few hundred bytes each and
// share one goroutine, and when they open or close together they wake
// that goroutine, one P, not a goroutine each for every P to work through
// while answered clients' requests wait in the same run queues.
//
// A Poller reads each connection as its bytes arrive into a buffer that
// grows only with what arrived, up to its first frame's end (and what
// came with it, up to 1 KiB), and lets it
// go (Config.Done) when the frame is whole, when the frame's length is
// one the frame reader refuses (the reader then says why), or when the
// connection closes, fails, is late, loses its place to a newer one
// (conns), or the poller stops. The deadlines are the node's before a
// first frame: with tokens, the frame (the Hello) is due HandshakeTimeout
// after the connect; without, a connection that sends nothing is idle
// (IdleTimeout), the header of its first frame is due HandshakeTimeout
// after its first byte, and the body IdleTimeout after the header.
//
// The Poller is Linux's (epoll); New reports errors.ErrUnsupported
// elsewhere, and a caller serves connections as before, a goroutine each.
package preauth

import (
	"encoding/binary"
	"syscall"
	"time"

	"github.com/fcap-io/fcap/node/conns"
	"github.com/fcap-io/fcap/proto"
)

// Result says why the poller let a connection go.
type Result int

const (
	// Ready: its first frame arrived whole, or a length the frame reader
	// refuses. Serve it: its Read gives back the bytes the poller read
	// (conns.Conn.Give), its read deadline is the one due.
	Ready     Result = iota
	Closed           // the peer closed it, or a read failed
	Idle             // nothing, or not the body, within IdleTimeout (no tokens)
	Handshake        // the Hello, or the first frame's header, not within HandshakeTimeout
	Evicted          // it lost its place to a newer connection
	Stopped          // the poller stopped
)

// Config configures a Poller.
type Config struct {
	// IdleTimeout and HandshakeTimeout are the node's (node.Config).
	IdleTimeout, HandshakeTimeout time.Duration
	// Done is called on the poller's goroutine for each connection it
	// lets go, after it stopped watching it. But for Ready, Done closes
	// the connection (conns.Places.Untrack), which takes it out of the
	// poller's epoll set; Done must not block.
	Done func(c *conns.Conn, r Result)
	// Now is the clock; nil: time.Now.
	Now func() time.Time
}

// sweepEvery is how often the poller looks for connections that are late
// or lost their place: how late it may close them.
const sweepEvery = 50 * time.Millisecond

// pending is a connection the poller watches; but for its creation, the
// poller's goroutine alone touches it.
type pending struct {
	c        *conns.Conn
	raw      syscall.RawConn
	maxFrame int  // its first frame's length limit
	tokens   bool // the node requires tokens: the first frame is the Hello
	buf      []byte
	deadline time.Time
	late     Result // what passing the deadline means: Idle or Handshake
}

func newPending(c *conns.Conn, raw syscall.RawConn, maxFrame int, tokens bool, cfg *Config, now time.Time) *pending {
	w := &pending{c: c, raw: raw, maxFrame: maxFrame, tokens: tokens}
	if tokens {
		w.deadline, w.late = now.Add(cfg.HandshakeTimeout), Handshake
	} else {
		w.deadline, w.late = now.Add(cfg.IdleTimeout), Idle
	}
	return w
}

// frameEnd returns the length of the first frame, its length prefix
// included, once the prefix has arrived; when the frame reader refuses
// the length, what has arrived: the reader is to say why now.
func (w *pending) frameEnd() (int, bool) {
	if len(w.buf) < 4 {
		return 0, false
	}
	n := binary.BigEndian.Uint32(w.buf)
	if n < proto.HeaderSize-4 || uint64(n) > uint64(w.maxFrame) {
		return len(w.buf), true
	}
	return 4 + int(n), true
}

// readAhead is how much a connection may have sent beyond its first
// frame that a read takes with it (the node's read buffer before
// authentication): a client that pipelines its first requests has them
// answered together, as when its goroutine read them.
const readAhead = 1 << 10

// room is how many bytes the next read may take: up to the first frame's
// end, or readAhead if more, so the buffer holds no more than what
// arrived, up to that.
func (w *pending) room() int {
	end, _ := w.frameEnd()
	return max(end, readAhead) - len(w.buf)
}

// arrived takes bytes read, moves the deadline as the first frame
// advances and reports whether the connection is ready to be served.
func (w *pending) arrived(b []byte, cfg *Config, now time.Time) bool {
	had := len(w.buf)
	w.buf = append(w.buf, b...)
	if !w.tokens {
		switch {
		case had < proto.HeaderSize && len(w.buf) >= proto.HeaderSize:
			w.deadline, w.late = now.Add(cfg.IdleTimeout), Idle
		case had == 0:
			w.deadline, w.late = now.Add(cfg.HandshakeTimeout), Handshake
		}
	}
	end, known := w.frameEnd()
	return known && len(w.buf) >= end
}

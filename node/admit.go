package node

import (
	"net"
	"time"

	"github.com/fcap-io/fcap/node/conns"
	"github.com/fcap-io/fcap/node/security"
	"github.com/fcap-io/fcap/proto"
)

// The places of data-plane connections are node/conns's; what a
// connection is told when it has none is the node's.

// evictedMessage tells a connection why it lost its place.
const evictedMessage = "too many connections waiting to authenticate: closed for a newer one"

// evicted reports whether the connection lost its place to a newer one,
// after telling it so. A reader checks it after setting a read deadline,
// which could otherwise push back the one that woke it.
func (n *Node) evicted(st *conns.Conn) bool {
	if !st.Lost() {
		return false
	}
	n.say(st, proto.CodeOverloaded, evictedMessage)
	return true
}

// refuse tells a connection past the limit why it is closed.
func (n *Node) refuse(c net.Conn) {
	defer c.Close()
	if n.draining.Load() {
		n.say(c, proto.CodeShuttingDown, "node is shutting down")
		return
	}
	n.say(c, proto.CodeOverloaded, "too many connections")
}

// say writes one Error frame, giving up after a second.
func (n *Node) say(c net.Conn, code proto.Code, msg string) {
	c.SetWriteDeadline(time.Now().Add(time.Second))
	e := &proto.Error{Code: code, Message: msg, Epoch: n.view.Load().ring.Epoch()}
	if b, err := proto.AppendFrame(nil, 0, e); err == nil {
		c.Write(b)
	}
}

// handshake completes a data-plane connection's TLS handshake, if it is
// one (security.Handshake), and reports whether it may be served.
func (n *Node) handshake(c net.Conn) bool {
	err := security.Handshake(c, n.cfg.WriteTimeout, func() uint64 { return n.view.Load().ring.Epoch() })
	if err != nil {
		n.metrics.TLSFailures.Inc()
		n.log.Debug("tls handshake", "remote", c.RemoteAddr().String(), "err", err)
	}
	return err == nil
}

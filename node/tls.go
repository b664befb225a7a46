package node

import (
	"crypto/tls"
	"errors"
	"net"
	"time"

	"github.com/fcap-io/fcap/proto"
)

// handshake completes the TLS handshake of a data-plane connection, if
// it is one, before any request is read. A client that sent plaintext
// (the first bytes are no TLS record) is told why in a plaintext Error
// frame, which fcap clients read as ErrUnsupported; a failed handshake
// (no or a bad client certificate) has already been told by a TLS
// alert. It reports whether the connection may be served.
func (n *Node) handshake(c net.Conn) bool {
	tc, ok := c.(*tls.Conn)
	if !ok {
		return true
	}
	tc.SetDeadline(time.Now().Add(n.cfg.WriteTimeout))
	err := tc.Handshake()
	if err == nil {
		tc.SetDeadline(time.Time{})
		return true
	}
	n.metrics.TLSFailures.Inc()
	n.log.Debug("tls handshake", "remote", c.RemoteAddr().String(), "err", err)
	var rh tls.RecordHeaderError
	if errors.As(err, &rh) && rh.Conn != nil {
		msg := &proto.Error{Code: proto.CodeUnsupported, Message: "this node serves TLS only: connect with TLS", Epoch: n.view.Load().ring.Epoch()}
		if b, err := proto.AppendFrame(nil, 0, msg); err == nil {
			rh.Conn.SetWriteDeadline(time.Now().Add(time.Second))
			rh.Conn.Write(b)
		}
	}
	return false
}

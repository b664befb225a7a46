package node

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/fcap-io/fcap/proto"
)

// dialPeer connects to another node's data plane: over TLS with PeerTLS
// when it is set (the handshake is done when it returns), plain TCP
// otherwise, and authenticates with PeerToken when the node has tokens.
// The connect takes at most a second, the handshake what is left of ctx.
func (n *Node) dialPeer(ctx context.Context, addr string) (net.Conn, error) {
	d := &net.Dialer{Timeout: time.Second}
	var c net.Conn
	var err error
	if n.cfg.PeerTLS == nil {
		c, err = d.DialContext(ctx, "tcp", addr)
	} else {
		td := tls.Dialer{NetDialer: d, Config: n.cfg.PeerTLS}
		c, err = td.DialContext(ctx, "tcp", addr)
	}
	if err != nil || len(n.cfg.Tokens) == 0 {
		return c, err
	}
	// Peers share the tokens: present ours before any request.
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := proto.SayHello(c, n.cfg.PeerToken); err != nil {
		c.Close()
		return nil, fmt.Errorf("hello to %s: %w", addr, err)
	}
	c.SetDeadline(time.Time{})
	return c, nil
}

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
	n.metrics.tlsFailures.Inc()
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

package security

import (
	"crypto/tls"
	"errors"
	"net"
	"time"

	"github.com/fcap-io/fcap/proto"
)

// Handshake completes the TLS handshake of a data-plane connection, if it
// is one, before any request is read, within timeout; nil for a plain
// connection or a completed handshake. A client that sent plaintext (the
// first bytes are no TLS record) is told why in a plaintext Error frame
// carrying epoch(), which fcap clients read as ErrUnsupported; a failed
// handshake (no or a bad client certificate) has already been told by a
// TLS alert.
func Handshake(c net.Conn, timeout time.Duration, epoch func() uint64) error {
	tc, ok := c.(*tls.Conn)
	if !ok {
		return nil
	}
	tc.SetDeadline(time.Now().Add(timeout))
	err := tc.Handshake()
	if err == nil {
		tc.SetDeadline(time.Time{})
		return nil
	}
	var rh tls.RecordHeaderError
	if errors.As(err, &rh) && rh.Conn != nil {
		msg := &proto.Error{Code: proto.CodeUnsupported, Message: "this node serves TLS only: connect with TLS", Epoch: epoch()}
		if b, err := proto.AppendFrame(nil, 0, msg); err == nil {
			rh.Conn.SetWriteDeadline(time.Now().Add(time.Second))
			rh.Conn.Write(b)
		}
	}
	return err
}

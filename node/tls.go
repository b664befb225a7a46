package node

import (
	"net"

	"github.com/fcap-io/fcap/node/security"
)

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

package gossip

import (
	"fmt"
	"net"
	"time"

	"github.com/hashicorp/memberlist"
)

// FaultTransport is a FAULT-INJECTION HOOK for chaos tests, never for
// production: it wraps a memberlist Transport and silently cuts gossip to
// every peer Cut names, to split a cluster in two and heal it. Packets to
// a cut peer are dropped as if lost on the wire; streams to it fail to
// dial. Incoming traffic passes: a test cuts a link from both ends.
//
// fcapd installs it only when FCAP_FAULT_GOSSIP_BLOCKLIST is set (see
// cmd/fcapd/fault.go); it is off by default.
type FaultTransport struct {
	memberlist.Transport
	// Cut reports whether gossip to addr ("host:port") is cut now. It is
	// called on every packet and dial, from memberlist's goroutines.
	Cut func(addr string) bool
}

// WriteTo drops the packet when the link is cut.
func (t *FaultTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	if t.Cut(addr) {
		return time.Now(), nil
	}
	return t.Transport.WriteTo(b, addr)
}

// DialTimeout fails when the link is cut.
func (t *FaultTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	if t.Cut(addr) {
		return nil, fmt.Errorf("fault injection: gossip link to %s is cut", addr)
	}
	return t.Transport.DialTimeout(addr, timeout)
}

package node_test

import (
	"encoding/binary"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/fcap-io/fcap/node"
	"github.com/fcap-io/fcap/node/security"
	"github.com/fcap-io/fcap/proto"
)

const (
	connsToken = "adserver-token-0001"
	connsPeer  = "peer-token-00000001"
)

// withTokens makes a node require tokens.
func withTokens(c *node.Config) {
	c.Security.Tokens = map[string]security.Role{connsToken: security.RoleAdServer, connsPeer: security.RolePeer}
	c.Security.PeerToken = connsPeer
}

// wireConn is a data-plane connection driven frame by frame.
type wireConn struct {
	t *testing.T
	net.Conn
	r *proto.Reader
}

func dialWire(t *testing.T, addr string) *wireConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &wireConn{t: t, Conn: c, r: proto.NewReader(c, 0)}
}

func (c *wireConn) send(m proto.Message) {
	c.t.Helper()
	b, err := proto.AppendFrame(nil, 1, m)
	if err != nil {
		c.t.Fatal(err)
	}
	c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(b); err != nil {
		c.t.Fatal(err)
	}
}

// next reads a frame, waiting up to 10 s.
func (c *wireConn) next() (proto.Header, []byte, error) {
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	return c.r.Next()
}

// authenticate says Hello on a node with tokens, or pings one without:
// either makes the connection authenticated.
func (c *wireConn) authenticate(tokens bool) {
	c.t.Helper()
	want := proto.TypePong
	if tokens {
		c.send(&proto.Hello{Token: connsToken})
		want = proto.TypeHelloResult
	} else {
		c.send(&proto.Ping{})
	}
	h, body, err := c.next()
	if err == nil && h.Type == proto.TypeError {
		var e proto.Error
		proto.Decode(body, &e)
		err = &e
	}
	if err != nil || h.Type != want {
		c.t.Fatalf("authenticate: %v frame, %v", h.Type, err)
	}
}

// ping fails the test unless a Ping is answered.
func (c *wireConn) ping() {
	c.t.Helper()
	c.send(&proto.Ping{})
	if h, _, err := c.next(); err != nil || h.Type != proto.TypePong {
		c.t.Fatalf("ping: %v frame, %v", h.Type, err)
	}
}

// closedWith reads until the node closes the connection and returns the
// error frames it sent before.
func (c *wireConn) closedWith() []*proto.Error {
	c.t.Helper()
	var errs []*proto.Error
	for {
		h, body, err := c.next()
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				c.t.Fatal("the connection is still open after 10 s")
			}
			return errs
		}
		var e proto.Error
		if h.Type != proto.TypeError || proto.Decode(body, &e) != nil {
			c.t.Fatalf("want an error before the close, got a %v frame", h.Type)
		}
		errs = append(errs, &e)
	}
}

// TestIdleConnectionsMakeRoom: connections that never authenticate
// cannot lock a new client out. With every place of MaxConns taken by
// idle connections, a new one takes the oldest idle one's place (which is
// told it is overloaded); authenticated connections are never displaced.
func TestIdleConnectionsMakeRoom(t *testing.T) {
	for _, tokens := range []bool{false, true} {
		t.Run(map[bool]string{false: "no-tokens", true: "tokens"}[tokens], func(t *testing.T) {
			nodes := settledCluster(t, "node", 1, func(c *node.Config) {
				c.MaxConns, c.MaxPendingConns = 8, 4
				c.HTTPAPI = false
				c.HandshakeTimeout = time.Minute
				if tokens {
					withTokens(c)
				}
			})
			addr := nodes[0].DataAddr()
			var authed []*wireConn
			for range 3 {
				c := dialWire(t, addr)
				c.authenticate(tokens)
				authed = append(authed, c)
			}
			var idle []*wireConn
			for range 20 {
				idle = append(idle, dialWire(t, addr))
			}
			// The new client: its connection arrives after every idle one.
			fresh := dialWire(t, addr)
			fresh.authenticate(tokens)
			fresh.ping()
			for _, c := range authed {
				c.ping()
			}
			// All but the newest MaxPendingConns-1 idle connections were
			// told why and closed.
			for i, c := range idle[:len(idle)-3] {
				errs := c.closedWith()
				if len(errs) != 1 || !errors.Is(errs[0], proto.ErrOverloaded) {
					t.Fatalf("idle connection %d closed with %v, want one overloaded error", i, errs)
				}
			}
			// The places are full of authenticated connections: the next
			// connection waits its turn as the newest pending one, and an
			// authenticated one is never displaced.
			for range 4 {
				c := dialWire(t, addr)
				c.authenticate(tokens)
				authed = append(authed, c)
			}
			refused := dialWire(t, addr)
			if errs := refused.closedWith(); len(errs) != 1 || !errors.Is(errs[0], proto.ErrOverloaded) {
				t.Fatalf("a connection past MaxConns of authenticated ones: %v, want one overloaded error", errs)
			}
			for _, c := range append(authed, fresh) {
				c.ping()
			}
		})
	}
}

// TestHandshakeTimeout: a connection that does not authenticate within
// HandshakeTimeout is closed. With tokens the clock starts at the
// connect; without, at the first byte, so an idle spare connection stays
// (IdleTimeout) and a first request whose header stops half-way does not.
func TestHandshakeTimeout(t *testing.T) {
	t.Run("tokens", func(t *testing.T) {
		nodes := settledCluster(t, "node", 1, withTokens, func(c *node.Config) { c.HandshakeTimeout = 100 * time.Millisecond })
		addr := nodes[0].DataAddr()
		authed := dialWire(t, addr)
		authed.authenticate(true)
		silent := dialWire(t, addr)
		if errs := silent.closedWith(); len(errs) != 0 {
			t.Fatalf("a connection without Hello was told %v", errs)
		}
		// Not before Hello: requests are refused, and the deadline stands.
		denied := dialWire(t, addr)
		denied.send(&proto.Ping{})
		if errs := denied.closedWith(); len(errs) != 1 || !errors.Is(errs[0], proto.ErrUnauthenticated) {
			t.Fatalf("a ping before Hello, then nothing: %v, want one unauthenticated error and the close", errs)
		}
		// The authenticated connection, older than both, is still served.
		authed.ping()
	})
	t.Run("no-tokens", func(t *testing.T) {
		nodes := settledCluster(t, "node", 1, func(c *node.Config) { c.HandshakeTimeout = 100 * time.Millisecond })
		addr := nodes[0].DataAddr()
		spare := dialWire(t, addr)
		half := dialWire(t, addr)
		b, _ := proto.AppendFrame(nil, 1, &proto.Ping{})
		half.Write(b[:5])
		if errs := half.closedWith(); len(errs) != 0 {
			t.Fatalf("a half-sent first request was told %v", errs)
		}
		// The spare connection, older, sent nothing: it is idle, not late.
		spare.ping()
	})
}

// TestFrameBeforeHello: on a node with tokens, a connection says Hello
// before it may send a frame over 4 KiB; the announced megabyte is
// refused before anything is read or allocated for it. After Hello,
// MaxFrame applies.
func TestFrameBeforeHello(t *testing.T) {
	nodes := settledCluster(t, "node", 1, withTokens)
	addr := nodes[0].DataAddr()
	c := dialWire(t, addr)
	c.Write(binary.BigEndian.AppendUint32(nil, 1<<20))
	if errs := c.closedWith(); len(errs) != 1 || !errors.Is(errs[0], proto.ErrBadRequest) {
		t.Fatalf("a 1 MiB frame before Hello: %v, want one bad-request error and the close", errs)
	}
	c = dialWire(t, addr)
	c.authenticate(true)
	c.send(&proto.Ping{})
	big := make([]byte, 0, 100<<10)
	big = binary.BigEndian.AppendUint32(big, uint32(100<<10-4))
	big = append(big, proto.Version, byte(proto.TypePing), 0, 0, 0, 0, 0, 0, 0, 0, 0, 2)
	big = append(big, make([]byte, 100<<10-proto.HeaderSize)...)
	c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(big); err != nil {
		t.Fatal(err)
	}
	if h, _, err := c.next(); err != nil || h.Type != proto.TypePong {
		t.Fatalf("ping: %v %v", h.Type, err)
	}
	if h, _, err := c.next(); err != nil || h.Type != proto.TypePong || h.ID != 2 {
		t.Fatalf("a 100 KiB ping after Hello: %v frame for %d, %v", h.Type, h.ID, err)
	}
}

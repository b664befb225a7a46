package node_test

import (
	"net"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/fcap-io/fcap/node"
)

// TestKeepAliveOnceAuthenticated: the node turns TCP keep-alives on for a
// data-plane connection when it authenticates, not at its accept, so a
// flood of connections that never do costs it four fewer system calls
// each; an authenticated connection still has them (a client that
// vanishes without a FIN is found out).
func TestKeepAliveOnceAuthenticated(t *testing.T) {
	for _, tokens := range []bool{false, true} {
		t.Run(map[bool]string{false: "no-tokens", true: "tokens"}[tokens], func(t *testing.T) {
			nodes := settledCluster(t, "node", 1, func(c *node.Config) {
				c.HTTPAPI = false
				c.HandshakeTimeout = time.Minute
				if tokens {
					withTokens(c)
				}
			})
			c := dialWire(t, nodes[0].DataAddr())
			fd := acceptedSide(t, c.Conn)
			if keepAliveOn(t, fd) {
				t.Error("keep-alives are on before the connection authenticated")
			}
			// The node sets them before it writes the answer.
			c.authenticate(tokens)
			if !keepAliveOn(t, fd) {
				t.Error("keep-alives are off on an authenticated connection")
			}
		})
	}
}

// acceptedSide finds, among this process's descriptors, the node's side
// of c (the node runs in this process), waiting up to 10 s for the accept.
func acceptedSide(t *testing.T, c net.Conn) int {
	t.Helper()
	local, remote := c.LocalAddr().(*net.TCPAddr), c.RemoteAddr().(*net.TCPAddr)
	port := func(sa syscall.Sockaddr) int {
		if in, ok := sa.(*syscall.SockaddrInet4); ok {
			return in.Port
		}
		if in, ok := sa.(*syscall.SockaddrInet6); ok {
			return in.Port
		}
		return -1
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		entries, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			fd, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			sa, err1 := syscall.Getsockname(fd)
			pa, err2 := syscall.Getpeername(fd)
			if err1 == nil && err2 == nil && port(sa) == remote.Port && port(pa) == local.Port {
				return fd
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("the node did not accept the connection in 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func keepAliveOn(t *testing.T, fd int) bool {
	t.Helper()
	v, err := syscall.GetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_KEEPALIVE)
	if err != nil {
		t.Fatal(err)
	}
	return v != 0
}

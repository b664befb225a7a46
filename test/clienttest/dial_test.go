package clienttest

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
)

// TestDialHookCarriesEveryConnection: with Config.Dial set, the client
// opens its connections through it, with the address the topology names
// (tests route through fault-injecting proxies this way).
func TestDialHookCarriesEveryConnection(t *testing.T) {
	nd := soloNode(t, "dialed")
	var dials atomic.Int64
	var wrongAddr atomic.Value
	c := newClient(t, func(c *client.Config) {
		c.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			dials.Add(1)
			if addr != nd.DataAddr() {
				wrongAddr.Store(addr)
			}
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		}
	}, nd.DataAddr())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	// A lone node turns active a moment after it listens: poll.
	for {
		v, err := c.Allow(ctx, "dial-viewer", []fcap.Cap{soft}, client.At(10))
		if err != nil {
			t.Fatal(err)
		}
		if !v.Failed() {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the node never answered through the hook")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if dials.Load() == 0 {
		t.Fatal("Config.Dial was never called")
	}
	if a := wrongAddr.Load(); a != nil {
		t.Fatalf("Config.Dial got %v, want the node's address %s", a, nd.DataAddr())
	}
}

package e2e

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/test/cluster"
)

// blackHole accepts TCP connections and never answers on them: a node
// stuck hard, or a middlebox that swallows its traffic. It returns the
// address; everything is closed when the test ends.
func blackHole(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held open, never read
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	return ln.Addr().String()
}

// refused returns an address nothing listens on: connections to it are
// refused, as to a node killed and not restarted.
func refused(t *testing.T) string {
	return fmt.Sprintf("127.0.0.1:%d", cluster.FreePort(t))
}

// TestDeadSeedsFirst starts a client whose first seeds are a black hole
// and a refused address, the live nodes last. It must learn the topology
// from a live one and be ready within a few seconds, every time, rather
// than wait on the dead seeds for each refresh's whole budget.
func TestDeadSeedsFirst(t *testing.T) {
	nodes := cluster.StartCluster(t, 3, cluster.Options{Replicas: 2})
	for _, order := range [][]string{
		{blackHole(t), refused(t)},
		{refused(t), blackHole(t)},
	} {
		cfg := client.DefaultConfig(append(order, seeds(nodes...)...)...)
		cfg.Timeout = 2 * time.Second
		c, err := client.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		// Readiness, not speed: a few seconds is many times what a live
		// seed takes to answer, and less than the dead ones would hold
		// each refresh if they were waited on in turn.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = c.WaitReady(ctx)
		cancel()
		if err != nil {
			t.Errorf("seeds %v first: %v", order, err)
		} else if got := len(c.Ring().Members()); got != 3 {
			t.Errorf("seeds %v first: the client sees %d members, want 3", order, got)
		}
		c.Close(context.Background())
	}
}

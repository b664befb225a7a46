package client_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/proto"
	"github.com/fcap-io/fcap/ring"
)

// listenAndDo accepts connections on a loopback port and runs serve on
// each, until the test ends.
func listenAndDo(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn // guarded by mu
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() {
				defer c.Close()
				serve(c)
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// quietServer is an httptest server, TLS or not, that logs nothing.
func quietServer(t *testing.T, useTLS bool) *httptest.Server {
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	if useTLS {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv
}

// TestWaitReadyNamesWhatAnswered: a client whose seed is not an fcap
// node's data-plane address gets from WaitReady, within 2 s (the
// context's deadline), an error wrapping ErrUnavailable that names the
// seed and what answered there. What waiting cannot change (another
// protocol) is returned before the context ends; nothing at all (a
// closed port: a typo, or a node not up yet) is waited for until it
// does. The client runs with its default DialTimeout, as a program's
// would.
func TestWaitReadyNamesWhatAnswered(t *testing.T) {
	httpSrv := quietServer(t, false)
	tlsSrv := quietServer(t, true)
	garbage := listenAndDo(t, func(c net.Conn) { c.Write([]byte("-ERR unknown command\r\n")) })
	silent := listenAndDo(t, func(c net.Conn) { io.Copy(io.Discard, c) })
	pool := x509.NewCertPool()
	pool.AddCert(tlsSrv.Certificate())
	for _, tc := range []struct {
		name    string
		seed    string
		tls     *tls.Config
		found   client.Found
		says    string
		settled bool // returned before the context's deadline
	}{
		{"closed port", deadCluster(t), nil, client.FoundNothing, "nothing answered: dial tcp", false},
		{"HTTP server", httpSrv.Listener.Addr().String(), nil, client.FoundHTTP,
			`an HTTP server answered: "HTTP/1.1 400 Bad Request": not an fcap node: a node's HTTP address (fcapd --http)?`, true},
		{"TLS server", tlsSrv.Listener.Addr().String(), nil, client.FoundTLS, "a TLS server answered", true},
		{"another protocol", garbage, nil, client.FoundOther, `another protocol answered: first bytes "-ERR unknown command\r\n`, true},
		{"silent server", silent, nil, client.FoundNothing, "nothing answered: the connection opened, and nothing answered the hello within DialTimeout", false},
		{"TLS client, HTTP server", httpSrv.Listener.Addr().String(), &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, client.FoundHTTP,
			`an HTTP server answered: tls: first record does not look like a TLS handshake ("HTTP/")`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := client.New(client.Config{Seeds: []string{tc.seed}, TLS: tc.tls, Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close(context.Background())
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			err = c.WaitReady(ctx)
			var de *client.DialError
			if !errors.Is(err, client.ErrUnavailable) || !errors.As(err, &de) {
				t.Fatalf("WaitReady = %v, want ErrUnavailable with a DialError", err)
			}
			if de.Addr != tc.seed || de.Found != tc.found || !strings.Contains(err.Error(), "seed "+tc.seed+": "+tc.says) {
				t.Errorf("WaitReady = %v (found %v), want seed %s named, %v found, and %q", err, de.Found, tc.seed, tc.found, tc.says)
			}
			if ended := errors.Is(err, context.DeadlineExceeded); ended == tc.settled {
				t.Errorf("WaitReady = %v: returned at the context's deadline %v, want %v", err, ended, !tc.settled)
			}
		})
	}

	// A client of all four names each.
	seeds := []string{deadCluster(t), httpSrv.Listener.Addr().String(), tlsSrv.Listener.Addr().String(), garbage}
	c, err := client.New(client.Config{Seeds: seeds, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err = c.WaitReady(ctx)
	for i, says := range []string{"nothing answered", "an HTTP server answered", "a TLS server answered", "another protocol answered"} {
		if !strings.Contains(err.Error(), "seed "+seeds[i]+": "+says) {
			t.Errorf("WaitReady = %v, want seed %s: %s", err, seeds[i], says)
		}
	}
}

// TestHandshakeIsAnFcapAnswer: a connection counts as up only once an
// fcap node has answered its Hello: a server that accepts and reads but
// answers in another protocol leaves the client unready, and nothing is
// sent on such a connection but the Hello.
func TestHandshakeIsAnFcapAnswer(t *testing.T) {
	var mu sync.Mutex
	var got []proto.Type // guarded by mu
	addr := listenAndDo(t, func(c net.Conn) {
		r := proto.NewReader(c, 0)
		for {
			hdr, _, err := r.Next()
			if err != nil {
				return
			}
			mu.Lock()
			got = append(got, hdr.Type)
			mu.Unlock()
			c.Write([]byte("HTTP/1.0 200 OK\r\n\r\n"))
		}
	})
	c := newClient(t, func(cfg *client.Config) { cfg.DialTimeout = time.Second }, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var de *client.DialError
	if err := c.WaitReady(ctx); !errors.As(err, &de) || de.Found != client.FoundHTTP {
		t.Fatalf("WaitReady = %v, want a DialError finding an HTTP server", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, typ := range got {
		if typ != proto.TypeHello {
			t.Errorf("the client sent %v on a connection no fcap node answered", typ)
		}
	}
	if len(got) == 0 {
		t.Error("the client sent no Hello")
	}
}

// TestWaitReadyWaitsForEveryConnection: WaitReady returns only once a
// member owns partitions (a node still joining owns none: its viewers
// would fail open) and every connection to each member that does is up,
// so the first call after it finds the client as it will be (it returned
// as soon as one connection was up, or at once for a topology with no
// owner).
func TestWaitReadyWaitsForEveryConnection(t *testing.T) {
	var active atomic.Bool
	f := startFake(t, func(hdr proto.Header, _ []byte) proto.Message {
		if hdr.Type != proto.TypeAllow {
			return nil
		}
		return &proto.AllowResult{Epoch: 2, Verdict: fcap.Verdict{Allowed: true, Remaining: 9, Blocking: -1}}
	})
	f.mu.Lock()
	f.topo = func() *proto.Topology {
		if !active.Load() {
			owners := make([]uint16, 7)
			for i := range owners {
				owners[i] = ring.NoOwner
			}
			return &proto.Topology{Epoch: 1, Partitions: 7, Replicas: 1, Owners: owners,
				Members: []proto.Member{{Name: "n", Addr: f.addr(), State: uint8(ring.Joining), Incarnation: 1}}}
		}
		return &proto.Topology{Epoch: 2, Partitions: 7, Replicas: 1, Owners: make([]uint16, 7),
			Members: []proto.Member{{Name: "n", Addr: f.addr(), State: uint8(ring.Active), Incarnation: 1}}}
	}
	f.mu.Unlock()
	var dials atomic.Int32
	release := make(chan struct{})
	c := newClient(t, func(c *client.Config) {
		c.RefreshInterval = time.Hour
		c.ConnsPerNode = 3
		c.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
			if dials.Add(1) > 1 { // the first connection opens; the others wait for the test
				select {
				case <-release:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		}
	}, f.addr())
	short := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), 300*time.Millisecond)
	}
	ctx, cancel := short()
	defer cancel()
	if err := c.WaitReady(ctx); !errors.Is(err, client.ErrUnavailable) || !strings.Contains(err.Error(), "none that owns partitions") {
		t.Fatalf("WaitReady with the only member joining = %v, want ErrUnavailable saying no member owns partitions", err)
	}
	active.Store(true) // WaitReady asks for the topology again: no wait for RefreshInterval
	ctx, cancel = short()
	defer cancel()
	if err := c.WaitReady(ctx); !errors.Is(err, client.ErrUnavailable) || !strings.Contains(err.Error(), "member n "+f.addr()+": connecting") {
		t.Fatalf("WaitReady with one connection of three up = %v, want ErrUnavailable naming member n connecting", err)
	}
	close(release)
	ctx, cancel = context.WithTimeout(context.Background(), generous)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		t.Fatalf("WaitReady with every connection free to open: %v", err)
	}
	if n := dials.Load(); n < 3 {
		t.Errorf("WaitReady returned after %d dials, want all 3 connections", n)
	}
	if v, err := c.Allow(context.Background(), "v", []fcap.Cap{soft}); err != nil || v.Failed() || v.Remaining != 9 {
		t.Errorf("the first Allow after WaitReady = %+v, %v; want the node's answer", v, err)
	}
}

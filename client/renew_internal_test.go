package client

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/fcap-io/fcap/proto"
	"github.com/fcap-io/fcap/ring"
)

// helloNode accepts connections and answers Hello and TopologyRequest
// (with topo), nothing else.
func helloNode(t *testing.T, topo func() *proto.Topology) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
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
				r := proto.NewReader(c, 0)
				for {
					hdr, _, err := r.Next()
					if err != nil {
						return
					}
					var resp proto.Message
					switch hdr.Type {
					case proto.TypeHello:
						resp = &proto.HelloResult{}
					case proto.TypeTopologyRequest:
						resp = topo()
					default:
						continue
					}
					b, err := proto.AppendFrame(nil, hdr.ID, resp)
					if err != nil {
						panic(err)
					}
					c.Write(b)
				}
			})
		}
	})
	return ln.Addr().String()
}

// A member back in the topology after it was out of it (a heal) gets
// fresh connections: one kept to it as a seed may have sent into a silent
// cut and sit in TCP's retransmission back-off for seconds, and the
// partition suite's minority timed out its first calls on one 2.2 s
// after the heal.
// backBed is a client of two fake nodes a and b, with rings built of
// them (build), b's peer (peerB) and a live connection to b (liveConn).
type backBed struct {
	c        *Client
	build    func(names ...string) *ring.Ring
	peerB    func() *peer
	liveConn func() *conn
}

func newBackBed(t *testing.T) backBed {
	t.Helper()

	var addrs [2]string
	var mu sync.Mutex
	topo := func() *proto.Topology {
		mu.Lock()
		defer mu.Unlock()
		return &proto.Topology{Epoch: 42, Partitions: 7, Replicas: 1, Owners: make([]uint16, 7),
			Members: []proto.Member{{Name: "a", Addr: addrs[0], State: 2, Incarnation: 1}, {Name: "b", Addr: addrs[1], State: 2, Incarnation: 1}}}
	}
	mu.Lock()
	addrs[0], addrs[1] = helloNode(t, topo), helloNode(t, topo)
	mu.Unlock()
	cfg := DefaultConfig(addrs[0], addrs[1])
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c.Close(ctx)
	})
	build := func(names ...string) *ring.Ring {
		var ms []ring.Member
		for _, n := range names {
			a := addrs[0]
			if n == "b" {
				a = addrs[1]
			}
			ms = append(ms, ring.Member{Name: n, Addr: a, State: ring.Active, Incarnation: 1})
		}
		cfg := ring.DefaultConfig()
		cfg.Partitions = 7
		x, err := ring.Build(cfg, ms)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	peerB := func() *peer {
		c.peersMu.Lock()
		defer c.peersMu.Unlock()
		return c.peers[addrs[1]]
	}
	liveConn := func() *conn {
		var got *conn
		deadline := time.Now().Add(20 * time.Second)
		for got == nil {
			if p := peerB(); p != nil {
				got = p.pick()
			}
			if time.Now().After(deadline) {
				t.Fatal("no live connection to b")
			}
			time.Sleep(5 * time.Millisecond)
		}
		return got
	}
	return backBed{c, build, peerB, liveConn}
}

func TestMemberBackInTheTopologyIsDialedAfresh(t *testing.T) {
	bed := newBackBed(t)
	c, build, liveConn := bed.c, bed.build, bed.liveConn
	c.install(build("a", "b"))
	first := liveConn()
	c.install(build("a")) // b cut off: kept as a seed, its connection too
	if first.isClosed() {
		t.Fatal("the connection to b, a seed, was closed when b left the topology: the test shows nothing")
	}
	c.install(build("a", "b")) // the heal
	p := bed.peerB()
	p.mu.Lock()
	kept := slices.Contains(p.conns, first)
	p.mu.Unlock()
	if kept {
		t.Fatal("b is back in the topology and its old connection is still used")
	}
	// Retired, not cut: calls already on it wait for their answers (the
	// node may have applied them); it closes once they are past their
	// deadlines.
	deadline := time.Now().Add(20 * time.Second)
	for !first.isClosed() {
		if time.Now().After(deadline) {
			t.Fatal("b's retired connection was never closed")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if again := liveConn(); again == first {
		t.Fatal("b's old connection picked again")
	}
}

// A member back in the topology is dialed at once, whatever back-off its
// failed dials built up while it was cut off (up to 2 s): calls fail fast
// while its peer has no connection.
func TestMemberBackInTheTopologyEndsTheDialBackoff(t *testing.T) {
	bed := newBackBed(t)
	c, build, liveConn := bed.c, bed.build, bed.liveConn
	c.install(build("a", "b"))
	liveConn()
	c.install(build("a"))
	p := bed.peerB()
	p.mu.Lock()
	p.backoff = time.Hour // what failed dials through a long cut grow, and more
	p.mu.Unlock()
	p.mu.Lock()
	conns := append([]*conn(nil), p.conns...)
	p.mu.Unlock()
	for _, x := range conns {
		if x != nil {
			x.close(errors.New("cut"))
		}
	}
	if p.pick() != nil {
		t.Fatal("a live connection right after every one closed")
	}
	c.install(build("a", "b")) // the heal: no hour's wait
	liveConn()
}

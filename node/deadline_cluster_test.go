package node_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/internal/testwait"
	"github.com/fcap-io/fcap/node"
	"github.com/fcap-io/fcap/node/nodetest"
)

// TestLateStrictGrantIsTakenBack: a strict Allow whose sync to the backup
// completes only after the client gave up must not use up a slot. The
// backup's data plane sits behind a proxy that holds every byte while
// the Allow is in flight, so the owner's sync cannot finish before the
// client's deadline however fast the machine; the node's own strict
// timeout is far longer, so on code that ignores the deadline the grant
// would stand once the proxy lets go.
func TestLateStrictGrantIsTakenBack(t *testing.T) {
	px := newStallProxy(t, false)
	reg := prometheus.NewRegistry()
	var nodes []*node.Node
	for i := range 2 {
		cfg := node.DefaultLocalConfig(fmt.Sprint("node-", i))
		cfg.Logger = nodetest.Quiet
		cfg.StrictTimeout = 30 * time.Second
		if i == 0 {
			cfg.Registerer, cfg.Gatherer = reg, reg
		} else {
			cfg.Membership.Seeds = []string{nodes[0].GossipAddr()}
			// The proxy must know where to forward before anyone uses
			// the address the node advertises: the node listens on a
			// port picked for it.
			cfg.DataAddr = freeAddr(t)
			cfg.AdvertiseDataAddr = px.addr()
			px.setTarget(cfg.DataAddr)
		}
		nodes = append(nodes, nodetest.Start(t, cfg))
	}
	testwait.Eventually(t, 20*time.Second, func() bool {
		return len(nodes[0].Ring().Members()) == 2 && nodes[0].Ready() && nodes[1].Ready()
	}, "the cluster did not converge: members %d, ready %v %v", len(nodes[0].Ring().Members()), nodes[0].Ready(), nodes[1].Ready())
	// A budget, not a timing assertion: long enough to answer a healthy
	// strict Allow on a busy machine, far shorter than StrictTimeout.
	c := newClient(t, nodes, func(cfg *client.Config) { cfg.Timeout = 2 * time.Second })

	strictCap := fcap.Cap{Scope: "campaign", ID: "contract", Limit: 5, Window: fcap.MaxWindow, Mode: fcap.Strict}
	viewers := nodetest.OwnedBy(t, nodes[0].Ring(), "node-0", "viewer", 2)
	left := func(viewer string) int64 {
		t.Helper()
		res, err := c.Check(context.Background(), viewer, []fcap.Candidate{{Caps: []fcap.Cap{strictCap}}})
		if err != nil || res.Verdicts[0].Failed() {
			t.Fatalf("Check %s: %+v %v", viewer, res, err)
		}
		return res.Verdicts[0].Remaining
	}

	// Through the healthy proxy a strict Allow is granted and counted:
	// the sync to the backup works.
	vd, err := c.Allow(context.Background(), viewers[0], []fcap.Cap{strictCap})
	if err != nil || !vd.Allowed || vd.Failed() {
		t.Fatalf("strict Allow with a healthy backup: %+v %v", vd, err)
	}
	if got := left(viewers[0]); got != 4 {
		t.Fatalf("%d left after one grant, want 4", got)
	}

	// The backup stalls: the client gives up and fails closed.
	px.stall()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	vd, err = c.Allow(ctx, viewers[1], []fcap.Cap{strictCap})
	cancel()
	if err != nil || vd.Allowed || !vd.FailClosed {
		px.release()
		t.Fatalf("strict Allow with a stalled backup: %+v %v, want failed closed", vd, err)
	}
	px.release()

	// Once the owner is done with that Allow, its slot is free again.
	testwait.Eventually(t, 20*time.Second, func() bool { return allowsAnswered(reg) >= 2 }, "the owner did not finish the stalled Allow")
	if got := left(viewers[1]); got != 5 {
		t.Fatalf("%d left after a grant the client never saw, want 5: the slot stayed used", got)
	}
	// And the grant the client saw still counts.
	if got := left(viewers[0]); got != 4 {
		t.Fatalf("%d left on the first viewer, want 4", got)
	}
}

// freeAddr returns a loopback address with a port nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// allowsAnswered is how many Allow requests a node answered, whatever
// the outcome.
func allowsAnswered(reg *prometheus.Registry) int {
	mfs, _ := reg.Gather()
	var n float64
	for _, mf := range mfs {
		if mf.GetName() != "fcap_node_requests_total" {
			continue
		}
		for _, m := range mf.Metric {
			for _, l := range m.Label {
				if l.GetName() == "op" && l.GetValue() == "allow" {
					n += m.Counter.GetValue()
				}
			}
		}
	}
	return int(n)
}

// stallProxy forwards TCP connections to a target set after it starts
// (the node behind it learns the proxy's address first), and can hold
// every byte it has not forwarded yet until released.
type stallProxy struct {
	ln          net.Listener
	ready       chan struct{}
	target      string
	answersOnly bool // a stall holds only the target's answers

	mu sync.Mutex
	// The fields below are guarded by mu.
	gate  chan struct{} // closed while bytes flow
	conns []net.Conn
}

// newStallProxy starts a proxy; with answersOnly, a stall holds only what
// the target sends back and requests keep flowing.
func newStallProxy(t *testing.T, answersOnly bool) *stallProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &stallProxy{ln: ln, ready: make(chan struct{}), gate: make(chan struct{}), answersOnly: answersOnly}
	close(p.gate)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		p.accept(&wg)
	}()
	t.Cleanup(func() {
		ln.Close()
		p.release()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		wg.Wait()
	})
	return p
}

func (p *stallProxy) addr() string { return p.ln.Addr().String() }

func (p *stallProxy) setTarget(addr string) {
	p.target = addr
	close(p.ready)
}

// stall holds every byte from now on.
func (p *stallProxy) stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.gate:
		p.gate = make(chan struct{})
	default:
	}
}

// release lets the held bytes through.
func (p *stallProxy) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.gate:
	default:
		close(p.gate)
	}
}

func (p *stallProxy) open() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.gate
}

func (p *stallProxy) accept(wg *sync.WaitGroup) {
	for {
		front, err := p.ln.Accept()
		if err != nil {
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-p.ready
			back, err := net.Dial("tcp", p.target)
			if err != nil {
				front.Close()
				return
			}
			p.mu.Lock()
			p.conns = append(p.conns, front, back)
			p.mu.Unlock()
			var pumps sync.WaitGroup
			pumps.Add(2)
			go func() { defer pumps.Done(); p.pump(back, front, !p.answersOnly) }()
			go func() { defer pumps.Done(); p.pump(front, back, true) }()
			pumps.Wait()
		}()
	}
}

// pump copies src to dst; when gated, each chunk only once the gate is
// open.
func (p *stallProxy) pump(dst, src net.Conn, gated bool) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if gated {
				<-p.open()
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				return
			}
			return
		}
	}
}

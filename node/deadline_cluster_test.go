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
	"github.com/fcap-io/fcap/ring"
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
		cfg.Replication.DropGrace = time.Minute // longer than StrictTimeout (Validate)
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

// TestTakenBackGrantReachesTheNextPrimary: a strict grant whose backup
// does not answer is taken back; when its partition is handed over
// meanwhile, the take-back must go with the hand-over. The new primary
// took the grant whole, and the client's next try goes to it: without
// the take-back it counts the same impression twice (what
// TestKillAndRestartAtOnce found now and then). The take-back may come
// after the hand-over: a primary merges what its partition's other
// owners push. Here the owner's Allow
// waits on a backup whose data plane a proxy holds, while a joining node
// that becomes the viewer's primary, held Joining behind a proxy of its
// own until then, turns Active.
func TestTakenBackGrantReachesTheNextPrimary(t *testing.T) {
	pxBackup, pxNext := newStallProxy(t, false), newStallProxy(t, false)
	regs := make([]*prometheus.Registry, 5)
	var nodes []*node.Node
	var rcfg ring.Config
	start := func(i int, px *stallProxy) {
		cfg := node.DefaultLocalConfig(fmt.Sprint("node-", i))
		rcfg = cfg.Membership.Ring
		cfg.Logger = nodetest.Quiet
		cfg.Membership.Ring.Replicas = 2
		cfg.StrictTimeout = 30 * time.Second
		// The old owner keeps the partition's copy, to take the grant
		// back from, for longer than the Allow waits (a strict write
		// waits at most StrictTimeout, and Validate refuses a DropGrace
		// shorter; the local profile's 5 s is shorter than this test's
		// 10 s budget too).
		cfg.Replication.DropGrace = time.Minute
		regs[i] = prometheus.NewRegistry()
		cfg.Registerer, cfg.Gatherer = regs[i], regs[i]
		if i > 0 {
			cfg.Membership.Seeds = []string{nodes[0].GossipAddr()}
		}
		if px != nil {
			cfg.DataAddr = freeAddr(t)
			cfg.AdvertiseDataAddr = px.addr()
			px.setTarget(cfg.DataAddr)
		}
		nodes = append(nodes, nodetest.Start(t, cfg))
	}
	// Four members and a fifth joining: with the backup held, the owner
	// and two others still make the majority strict writes need.
	start(0, nil)
	start(1, pxBackup)
	start(2, nil)
	start(3, nil)
	nodetest.Settle(t, nodes, 30*time.Second)
	owner, backup := nodes[0], nodes[1]
	// The fifth node joins but gets no copy while its proxy holds: it
	// stays Joining.
	pxNext.stall()
	start(4, pxNext)
	next := nodes[4]
	testwait.Eventually(t, 20*time.Second, func() bool {
		i, ok := owner.Ring().Find(next.Name())
		return ok && owner.Ring().Member(i).State == ring.Joining
	}, "the owner does not see the third node joining")

	// A viewer owner serves with backup as its backup now, whose primary
	// is the fifth node once it is Active.
	x := owner.Ring()
	var active []ring.Member
	for _, m := range x.Members() {
		m.State = ring.Active
		active = append(active, m)
	}
	rcfg.Replicas = 2
	after, err := ring.Build(rcfg, active)
	if err != nil {
		t.Fatal(err)
	}
	viewer := ""
	for i := 0; viewer == "" && i < 100000; i++ {
		v := fmt.Sprint("viewer-", i)
		_, now := x.Lookup(v)
		_, later := after.Lookup(v)
		if len(now) == 2 && x.Member(now[0]).Name == owner.Name() && x.Member(now[1]).Name == backup.Name() &&
			after.Member(later[0]).Name == next.Name() {
			viewer = v
		}
	}
	if viewer == "" {
		t.Fatal("no viewer moves from the owner to the joining node")
	}

	// A budget, not a timing assertion: the Allow fails closed when it
	// ends, and the fifth node must turn Active before that.
	c := newClient(t, nodes[:4], func(cfg *client.Config) { cfg.Timeout = 10 * time.Second })
	strictCap := fcap.Cap{Scope: "campaign", ID: "contract", Limit: 5, Window: fcap.MaxWindow, Mode: fcap.Strict}
	left := func(n *node.Node) int64 {
		t.Helper()
		res, err := n.Engine().Check(viewer, []fcap.Candidate{{Caps: []fcap.Cap{strictCap}}}, time.Now().UnixMilli(), nil)
		if err != nil {
			t.Fatal(err)
		}
		return res[0].Remaining
	}
	pxBackup.stall()
	answered := make(chan client.Verdict, 1)
	allow := func() {
		vd, err := c.Allow(context.Background(), viewer, []fcap.Cap{strictCap})
		if err != nil {
			t.Errorf("Allow: %v", err)
		}
		answered <- vd
	}
	// The owner may refuse it at once while its quorum forms on the ring
	// with the joining node (the backup is held): asked again until the
	// owner applies it and waits for the backup.
	go allow()
	testwait.Eventually(t, 30*time.Second, func() bool {
		if left(owner) == 4 {
			return true
		}
		select {
		case vd := <-answered:
			t.Logf("the owner answered %+v before applying the Allow: asking again", vd)
			go allow()
		default:
		}
		return false
	}, "the owner did not apply the Allow")
	// The fifth node gets its copies and turns Active: the owner hands
	// the viewer's partition over while the grant waits for the backup.
	pxNext.release()
	vd := <-answered
	if vd.Allowed || !vd.FailClosed {
		t.Fatalf("strict Allow with a stalled backup: %+v, want failed closed", vd)
	}
	testwait.Eventually(t, 20*time.Second, func() bool { return counter(regs[0], "fcap_strict_revoked_total") >= 1 },
		"the owner did not take the grant back")
	if _, own := owner.Ring().Lookup(viewer); owner.Ring().Member(own[0]).Name != next.Name() {
		t.Fatalf("the fifth node did not turn Active while the Allow waited: the test shows nothing")
	}
	pxBackup.release()
	nodetest.Settle(t, nodes, 30*time.Second)
	if got := left(owner); got != 5 {
		t.Fatalf("the old owner has %d left, want 5", got)
	}
	testwait.Eventually(t, 20*time.Second, func() bool { return left(next) == 5 },
		"the new primary counts a grant the client never saw: it took the grant without its take-back")
}

// counter reads the unlabelled counter name from reg, 0 if absent.
func counter(reg prometheus.Gatherer, name string) float64 {
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.Metric) == 1 {
			return mf.Metric[0].Counter.GetValue()
		}
	}
	return 0
}

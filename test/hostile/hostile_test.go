package hostile_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/proto"
	"github.com/fcap-io/fcap/test/cluster"
)

// The node's limits for this test: short timeouts so the slow attacks
// end quickly, and a connection limit well under the flood. The idle
// timeout is also the time the node has to read a 1 MiB frame it has
// been sent: a race-built node on a 2-core machine at a load of 30 has
// taken over 5 s.
const (
	maxConns         = 1000
	idleTimeout      = 8 * time.Second
	handshakeTimeout = 2 * time.Second
	writeTimeout     = 2 * time.Second
	floodConns       = 5000
	// heapBound and rssBound are what the node's Go heap in use and
	// resident memory must stay under through every attack: generous
	// for a node holding maxConns connections (the resident bound also
	// for the race detector's shadow memory: test/cluster builds fcapd
	// with -race), far under what an allocation sized by a claimed
	// length (4 GiB), unbounded output or pinned frame buffers take
	// (600 MiB for large-frames-then-idle before it was fixed).
	heapBound = 256 << 20
	rssBound  = 768 << 20
	// slack is added to every timeout the node is expected to enforce:
	// a race-built node on a busy 2-core machine.
	slack = 10 * time.Second
)

// TestHostileInput starts one fcapd and attacks it in turn. After every
// attack a well-behaved client's Check and Allow must succeed; they run
// in the background all along and must never fail; the node must never
// hold more than maxConns connections, never exceed heapBound and rssBound, store
// nothing from a bad request and still be running at the end.
func TestHostileInput(t *testing.T) {
	raiseFileLimit(t, floodConns+1000)
	n := cluster.Start(t, "h1", cluster.Options{Args: []string{
		"--max-conns", fmt.Sprint(maxConns),
		"--idle-timeout", idleTimeout.String(),
		"--handshake-timeout", handshakeTimeout.String(),
		"--write-timeout", writeTimeout.String(),
		"--log-level", "info",
	}})
	cluster.WaitActive(t, []*cluster.Node{n}, 1)
	c := newClient(t, n.Data)
	mon := watch(t, n)
	probe := newProber(t, c)

	attacks := []struct {
		name string
		run  func(t *testing.T, addr string, probe func(*testing.T))
	}{
		{"random-bytes", randomBytes},
		{"random-bodies", randomBodies},
		{"length-4GiB", hugeLength},
		{"truncated-frames", truncatedFrames},
		{"wrong-msgpack-types", wrongTypes},
		{"unknown-type-and-version", unknownTypeAndVersion},
		{"100000-candidates", manyCandidates},
		{"1MiB-ids", hugeIDs},
		{"large-frames-then-idle", largeFramesThenIdle},
		{"idle-flood", func(t *testing.T, addr string, probe func(*testing.T)) { idleFlood(t, n, addr, probe) }},
		{"slow-reader", func(t *testing.T, addr string, probe func(*testing.T)) { slowReader(t, n, addr, probe) }},
		{"slowloris", func(t *testing.T, addr string, probe func(*testing.T)) { slowloris(t, n, addr, probe) }},
	}
	for _, a := range attacks {
		t.Run(a.name, func(t *testing.T) {
			mon.phase()
			a.run(t, n.Data, probe.once)
			probe.once(t)
			if !n.Running() {
				t.Fatalf("the node died:\n%s", tail(n.Logs()))
			}
			heap, rss := mon.phase()
			t.Logf("peak: heap in use %.1f MiB, resident %.1f MiB", float64(heap)/(1<<20), float64(rss)/(1<<20))
			if heap > heapBound || rss > rssBound {
				t.Errorf("memory over its bound: heap %d MiB (bound %d), resident %d MiB (bound %d)", heap>>20, heapBound>>20, rss>>20, rssBound>>20)
			}
		})
	}

	probe.stop()
	heap, rss, conns := mon.stop()
	t.Logf("peak over the attacks: heap in use %.1f MiB, resident %.1f MiB, %d connections; background client calls: %d ok",
		float64(heap)/(1<<20), float64(rss)/(1<<20), conns, probe.ok.Load())
	if rss == 0 || heap == 0 {
		t.Fatal("never scraped the node's memory")
	}
	if heap > heapBound || rss > rssBound {
		t.Errorf("memory over its bound during the attacks: heap %d MiB (bound %d), resident %d MiB (bound %d)", heap>>20, heapBound>>20, rss>>20, rssBound>>20)
	}
	if conns > maxConns+1 { // the scrape may race a closing connection
		t.Errorf("the node held %d connections, limit %d", conns, maxConns)
	}
	if f := probe.failures(); len(f) > 0 {
		t.Errorf("%d background client calls failed during the attacks, first: %s", len(f), f[0])
	}
	if probe.ok.Load() == 0 {
		t.Error("no background client call completed")
	}
	// Bad requests changed nothing: the only viewer the node holds is
	// the prober's.
	if st := status(t, n.Data); st.Viewers != 1 {
		t.Errorf("the node holds %d viewers after the attacks, want only the prober's", st.Viewers)
	}
	if strings.Contains(n.Logs(), "panic") {
		t.Errorf("the node logged a panic:\n%s", tail(n.Logs()))
	}
}

// raiseFileLimit raises this process's open-file limit to at least want
// (past the hard limit only as root); fcapd inherits it.
func raiseFileLimit(t *testing.T, want uint64) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Cur >= want {
		return
	}
	lim.Cur, lim.Max = want, max(lim.Max, want) // a higher hard limit needs root
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Skipf("cannot raise the open-file limit to the %d this test needs: %v", want, err)
	}
}

func newClient(t *testing.T, addr string) *client.Client {
	t.Helper()
	cfg := client.DefaultConfig(addr)
	cfg.Timeout = 3 * time.Second // a race-built node on a busy 2-core box: this checks answers, not speed
	return cluster.Client(t, cfg)
}

// prober is the well-behaved client: a Check and an Allow on one
// viewer, in the background all along (every failure kept) and on
// demand.
type prober struct {
	c    *client.Client
	ok   atomic.Int64
	loop *background

	// mu guards failed.
	mu     sync.Mutex
	failed []string
}

var probeCap = fcap.Cap{Scope: "campaign", ID: "probe", Limit: fcap.MaxLimit, Window: time.Hour}

func newProber(t *testing.T, c *client.Client) *prober {
	p := &prober{c: c}
	p.loop = every(t, 50*time.Millisecond, func() {
		if err := p.call(); err != nil {
			p.mu.Lock()
			p.failed = append(p.failed, time.Now().Format("15:04:05.000")+" "+err.Error())
			p.mu.Unlock()
		} else {
			p.ok.Add(1)
		}
	})
	return p
}

// call makes one Check and one Allow and reports whichever failed.
func (p *prober) call() error {
	ctx := context.Background()
	res, err := p.c.Check(ctx, "probe-viewer", []fcap.Candidate{{Caps: []fcap.Cap{probeCap}}})
	if err != nil {
		return fmt.Errorf("check: %w", err)
	}
	if v := res.Verdicts[0]; v.Failed() || !v.Allowed {
		return fmt.Errorf("check: verdict %+v (fail-open/closed: the node did not answer)", v)
	}
	v, err := p.c.Allow(ctx, "probe-viewer", []fcap.Cap{probeCap})
	if err != nil {
		return fmt.Errorf("allow: %w", err)
	}
	if v.Failed() || !v.Allowed {
		return fmt.Errorf("allow: verdict %+v (fail-open/closed: the node did not answer)", v)
	}
	return nil
}

// once fails t unless a Check and an Allow succeed now.
func (p *prober) once(t *testing.T) {
	t.Helper()
	if err := p.call(); err != nil {
		t.Fatalf("a well-behaved client failed: %v", err)
	}
}

func (p *prober) failures() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.failed...)
}

func (p *prober) stop() { p.loop.stop() }

// background calls a function over and over on its own goroutine.
type background struct {
	done chan struct{}
	wg   sync.WaitGroup
}

// every calls f every period, the first time one period from now, until
// stop or the end of the test.
func every(t *testing.T, period time.Duration, f func()) *background {
	b := &background{done: make(chan struct{})}
	b.wg.Go(func() {
		tick := time.NewTicker(period)
		defer tick.Stop()
		for {
			select {
			case <-b.done:
				return
			case <-tick.C:
			}
			f()
		}
	})
	t.Cleanup(b.stop)
	return b
}

// stop ends the calls and waits for the last one to return. It may be
// called again.
func (b *background) stop() {
	select {
	case <-b.done:
	default:
		close(b.done)
	}
	b.wg.Wait()
}

// monitor scrapes the node's /metrics every 100ms and keeps the peaks
// of its Go heap, its resident memory and its open connections.
type monitor struct {
	loop             *background
	scrape           func()
	heap, rss, conns atomic.Int64
	// The peaks since the last call to phase.
	phaseHeap, phaseRSS atomic.Int64
}

// phase scrapes once more and returns the peak heap and resident memory
// since its last call, then starts a new phase.
func (m *monitor) phase() (heap, rss int64) {
	m.scrape()
	return m.phaseHeap.Swap(0), m.phaseRSS.Swap(0)
}

func watch(t *testing.T, n *cluster.Node) *monitor {
	m := &monitor{}
	peak := func(p *atomic.Int64, v float64) {
		for {
			old := p.Load()
			if int64(v) <= old || p.CompareAndSwap(old, int64(v)) {
				return
			}
		}
	}
	m.scrape = func() {
		s, err := n.Metrics()
		if err != nil {
			return // a missed scrape; the test fails if none succeeds
		}
		for _, p := range []*atomic.Int64{&m.heap, &m.phaseHeap} {
			peak(p, s["go_memstats_heap_inuse_bytes"])
		}
		for _, p := range []*atomic.Int64{&m.rss, &m.phaseRSS} {
			peak(p, s["process_resident_memory_bytes"])
		}
		peak(&m.conns, s["fcap_node_connections"])
	}
	m.scrape()
	m.loop = every(t, 100*time.Millisecond, m.scrape)
	return m
}

// stop ends the scraping and returns the peaks.
func (m *monitor) stop() (heap, rss, conns int64) {
	m.loop.stop()
	return m.heap.Load(), m.rss.Load(), m.conns.Load()
}

// status asks the node how it is.
func status(t *testing.T, addr string) *proto.Status {
	t.Helper()
	c := dial(t, addr)
	defer c.Close()
	c.send(frame(t, 1, &proto.StatusRequest{}))
	h, body, err := c.next(10 * time.Second)
	if err != nil || h.Type != proto.TypeStatus {
		t.Fatalf("status: %v frame, %v", h.Type, err)
	}
	var st proto.Status
	if err := proto.Decode(body, &st); err != nil {
		t.Fatal(err)
	}
	return &st
}

func tail(s string) string {
	if len(s) > 4000 {
		return "..." + s[len(s)-4000:]
	}
	return s
}

// randomBytes: connections that send nothing but noise. The node reads
// a nonsense length and refuses it, or waits for a frame that never
// completes until the idle timeout; either way the connection closes.
func randomBytes(t *testing.T, addr string, probe func(*testing.T)) {
	r := rand.New(rand.NewPCG(1, 2))
	var conns []*rawConn
	for range 20 {
		c := dial(t, addr)
		noise := make([]byte, 64<<10)
		for i := range noise {
			noise[i] = byte(r.Uint32())
		}
		c.SetWriteDeadline(time.Now().Add(5 * time.Second))
		c.Write(noise) // the node may close before it has read everything
		conns = append(conns, c)
	}
	probe(t)
	for _, c := range conns {
		c.expectClosed(idleTimeout + slack)
	}
}

// randomBodies: well-framed requests of every type that decodes its body,
// each with a random body. Each is answered with a bad-request error for
// its id, and the connection goes on serving.
func randomBodies(t *testing.T, addr string, probe func(*testing.T)) {
	r := rand.New(rand.NewPCG(3, 4))
	c := dial(t, addr)
	types := []proto.Type{proto.TypeCheck, proto.TypeAllow, proto.TypeRecord, proto.TypeReserve, proto.TypeRelease, proto.TypeReplicate, proto.TypeSyncRequest}
	id := uint64(100)
	for round := range 30 {
		for _, typ := range types {
			body := make([]byte, 1+r.IntN(2000))
			for i := range body {
				body[i] = byte(r.Uint32())
			}
			// A fixarray of the right size first, so some bodies get past
			// the first field.
			if round%2 == 0 {
				body[0] = 0x96
			}
			id++
			c.send(bodyFrame(typ, id, body))
			c.expectError(id, proto.CodeBadRequest)
		}
	}
	probe(t)
	c.ping(1)
}

// hugeLength: length prefixes of 4 GiB and just over the limit are
// refused before anything is allocated for them (the error, then the
// close); lengths too short to hold a header likewise.
func hugeLength(t *testing.T, addr string, probe func(*testing.T)) {
	for _, length := range []uint32{0xFFFFFFFF, proto.DefaultMaxFrame + 1, 0, 11} {
		c := dial(t, addr)
		c.send(rawFrame(length, proto.Version, proto.TypeCheck, 7, nil))
		c.expectError(0, proto.CodeBadRequest)
		if got := c.expectClosed(slack); len(got) != 0 {
			t.Errorf("length %d: more frames after the error: %v", length, got)
		}
	}
	probe(t)
}

// truncatedFrames: a frame cut off by the peer's close, and one left
// hanging half sent, which the idle timeout ends (its header arrived
// within the handshake timeout).
func truncatedFrames(t *testing.T, addr string, probe func(*testing.T)) {
	check := frame(t, 9, &proto.Check{Viewer: "v", Table: fcap.CheckTable{Caps: []fcap.Cap{probeCap}, Refs: []uint16{0}, Ends: []uint32{1}}})
	for _, cut := range []int{2, proto.HeaderSize - 1, len(check) - 1} {
		c := dial(t, addr)
		c.send(check[:cut])
		c.Conn.(*net.TCPConn).CloseWrite()
		if got := c.expectClosed(slack); len(got) != 0 {
			t.Errorf("cut at %d: answered %v", cut, got)
		}
	}
	hanging := dial(t, addr)
	hanging.send(check[:len(check)/2])
	start := time.Now()
	probe(t)
	hanging.expectClosed(idleTimeout + slack)
	if d := time.Since(start); d < idleTimeout/2 {
		t.Errorf("a half-sent frame was closed after %v, before the idle timeout", d)
	}
}

// wrongTypes: bodies of the right shape with fields of the wrong msgpack
// type. Each gets a bad-request error for its id; the connection stays.
func wrongTypes(t *testing.T, addr string, probe func(*testing.T)) {
	capWire := []any{"campaign", "c1", 5, 60000, 0, 0}
	cases := []struct {
		name string
		typ  proto.Type
		body []byte
	}{
		{"check viewer int", proto.TypeCheck, msgpackBody(t, 42, 1000, [][]any{capWire}, []byte{0, 0}, []byte{1, 0, 0, 0}, false)},
		{"check time string", proto.TypeCheck, msgpackBody(t, "v", "now", [][]any{capWire}, []byte{0, 0}, []byte{1, 0, 0, 0}, false)},
		{"check caps map", proto.TypeCheck, msgpackBody(t, "v", 1000, map[string]int{"a": 1}, []byte{0, 0}, []byte{1, 0, 0, 0}, false)},
		{"check refs odd bin", proto.TypeCheck, msgpackBody(t, "v", 1000, [][]any{capWire}, []byte{0}, []byte{1, 0, 0, 0}, false)},
		{"check ref out of range", proto.TypeCheck, checkBody(t, "v", [][]any{capWire}, []uint16{5}, []uint32{1})},
		{"check ends backwards", proto.TypeCheck, checkBody(t, "v", [][]any{capWire}, []uint16{0, 0}, []uint32{2, 1})},
		{"check body a map", proto.TypeCheck, []byte{0x81, 0xa1, 'v', 0x01}},
		{"check too few fields", proto.TypeCheck, msgpackBody(t, "v")},
		{"allow caps string", proto.TypeAllow, msgpackBody(t, "v", 1000, "caps")},
		{"allow limit negative", proto.TypeAllow, msgpackBody(t, "v", 1000, [][]any{{"campaign", "c1", -5, 60000, 0, 0}})},
		{"allow limit float", proto.TypeAllow, msgpackBody(t, "v", 1000, [][]any{{"campaign", "c1", 5.5, 60000, 0, 0}})},
		{"record items string", proto.TypeRecord, msgpackBody(t, "items")},
		{"record item viewer int", proto.TypeRecord, msgpackBody(t, [][]any{{1, "imp", 1000, [][]any{capWire}, 0}})},
		{"replicate states string", proto.TypeReplicate, msgpackBody(t, "peer", 1, 1, "states", []byte{}, []byte{})},
		{"replicate bad state", proto.TypeReplicate, msgpackBody(t, "peer", 1, 1, []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, []byte{}, []byte{})},
		{"sync partitions odd bin", proto.TypeSyncRequest, msgpackBody(t, "peer", []byte{1, 2, 3})},
		{"drain timeout string", proto.TypeDrain, msgpackBody(t, "soon")},
	}
	c := dial(t, addr)
	for i, tc := range cases {
		id := uint64(1000 + i)
		c.send(bodyFrame(tc.typ, id, tc.body))
		e := c.expectError(id, proto.CodeBadRequest)
		t.Logf("%s: %v", tc.name, e)
	}
	probe(t)
	c.ping(2)
}

// unknownTypeAndVersion: an unknown message type, a response type sent
// as a request, another protocol version and reserved bits set are each
// answered with an unsupported error for their id; the connection stays.
func unknownTypeAndVersion(t *testing.T, addr string, probe func(*testing.T)) {
	c := dial(t, addr)
	c.send(bodyFrame(200, 11, []byte{0x90}))
	c.expectError(11, proto.CodeUnsupported)
	c.send(bodyFrame(0, 12, nil))
	c.expectError(12, proto.CodeUnsupported)
	c.send(bodyFrame(proto.TypeCheckResult, 13, []byte{0x90}))
	c.expectError(13, proto.CodeUnsupported)
	for i, v := range []byte{0, 2, 255} {
		id := uint64(20 + i)
		c.send(rawFrame(proto.HeaderSize-4+3, v, proto.TypePing, id, []byte{0x90, 0x90, 0x90}))
		c.expectError(id, proto.CodeUnsupported)
	}
	reserved := bodyFrame(proto.TypePing, 30, []byte{0x90})
	reserved[7] = 1
	c.send(reserved)
	c.expectError(30, proto.CodeUnsupported)
	probe(t)
	c.ping(3)
}

// manyCandidates: a Check of 100,000 candidates is over the protocol's
// limit, one of 65,536 over the engine's; both are refused, and the
// node answers the next request.
func manyCandidates(t *testing.T, addr string, probe func(*testing.T)) {
	capWire := []any{"campaign", "c1", 5, 60000, 0, 0}
	c := dial(t, addr)
	for i, n := range []int{100_000, proto.MaxCandidates} {
		refs := make([]uint16, n)
		ends := make([]uint32, n)
		for j := range ends {
			ends[j] = uint32(j + 1)
		}
		id := uint64(40 + i)
		c.send(bodyFrame(proto.TypeCheck, id, checkBody(t, "many", [][]any{capWire}, refs, ends)))
		c.expectError(id, proto.CodeBadRequest)
	}
	probe(t)
	c.ping(4)
}

// hugeIDs: a viewer and a cap id of 1 MiB make a frame over the limit
// (refused, closed); ids of 64 KiB + 1 (over the protocol's string
// limit) and of 60 KiB (over the engine's id limit) are bad requests.
func hugeIDs(t *testing.T, addr string, probe func(*testing.T)) {
	mib := strings.Repeat("x", 1<<20)
	for _, body := range [][]byte{
		checkBody(t, mib, [][]any{{"campaign", "c1", 5, 60000, 0, 0}}, []uint16{0}, []uint32{1}),
		msgpackBody(t, "v", 1000, [][]any{{"campaign", mib, 5, 60000, 0, 0}}),
	} {
		c := dial(t, addr)
		c.SetWriteDeadline(time.Now().Add(5 * time.Second))
		c.Write(bodyFrame(proto.TypeCheck, 50, body)) // the node may close before reading it all
		c.expectRefused(slack)
	}
	c := dial(t, addr)
	for i, n := range []int{proto.MaxStringLen + 1, 60 << 10} {
		id := uint64(60 + i)
		long := strings.Repeat("y", n)
		c.send(bodyFrame(proto.TypeCheck, id, checkBody(t, long, [][]any{{"campaign", "c1", 5, 60000, 0, 0}}, []uint16{0}, []uint32{1})))
		c.expectError(id, proto.CodeBadRequest)
		c.send(bodyFrame(proto.TypeAllow, id+10, msgpackBody(t, "v", 1000, [][]any{{"campaign", long, 5, 60000, 0, 0}})))
		c.expectError(id+10, proto.CodeBadRequest)
		c.send(bodyFrame(proto.TypeRelease, id+20, msgpackBody(t, long, 1)))
		c.expectError(id+20, proto.CodeBadRequest)
	}
	probe(t)
	c.ping(5)
}

// largeFramesThenIdle: 300 connections each send one frame just under
// the 1 MiB limit (a bad request) and then only keep-alive pings. Each
// connection's read buffer must not stay at the size of its largest
// frame: 300 MiB pinned would break heapBound.
//
// The connections must stay open for that to be tested, through the 300
// megabyte writes, which take from seconds to two minutes on a busy
// machine under the race detector: each connection pings on its own
// clock, every third of the idle timeout, never paced by the attack's
// progress. (A keep-alive every 50 connections once came 6 to 11 s after
// the last one, past the 3 s idle timeout of then, and the node rightly
// closed the connection: "ping 4100 after the attack: EOF".)
func largeFramesThenIdle(t *testing.T, addr string, probe func(*testing.T)) {
	const n = 300
	big := bodyFrame(proto.TypeCheck, 70, make([]byte, proto.DefaultMaxFrame-proto.HeaderSize))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var open []*rawConn
	keepAlive := func(c *rawConn, id uint64) {
		defer wg.Done()
		tick := time.NewTicker(idleTimeout / 3)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			id += n
			if err := c.pingErr(id); err != nil {
				t.Errorf("a connection that sent a large frame: %v", err)
				return
			}
		}
	}
	defer func() {
		close(stop)
		wg.Wait()
		for _, c := range open {
			c.Close()
		}
	}()
	for i := range n {
		c := dial(t, addr)
		c.send(big)
		c.expectError(70, proto.CodeBadRequest)
		open = append(open, c)
		wg.Add(1)
		go keepAlive(c, uint64(1000+i))
	}
	probe(t)
}

// idleFlood: 5,000 connections that send nothing. The node holds at
// most its pending share of maxConns of them (a quarter), telling the
// older ones it is overloaded as newer ones arrive, closes the held ones
// at the idle timeout, and serves the well-behaved client throughout.
func idleFlood(t *testing.T, n *cluster.Node, addr string, probe func(*testing.T)) {
	refusedBefore := n.Metric("fcap_node_connections_refused_total") + n.Metric("fcap_node_connections_evicted_total")
	conns := make([]net.Conn, 0, floodConns)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range floodConns {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatalf("dial after %d connections: %v", len(conns), err)
		}
		conns = append(conns, c)
	}
	probe(t)
	// Every connection ends: the refused and displaced at once with an
	// overloaded error, the held at the idle timeout.
	var refused, idled atomic.Int64
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for _, c := range conns {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			r := proto.NewReader(c, 4096)
			c.SetReadDeadline(time.Now().Add(idleTimeout + slack))
			h, body, err := r.Next()
			if err == nil {
				var e proto.Error
				if h.Type != proto.TypeError || proto.Decode(body, &e) != nil || e.Code != proto.CodeOverloaded {
					t.Errorf("an idle connection was sent a %v frame", h.Type)
				}
				refused.Add(1)
				_, _, err = r.Next()
			} else {
				idled.Add(1)
			}
			if !isClosed(err) {
				t.Errorf("an idle connection is still open after %v: %v", idleTimeout+slack, err)
			}
		}()
	}
	wg.Wait()
	t.Logf("%d connections: %d refused as overloaded, %d closed idle", floodConns, refused.Load(), idled.Load())
	if refused.Load() < floodConns-3*maxConns {
		t.Errorf("only %d of %d connections refused past a limit of %d", refused.Load(), floodConns, maxConns)
	}
	if got := n.Metric("fcap_node_connections_refused_total") + n.Metric("fcap_node_connections_evicted_total") - refusedBefore; got < float64(refused.Load()) {
		t.Errorf("fcap_node_connections_refused_total and _evicted_total rose by %v, %d connections were told overloaded", got, refused.Load())
	}
	probe(t)
	cluster.Eventually(t, slack, func() bool { return n.Metric("fcap_node_connections") <= 10 },
		"connections not released after the flood: %v open", n.Metric("fcap_node_connections"))
}

// slowReader: a client pipelines requests and reads no response. The
// node stops reading it once its output is stuck, and closes it at the
// write timeout, instead of buffering responses without bound.
func slowReader(t *testing.T, n *cluster.Node, addr string, probe func(*testing.T)) {
	before := n.Metric("fcap_node_write_errors_total")
	c := dial(t, addr)
	c.Conn.(*net.TCPConn).SetReadBuffer(4 << 10)
	req := frame(t, 1, &proto.TopologyRequest{})
	batch := make([]byte, 0, 256*len(req))
	for range 256 {
		batch = append(batch, req...)
	}
	start := time.Now()
	var sent int
	var err error
	for err == nil && time.Since(start) < 2*slack {
		c.SetWriteDeadline(time.Now().Add(writeTimeout + slack))
		var k int
		k, err = c.Write(batch)
		sent += k
		if sent == 256*len(req) {
			probe(t) // the node is busy answering a peer that reads nothing
		}
	}
	if err == nil || isTimeout(err) {
		t.Fatalf("the node still takes requests from a client that reads nothing (%d bytes sent in %v): %v", sent, time.Since(start), err)
	}
	t.Logf("slow reader cut off after %d bytes of requests in %v: %v", sent, time.Since(start).Round(time.Millisecond), err)
	cluster.Eventually(t, slack, func() bool { return n.Metric("fcap_node_write_errors_total") > before },
		"fcap_node_write_errors_total did not count the slow reader")
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// slowloris: connections that send a valid frame one byte per second.
// The handshake timeout (the header of a connection's first request is
// due 2 s after its first byte) closes each long before its frame is
// complete.
func slowloris(t *testing.T, n *cluster.Node, addr string, probe func(*testing.T)) {
	before := n.Metric("fcap_node_handshake_closed_total")
	check := frame(t, 9, &proto.Check{Viewer: "v", Table: fcap.CheckTable{Caps: []fcap.Cap{probeCap}, Refs: []uint16{0}, Ends: []uint32{1}}})
	var wg sync.WaitGroup
	for range 20 {
		c := dial(t, addr)
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			for i := range check {
				c.SetWriteDeadline(time.Now().Add(slack))
				if _, err := c.Write(check[i : i+1]); err != nil {
					break
				}
				// The read is the pacing: a second, or less if the node
				// closes the connection.
				c.SetReadDeadline(time.Now().Add(time.Second))
				if _, _, err := c.r.Next(); isClosed(err) || err == nil {
					break
				}
				if time.Since(start) > idleTimeout+slack {
					break
				}
			}
			if d := time.Since(start); d > handshakeTimeout+slack {
				t.Errorf("a slowloris connection lasted %v, handshake timeout %v", d, handshakeTimeout)
			}
		}()
	}
	probe(t)
	wg.Wait()
	cluster.Eventually(t, slack, func() bool { return n.Metric("fcap_node_handshake_closed_total")-before >= 20 },
		"fcap_node_handshake_closed_total rose by %v, want the 20 slowloris connections", n.Metric("fcap_node_handshake_closed_total")-before)
}

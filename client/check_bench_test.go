package client_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/proto"
)

// BenchmarkCheckInto: the client's own cost of a 100-candidate check,
// the shape fcapbench's check workload sends (one soft campaign cap per
// candidate, prebuilt candidate lists, a reused result, an explicit
// time), against a node that answers every Check with a prebuilt frame:
// what is left besides the client is loopback TCP and a read and a write
// on the other side. "serial" is one caller (a round trip's latency);
// "parallel" has GOMAXPROCS*8 callers sharing the connection, as an open
// loop generator does. cpu-ns/op is the process's CPU time per call (the
// client, and the canned node's reads and writes): on a shared machine
// compare it and allocs/op rather than ns/op, which other processes
// inflate.
//
//	go test -run XXX -bench BenchmarkCheckInto -count 5 ./client/
func BenchmarkCheckInto(b *testing.B) {
	const candidates = 100
	caps := make([]fcap.Cap, 1000)
	for i := range caps {
		caps[i] = fcap.Cap{Scope: "campaign", ID: fmt.Sprint("campaign-", i), Limit: 5, Window: 24 * time.Hour}
	}
	srv := startCanned(b, candidates)
	c := newClient(b, nil, srv.addr())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		b.Fatal(err)
	}
	// Each call draws a different set of campaigns into the same
	// candidate slice, as fcapbench's target does.
	fill := func(cands []fcap.Candidate, i int) {
		for j := range cands {
			k := (i*7 + j*13) % len(caps)
			cands[j] = fcap.Candidate{Caps: caps[k : k+1]}
		}
	}
	check := func(b *testing.B, cands []fcap.Candidate, res *client.CheckResult, i int) {
		fill(cands, i)
		err := c.CheckInto(context.Background(), "viewer-123456", cands, res, client.At(1_700_000_000_000+int64(i)))
		if err != nil || len(res.Verdicts) != candidates || res.Verdicts[0].Failed() {
			b.Fatalf("check: %v, %d verdicts", err, len(res.Verdicts))
		}
	}
	b.Run("serial", func(b *testing.B) {
		cands, res := make([]fcap.Candidate, candidates), &client.CheckResult{}
		b.ReportAllocs()
		cpu := client.ProcessCPU()
		for i := 0; b.Loop(); i++ {
			check(b, cands, res, i)
		}
		reportCPU(b, cpu)
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.SetParallelism(8)
		cpu := client.ProcessCPU()
		b.RunParallel(func(pb *testing.PB) {
			cands, res := make([]fcap.Candidate, candidates), &client.CheckResult{}
			for i := 0; pb.Next(); i++ {
				check(b, cands, res, i)
			}
		})
		reportCPU(b, cpu)
	})
}

// reportCPU reports the process's CPU time per call since start.
func reportCPU(b *testing.B, start int64) {
	if start > 0 {
		b.ReportMetric(float64(client.ProcessCPU()-start)/float64(b.N), "cpu-ns/op")
	}
}

// cannedNode is a one-member cluster that answers every Check with the
// same verdicts, from one frame built up front, so that a benchmark of
// the client measures the client.
type cannedNode struct {
	ln     net.Listener
	answer []byte // a CheckResult frame; its id is patched per request
	topo   []byte // the Topology frame
	hello  []byte // the HelloResult frame
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  []net.Conn // guarded by mu
}

func startCanned(t testing.TB, verdicts int) *cannedNode {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := &cannedNode{ln: ln}
	res := &proto.CheckResult{Epoch: 42, Now: 1_700_000_000_000, Verdicts: make([]fcap.Verdict, verdicts), Left: make([]uint16, verdicts)}
	for i := range res.Verdicts {
		res.Verdicts[i] = fcap.Verdict{Allowed: true, Remaining: 4, Blocking: -1}
		res.Left[i] = 4 // one distinct cap per candidate
	}
	if n.answer, err = proto.AppendFrame(nil, 0, res); err != nil {
		t.Fatal(err)
	}
	topo := &proto.Topology{Epoch: 42, Partitions: 7, Replicas: 1, Owners: make([]uint16, 7),
		Members: []proto.Member{{Name: "canned", Addr: ln.Addr().String(), State: 2, Incarnation: 1}}}
	if n.topo, err = proto.AppendFrame(nil, 0, topo); err != nil {
		t.Fatal(err)
	}
	if n.hello, err = proto.AppendFrame(nil, 0, &proto.HelloResult{}); err != nil {
		t.Fatal(err)
	}
	n.wg.Add(1)
	go n.accept()
	t.Cleanup(n.close)
	return n
}

func (n *cannedNode) addr() string { return n.ln.Addr().String() }

func (n *cannedNode) accept() {
	defer n.wg.Done()
	for {
		c, err := n.ln.Accept()
		if err != nil {
			return
		}
		n.mu.Lock()
		n.conns = append(n.conns, c)
		n.mu.Unlock()
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			n.serve(c)
		}()
	}
}

// serve answers each request with the canned frame of its kind; many
// answers go out in one write when requests arrive together.
func (n *cannedNode) serve(c net.Conn) {
	defer c.Close()
	r := proto.NewReader(c, 0)
	var out []byte
	for {
		hdr, _, err := r.Next()
		if err != nil {
			return
		}
		frame := n.answer
		switch hdr.Type {
		case proto.TypeTopologyRequest:
			frame = n.topo
		case proto.TypeHello:
			frame = n.hello
		}
		start := len(out)
		out = append(out, frame...)
		binary.BigEndian.PutUint64(out[start+8:], hdr.ID)
		if r.Buffered() > 0 {
			continue
		}
		if _, err := c.Write(out); err != nil {
			return
		}
		out = out[:0]
	}
}

func (n *cannedNode) close() {
	n.ln.Close()
	n.mu.Lock()
	for _, c := range n.conns {
		c.Close()
	}
	n.mu.Unlock()
	n.wg.Wait()
}

// TestCheckIntoAllocates: a caller reusing its candidates and result
// checks without allocating (a generator or ad server that allocates per
// request pays for it in GC pauses: issue 21). At most one allocation on
// average leaves room for the runtime's own; the client allocated two
// per call before it kept the request in the result.
func TestCheckIntoAllocates(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's sync.Pool drops items: allocation counts are not the production ones")
	}
	srv := startCanned(t, 100)
	c := newClient(t, nil, srv.addr())
	ctx, cancel := context.WithTimeout(context.Background(), generous)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	cands, res := make([]fcap.Candidate, 100), &client.CheckResult{}
	for i := range cands {
		cands[i] = fcap.Candidate{Caps: []fcap.Cap{{Scope: "campaign", ID: fmt.Sprint("c", i), Limit: 5, Window: 24 * time.Hour}}}
	}
	check := func() {
		if err := c.CheckInto(ctx, "viewer-1", cands, res, client.At(1_700_000_000_000)); err != nil || len(res.Verdicts) != 100 || res.Verdicts[0].Failed() {
			t.Fatalf("check: %v, %d verdicts", err, len(res.Verdicts))
		}
	}
	check() // the first call sizes the result
	if n := testing.AllocsPerRun(200, check); n > 1 {
		t.Fatalf("%v allocations per CheckInto, want at most 1", n)
	}
}

package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/proto"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// fakeNode is a one-member "cluster" speaking the wire protocol, whose
// answers a test scripts: handle returns the response to send, or nil to
// stay silent (a slow node).
type fakeNode struct {
	ln     net.Listener
	handle func(hdr proto.Header, body []byte) proto.Message
	// topo, when set (under mu), is the topology the node serves; else
	// it names itself the only member.
	topo func() *proto.Topology
	// deafBefore, when set (under mu), makes connections accepted before
	// it read data requests and never answer them (a stuck node, or a
	// stream that lost bytes), while topology requests still get answers.
	deafBefore time.Time
	// muteUntil, when set (under mu), makes every connection ignore data
	// requests until then (a node stalled for a moment).
	muteUntil time.Time
	wg        sync.WaitGroup
	mu        sync.Mutex
	conns     []net.Conn
}

// startRecordFake is a fake node that answers Record frames only, with
// what answer returns for each (nil: no answer); a Record that does not
// decode gets an Error.
func startRecordFake(t *testing.T, answer func(m *proto.Record) proto.Message) *fakeNode {
	t.Helper()
	return startFake(t, func(hdr proto.Header, body []byte) proto.Message {
		if hdr.Type != proto.TypeRecord {
			return nil
		}
		var m proto.Record
		if err := proto.Decode(body, &m); err != nil {
			return proto.NewError(err, 0)
		}
		return answer(&m)
	})
}

func startFake(t *testing.T, handle func(proto.Header, []byte) proto.Message) *fakeNode {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeNode{ln: ln, handle: handle}
	f.wg.Add(1)
	go f.accept()
	t.Cleanup(f.close)
	return f
}

func (f *fakeNode) addr() string { return f.ln.Addr().String() }

func (f *fakeNode) accept() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		accepted := time.Now()
		f.mu.Lock()
		f.conns = append(f.conns, c)
		f.mu.Unlock()
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			f.serve(c, accepted)
		}()
	}
}

func (f *fakeNode) serve(c net.Conn, accepted time.Time) {
	defer c.Close()
	r := proto.NewReader(c, 0)
	var mu sync.Mutex
	for {
		hdr, body, err := r.Next()
		if err != nil {
			return
		}
		var resp proto.Message
		switch {
		case hdr.Type == proto.TypeHello:
			resp = &proto.HelloResult{} // a node without tokens
		case hdr.Type == proto.TypeTopologyRequest:
			resp = f.topology()
		case !f.deaf(accepted):
			resp = f.handle(hdr, body)
		}
		if resp == nil {
			continue
		}
		b, err := proto.AppendFrame(nil, hdr.ID, resp)
		if err != nil {
			panic(err)
		}
		mu.Lock()
		c.Write(b)
		mu.Unlock()
	}
}

func (f *fakeNode) deaf(accepted time.Time) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return accepted.Before(f.deafBefore) || time.Now().Before(f.muteUntil)
}

func (f *fakeNode) topology() *proto.Topology {
	f.mu.Lock()
	topo := f.topo
	f.mu.Unlock()
	if topo != nil {
		return topo()
	}
	const partitions = 7
	owners := make([]uint16, partitions)
	return &proto.Topology{Epoch: 42, Partitions: partitions, Replicas: 1,
		Members: []proto.Member{{Name: "fake", Addr: f.addr(), State: 2, Incarnation: 1}}, Owners: owners}
}

func (f *fakeNode) close() {
	f.ln.Close()
	f.mu.Lock()
	for _, c := range f.conns {
		c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
}

// generous is the deadline of every call, dial and Record batch a test
// makes unless the test is about deadlines: a busy machine running the
// race detector may take far longer than the client's defaults (a 5 ms
// call, a 250 ms dial or batch) to answer, and a call that fails open
// there is a verdict where the test expects the node's answer.
const generous = 10 * time.Second

// newClient builds a client with generous deadlines (see generous); a
// test about deadlines sets its own in mutate.
func newClient(t testing.TB, mutate func(*client.Config), seeds ...string) *client.Client {
	t.Helper()
	cfg := client.DefaultConfig(seeds...)
	cfg.Logger = quiet
	cfg.Timeout, cfg.DialTimeout, cfg.RecordTimeout = generous, generous, generous
	if mutate != nil {
		mutate(&cfg)
	}
	c, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c.Close(ctx)
	})
	return c
}

var (
	soft   = fcap.Cap{Scope: "campaign", ID: "soft", Limit: 3, Window: time.Second}
	strict = fcap.Cap{Scope: "campaign", ID: "strict", Limit: 3, Window: time.Second, Mode: fcap.Strict}
)

// deadCluster returns an address nothing listens on.
func deadCluster(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// shortDial is for clients of a dead cluster: New waits up to twice
// DialTimeout for a seed to answer, and none will.
func shortDial(c *client.Config) { c.DialTimeout = 10 * time.Millisecond }

// TestNeverReachedClusterSaysSoOnEveryCall: a client that has never
// reached its cluster (here nothing listens at its seed: a typo) gives
// the failure policy's verdicts, soft failing open and strict closed, and
// with them an error wrapping ErrUnavailable that names the seed and
// what answered there, on every call; Record queues the impression and
// says so too; the gauge an alert watches reads 0. (It used to answer
// every call with err == nil, as for a cluster that is merely slow.)
func TestNeverReachedClusterSaysSoOnEveryCall(t *testing.T) {
	reg := prometheus.NewRegistry()
	seed := deadCluster(t)
	c := newClient(t, func(c *client.Config) { shortDial(c); c.Registerer = reg; c.RecordAttempts = 1 }, seed)
	cands := []fcap.Candidate{{Caps: []fcap.Cap{soft}}, {Caps: []fcap.Cap{soft, strict}}}
	// On a busy machine the first dial may still be under way when New
	// returns ("connecting"); what it found is in the error once it failed.
	for deadline := time.Now().Add(generous); ; time.Sleep(5 * time.Millisecond) {
		_, err := c.Check(context.Background(), "v", cands)
		var de *client.DialError
		if errors.As(err, &de) && de.Addr == seed && de.Found == client.FoundNothing && strings.Contains(err.Error(), "seed "+seed+": nothing answered") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Check: %v; want a DialError of seed %s saying nothing answered", err, seed)
		}
	}
	wantErr := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, client.ErrUnavailable) || !strings.Contains(err.Error(), "never reached") || !strings.Contains(err.Error(), "seed "+seed+": ") {
			t.Errorf("%s: %v; want ErrUnavailable naming seed %s", what, err, seed)
		}
	}
	before := c.Stats()
	for i := range 2 { // every call, not only the first
		res, err := c.Check(context.Background(), "v", cands)
		wantErr(fmt.Sprint("Check ", i), err)
		if v := res.Verdicts[0]; !v.Allowed || !v.FailOpen {
			t.Errorf("soft candidate: %+v, want allowed and marked fail-open", v)
		}
		if v := res.Verdicts[1]; v.Allowed || !v.FailClosed {
			t.Errorf("strict candidate: %+v, want denied and marked fail-closed", v)
		}
	}
	v, err := c.Allow(context.Background(), "v", []fcap.Cap{soft})
	wantErr("Allow", err)
	if !v.FailOpen || !v.Allowed {
		t.Errorf("Allow = %+v; want fail-open", v)
	}
	v, rsv, err := c.Reserve(context.Background(), "v", fcap.Candidate{Caps: []fcap.Cap{strict}}, time.Minute)
	wantErr("Reserve", err)
	if !v.FailClosed || v.Allowed || rsv.ID != 0 {
		t.Errorf("Reserve = %+v, %+v; want fail-closed and no reservation", v, rsv)
	}
	wantErr("Record", c.Record("v", fcap.Impression{ID: "i", Caps: []fcap.Cap{soft}}))
	_, err = c.Resolve(context.Background(), "d")
	wantErr("Resolve", err)
	st := c.Stats()
	if st.FailOpen-before.FailOpen != 3 || st.FailClosed-before.FailClosed != 3 || st.FailedOver-before.FailedOver != 4 || st.RecordsQueued != 1 || st.Reached {
		t.Errorf("stats %+v, before the calls %+v: want 3 more fail-open verdicts, 3 fail-closed, 4 failed-over calls, 1 impression queued, not reached", st, before)
	}
	if g := gauge(t, reg, "fcap_client_cluster_reached"); g != 0 {
		t.Errorf("fcap_client_cluster_reached = %v, want 0", g)
	}
}

// TestReachedClusterFailsOpenQuietly: once a node has answered, a
// cluster that cannot answer in time is the failure policy's business
// alone: verdicts marked FailOpen and no error, as ever.
func TestReachedClusterFailsOpenQuietly(t *testing.T) {
	reg := prometheus.NewRegistry()
	f := startFake(t, func(proto.Header, []byte) proto.Message { return nil })
	c := newClient(t, func(c *client.Config) { c.Registerer = reg; c.Timeout = 50 * time.Millisecond; c.RecordAttempts = 1 }, f.addr())
	ctx, cancel := context.WithTimeout(context.Background(), generous)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	if g := gauge(t, reg, "fcap_client_cluster_reached"); g != 1 {
		t.Errorf("fcap_client_cluster_reached = %v after WaitReady, want 1", g)
	}
	if a, n := gauge(t, reg, "fcap_client_active_nodes"), gauge(t, reg, "fcap_client_connected_nodes"); a != 1 || n != 1 {
		t.Errorf("active %v, connected %v nodes after WaitReady, want 1 and 1", a, n)
	}
	f.close() // the node dies
	res, err := c.Check(context.Background(), "v", []fcap.Candidate{{Caps: []fcap.Cap{soft}}})
	if err != nil || !res.Verdicts[0].FailOpen {
		t.Fatalf("Check of a reached cluster gone quiet: %+v, %v; want fail-open and no error", res.Verdicts, err)
	}
	if err := c.Record("v", fcap.Impression{ID: "i", Caps: []fcap.Cap{soft}}); err != nil {
		t.Errorf("Record on a reached cluster gone quiet: %v, want queued and no error", err)
	}
	if st := c.Stats(); !st.Reached {
		t.Errorf("stats %+v: want reached", st)
	}
	for deadline := time.Now().Add(generous); gauge(t, reg, "fcap_client_connected_nodes") != 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("fcap_client_connected_nodes stayed at 1 with its node gone")
		}
	}
}

// gauge reads an unlabelled gauge from reg.
func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetGauge().GetValue()
		}
	}
	t.Fatalf("no gauge %s", name)
	return 0
}

func TestSlowNodeFailsOpenAtTheDeadline(t *testing.T) {
	f := startFake(t, func(proto.Header, []byte) proto.Message { return nil }) // never answers
	c := newClient(t, func(c *client.Config) { c.Timeout = 20 * time.Millisecond }, f.addr())
	ctx, cancel := context.WithTimeout(context.Background(), generous)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	res, err := c.Check(context.Background(), "v", []fcap.Candidate{{Caps: []fcap.Cap{soft}}})
	took := time.Since(start)
	if err != nil || !res.Verdicts[0].FailOpen {
		t.Fatalf("Check = %+v, %v; want fail-open", res.Verdicts, err)
	}
	// Not a speed target: a correctness bound with generous slack for a
	// busy machine (a goroutine there may wait a second for a core). The
	// call must end by its 20ms deadline, not hang on a node that never
	// answers.
	if took > generous/2 {
		t.Errorf("Check took %v with a 20ms deadline", took)
	}
	// The caller's context bounds it too.
	short, cancel2 := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel2()
	if res, err := c.Check(short, "v", []fcap.Candidate{{Caps: []fcap.Cap{soft}}}); err != nil || !res.Verdicts[0].FailOpen {
		t.Fatalf("Check with a 1ms context = %+v, %v", res, err)
	}
}

func TestBadRequestIsAnErrorNotAVerdict(t *testing.T) {
	f := startFake(t, func(hdr proto.Header, _ []byte) proto.Message {
		return &proto.Error{Code: proto.CodeBadRequest, Message: "cap 0: limit must be positive", Epoch: 42}
	})
	c := newClient(t, nil, f.addr())
	ctx, cancel := context.WithTimeout(context.Background(), generous)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	_, err := c.Allow(context.Background(), "v", []fcap.Cap{soft})
	if !errors.Is(err, client.ErrBadRequest) {
		t.Fatalf("err = %v, want ErrBadRequest", err)
	}
}

// TestRecordRetriesWithBackoff: the owner refuses the first attempts as
// overloaded; the impression goes through later, once.
func TestRecordRetriesWithBackoff(t *testing.T) {
	var attempts atomic.Int32
	var got sync.Map
	f := startRecordFake(t, func(m *proto.Record) proto.Message {
		res := &proto.RecordResult{Epoch: 42}
		for _, it := range m.Items {
			if attempts.Add(1) <= 3 {
				res.Results = append(res.Results, proto.ItemResult{Code: proto.CodeOverloaded})
				continue
			}
			got.Store(it.Impression.ID, true)
			res.Results = append(res.Results, proto.ItemResult{Status: fcap.Recorded})
		}
		return res
	})
	c := newClient(t, func(c *client.Config) { c.RecordRetryMin = time.Millisecond }, f.addr())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Only the owner's refusals may count as retries: an impression sent
	// before the client knows the topology is retried too.
	if err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Record("v", fcap.Impression{ID: "imp-1", Time: 5, Caps: []fcap.Cap{soft}}); err != nil {
		t.Fatal("Record refused")
	}
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := got.Load("imp-1"); !ok || attempts.Load() != 4 {
		t.Fatalf("after Flush: delivered=%v after %d attempts, want delivered on the 4th", ok, attempts.Load())
	}
	if st := c.Stats(); st.RecordRetries != 3 || st.RecordsAcked != 1 || st.RecordsDropped != 0 || st.RecordQueue != 0 {
		t.Errorf("stats %+v", st)
	}
}

func TestRecordDropsAndCountsWhenFull(t *testing.T) {
	c := newClient(t, func(c *client.Config) {
		shortDial(c)
		c.RecordQueue = 4
		c.RecordAttempts = 2
		c.RecordRetryMin = time.Millisecond
		c.RecordRetryMax = 2 * time.Millisecond
	}, deadCluster(t))
	accepted := 0
	for i := range 10 {
		switch err := c.Record("v", fcap.Impression{ID: fmt.Sprint(i), Time: 1, Caps: []fcap.Cap{soft}}); {
		case errors.Is(err, client.ErrUnavailable): // queued; the cluster was never reached
			accepted++
		case !errors.Is(err, client.ErrQueueFull):
			t.Fatalf("Record refused with %v, want ErrQueueFull", err)
		}
	}
	if accepted > 4 {
		t.Fatalf("accepted %d with a queue of 4", accepted)
	}
	// Nothing can be delivered: every accepted impression is dropped
	// after its attempts, and the queue drains.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if st := c.Stats(); st.RecordsDropped != 10 || st.RecordsQueued != int64(accepted) {
		t.Errorf("stats %+v: want all 10 dropped (queue full or attempts spent)", st)
	}
}

func TestCloseIsIdempotentAndDropsLateRecords(t *testing.T) {
	cfg := client.DefaultConfig(deadCluster(t))
	cfg.Logger = quiet
	c, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	c.Close(ctx)
	c.Close(ctx)
	if err := c.Record("v", fcap.Impression{ID: "late", Time: 1, Caps: []fcap.Cap{soft}}); !errors.Is(err, client.ErrClosed) {
		t.Errorf("Record after Close = %v, want ErrClosed", err)
	}
	// A closed client gives no verdict, not even a fail-open one.
	if _, err := c.Check(context.Background(), "v", []fcap.Candidate{{Caps: []fcap.Cap{soft}}}); !errors.Is(err, client.ErrClosed) {
		t.Errorf("Check after Close = %v, want ErrClosed", err)
	}
	if v, err := c.Allow(context.Background(), "v", []fcap.Cap{soft}); !errors.Is(err, client.ErrClosed) || v.Allowed {
		t.Errorf("Allow after Close = %+v, %v; want ErrClosed", v, err)
	}
	if v, _, err := c.Reserve(context.Background(), "v", fcap.Candidate{Caps: []fcap.Cap{strict}}, time.Minute); !errors.Is(err, client.ErrClosed) || v.Allowed {
		t.Errorf("Reserve after Close = %+v, %v; want ErrClosed", v, err)
	}
	if err := c.Release(context.Background(), client.Reservation{Viewer: "v", ID: 1}); !errors.Is(err, client.ErrClosed) {
		t.Errorf("Release after Close = %v, want ErrClosed", err)
	}
	if _, err := c.Link(context.Background(), "d", "v"); !errors.Is(err, client.ErrClosed) {
		t.Errorf("Link after Close = %v, want ErrClosed", err)
	}
}

func TestCallAndNodeStatus(t *testing.T) {
	f := startFake(t, func(hdr proto.Header, _ []byte) proto.Message {
		switch hdr.Type {
		case proto.TypeStatusRequest:
			return &proto.Status{Name: "fake", State: 2, Primaries: 7, UnderReplicated: 1}
		default:
			return &proto.Error{Code: proto.CodeUnsupported, Message: "no drain here"}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := client.NodeStatus(ctx, f.addr())
	if err != nil || st.Name != "fake" || st.Primaries != 7 || st.UnderReplicated != 1 {
		t.Fatalf("NodeStatus = %+v, %v", st, err)
	}
	var res proto.DrainResult
	if err := client.Call(ctx, f.addr(), &proto.Drain{}, &res); !errors.Is(err, proto.ErrUnsupported) || !strings.Contains(err.Error(), "no drain here") {
		t.Errorf("an Error answer: %v; want ErrUnsupported with its message", err)
	}
	if _, err := client.NodeStatus(ctx, deadCluster(t)); err == nil || !strings.Contains(err.Error(), "cannot reach") {
		t.Errorf("unreachable node: %v", err)
	}
}

package node_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/internal/testwait"
	"github.com/fcap-io/fcap/node"
	"github.com/fcap-io/fcap/node/nodetest"
	"github.com/fcap-io/fcap/proto"
	"github.com/fcap-io/fcap/ring"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestClusterRoutesEveryViewerToItsOwner(t *testing.T) {
	nodes := settledCluster(t, "node", 3)
	c := newClient(t, nodes)
	cap1 := fcap.Cap{Scope: "campaign", ID: "c", Limit: 2, Window: time.Second}
	for i := range 200 {
		viewer := fmt.Sprint("viewer-", i)
		for k, want := range []bool{true, true, false} {
			v, err := c.Allow(context.Background(), viewer, []fcap.Cap{cap1}, client.At(int64(k)))
			if err != nil || v.Failed() || v.Allowed != want {
				t.Fatalf("%s allow %d = %+v, %v; want allowed=%v from the cluster", viewer, k, v, err, want)
			}
		}
	}
	// Each viewer's counters live on exactly its owners (the primary,
	// and its backup by replication), with the same state. The ring is
	// read again on every poll: on a busy machine gossip may suspect a
	// slow node and move partitions away and back meanwhile.
	byName := map[string]*node.Node{}
	for _, nd := range nodes {
		byName[nd.Name()] = nd
	}
	var why string
	holders := func() bool {
		r := nodes[0].Ring()
		for _, nd := range nodes[1:] {
			if nd.Ring().Epoch() != r.Epoch() {
				why = "the nodes' rings differ"
				return false
			}
		}
		for i := range 200 {
			viewer := fmt.Sprint("viewer-", i)
			_, owners := r.Lookup(viewer)
			want, ok := byName[r.Member(owners[0]).Name].Engine().Viewer(viewer)
			if !ok {
				why = viewer + ": its primary does not hold it"
				return false
			}
			for _, nd := range nodes {
				got, has := nd.Engine().Viewer(viewer)
				rank := r.Rank(pOf(r, viewer), nd.Name())
				if has != (rank >= 0) || has && fmt.Sprint(got) != fmt.Sprint(want) {
					why = fmt.Sprintf("%s on %s (rank %d): holds=%v %v, primary has %v", viewer, nd.Name(), rank, has, got, want)
					return false
				}
			}
		}
		return true
	}
	for deadline := time.Now().Add(60 * time.Second); !holders(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("viewers are not held by exactly their owners: %s", why)
		}
	}
}

func pOf(r *ring.Ring, viewer string) int {
	p, _ := r.Lookup(viewer)
	return p
}

// TestNotOwnerRefreshesAndRetries: a client whose topology predates a new
// member gets NotOwner for the viewers that moved, refreshes, retries
// once, and the caller never sees it.
func TestNotOwnerRefreshesAndRetries(t *testing.T) {
	nodes := settledCluster(t, "node", 2)
	// No periodic refresh: the client must learn of the new node from
	// the NotOwner answer.
	c := newClient(t, nodes[:1], func(c *client.Config) { c.RefreshInterval = time.Hour })
	cfg := node.DefaultLocalConfig("node-late")
	cfg.Logger = nodetest.Quiet
	cfg.Membership.Seeds = []string{nodes[0].GossipAddr()}
	late, err := node.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer late.Shutdown(context.Background())
	// Active in every ring, and ready: holding the partitions it owns
	// (until then it refuses their requests, and the call would fail
	// open however the client routed it).
	testwait.Eventually(t, 60*time.Second, func() bool {
		for _, nd := range append(nodes, late) {
			r := nd.Ring()
			i, ok := r.Find("node-late")
			if !ok || r.Member(i).State != ring.Active {
				return false
			}
		}
		return late.Ready()
	}, "the third node did not join, turn active and get ready")
	if got := len(c.Ring().Members()); got != 2 {
		t.Fatalf("the client already knows %d members; the test needs it stale", got)
	}
	// Find a viewer the new node owns: the client still routes it to an
	// old owner.
	r := late.Ring()
	var viewer string
	for i := 0; viewer == "" && i < 100000; i++ {
		v := fmt.Sprint("moved-", i)
		if _, owners := r.Lookup(v); len(owners) > 0 && r.Member(owners[0]).Name == "node-late" {
			viewer = v
		}
	}
	if viewer == "" {
		t.Fatal("the new node owns no viewer")
	}
	cap1 := fcap.Cap{Scope: "campaign", ID: "c", Limit: 1, Window: time.Second}
	v, err := c.Allow(context.Background(), viewer, []fcap.Cap{cap1}, client.At(0))
	if err != nil || v.Failed() || !v.Allowed {
		t.Fatalf("Allow = %+v, %v; want an answer from the new owner", v, err)
	}
	if st := c.Stats(); st.NotOwnerRefreshes < 1 {
		t.Errorf("stats %+v: want a NotOwner refresh", st)
	}
	if _, ok := late.Engine().Viewer(viewer); !ok {
		t.Error("the impression did not land on the new owner")
	}
}

func TestBadFramesGetClearErrors(t *testing.T) {
	nodes := settledCluster(t, "node", 1, func(c *node.Config) { c.MaxFrame = 4096 })
	nd := nodes[0]
	dial := func() (net.Conn, *proto.Reader) {
		c, err := net.Dial("tcp", nd.DataAddr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(10 * time.Second))
		return c, proto.NewReader(c, proto.DefaultMaxFrame)
	}
	expectError := func(r *proto.Reader, code proto.Code) {
		t.Helper()
		hdr, body, err := r.Next()
		if err != nil {
			t.Fatalf("reading the answer: %v", err)
		}
		var e proto.Error
		if hdr.Type != proto.TypeError || proto.Decode(body, &e) != nil || e.Code != code {
			t.Fatalf("answer %v %+v, want Error code %v", hdr.Type, e, code)
		}
	}
	ping := func(c net.Conn, r *proto.Reader) {
		t.Helper()
		b, _ := proto.AppendFrame(nil, 99, &proto.Ping{})
		c.Write(b)
		if hdr, _, err := r.Next(); err != nil || hdr.Type != proto.TypePong || hdr.ID != 99 {
			t.Fatalf("ping after a bad request: %v %v", hdr, err)
		}
	}

	// A 4 GiB length prefix: refused before allocation, connection closed.
	c, r := dial()
	c.Write([]byte{0xff, 0xff, 0xff, 0xff})
	expectError(r, proto.CodeBadRequest)
	if _, _, err := r.Next(); err == nil {
		t.Fatal("the connection stayed open after a 4 GiB length")
	}

	// An unknown message type: an error, and the connection goes on.
	c, r = dial()
	frame := make([]byte, 16)
	binary.BigEndian.PutUint32(frame, 12)
	frame[4], frame[5] = proto.Version, 200
	c.Write(frame)
	expectError(r, proto.CodeUnsupported)
	ping(c, r)

	// A body of the wrong msgpack types: bad request, connection goes on.
	c, r = dial()
	bad, _ := proto.AppendFrame(nil, 7, &proto.Ping{})
	bad[5] = byte(proto.TypeCheck)
	c.Write(bad)
	expectError(r, proto.CodeBadRequest)
	ping(c, r)

	// An invalid cap: bad request from the engine, nothing stored.
	c, r = dial()
	b, _ := proto.AppendFrame(nil, 8, &proto.Allow{Viewer: "v", Caps: []fcap.Cap{{Scope: "campaign", ID: "c", Limit: 0, Window: 10 * time.Millisecond}}})
	c.Write(b)
	expectError(r, proto.CodeBadRequest)
	if st := nd.Engine().Stats(); st.Viewers != 0 {
		t.Errorf("an invalid request stored state: %+v", st)
	}
	ping(c, r)
}

func TestConnectionLimit(t *testing.T) {
	nodes := settledCluster(t, "node", 1, func(c *node.Config) { c.MaxConns = 2 })
	var open []net.Conn
	defer func() {
		for _, c := range open {
			c.Close()
		}
	}()
	for range 2 {
		c, err := net.Dial("tcp", nodes[0].DataAddr())
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, c)
		b, _ := proto.AppendFrame(nil, 1, &proto.Ping{})
		c.Write(b)
		if _, _, err := proto.NewReader(c, 0).Next(); err != nil {
			t.Fatal(err)
		}
	}
	c, err := net.Dial("tcp", nodes[0].DataAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	hdr, body, err := proto.NewReader(bufio.NewReader(c), 0).Next()
	var e proto.Error
	if err != nil || hdr.Type != proto.TypeError || proto.Decode(body, &e) != nil || !errors.Is(&e, proto.ErrOverloaded) {
		t.Fatalf("third connection: %v %+v %v, want ErrOverloaded", hdr, e, err)
	}
}

func TestHealthAndReadiness(t *testing.T) {
	nodes := settledCluster(t, "node", 1)
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		resp, err := http.Get("http://" + nodes[0].HTTPAddr() + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("%s: %d", path, resp.StatusCode)
		}
		if path != "/metrics" {
			continue
		}
		// The figures operators chart and alert on (issue 7's list).
		epoch := fmt.Sprintf(`fcap_ring_epoch_info{epoch="%016x"} 1`, nodes[0].Ring().Epoch())
		for _, want := range []string{epoch, "fcap_engine_impressions ", "fcap_engine_reservations ", "fcap_engine_keys ",
			"fcap_engine_bytes_per_key ", "fcap_ring_partitions_owned{rank=\"primary\"}", "fcap_replication_lag_seconds ",
			"fcap_partitions_handing_over ", "fcap_node_connections ", "fcap_ring_members{state=\"active\"} 1"} {
			if !strings.Contains(string(b), want) {
				t.Errorf("/metrics lacks %q", want)
			}
		}
	}
}

// TestShutdownAnswersWhatItRead: a graceful shutdown answers requests a
// client already sent, then closes; Shutdown twice is safe.
func TestShutdownAnswersWhatItRead(t *testing.T) {
	cfg := node.DefaultLocalConfig("solo")
	cfg.Logger = nodetest.Quiet
	nd, err := node.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, 10*time.Second, nd.Ready, "the node did not turn ready")
	c, err := net.Dial("tcp", nd.DataAddr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var batch []byte
	for i := range 50 {
		batch, _ = proto.AppendFrame(batch, uint64(i), &proto.Allow{Viewer: fmt.Sprint("v", i), Now: 1, HasNow: true,
			Caps: []fcap.Cap{{Scope: "campaign", ID: "c", Limit: 1, Window: 10 * time.Millisecond}}})
	}
	if _, err := c.Write(batch); err != nil {
		t.Fatal(err)
	}
	r := proto.NewReader(c, 0)
	if hdr, _, err := r.Next(); err != nil || hdr.Type != proto.TypeAllowResult {
		t.Fatalf("first answer: %v %v", hdr, err)
	}
	// The first answer does not mean the node has read the other 49: the
	// pre-authentication poller hands the connection over with the first
	// frame alone, and its reader takes the rest from the socket after
	// that answer is written. Shut down once every request was read and
	// handled, so what is asserted is that their answers go out.
	testwait.Eventually(t, 10*time.Second, func() bool { return nd.Engine().Stats().Viewers == 50 },
		"the node never handled the 50 requests sent")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := nd.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := nd.Shutdown(ctx); err != nil {
		t.Fatalf("second Shutdown: %v", err)
	}
	answered := 1
	for {
		hdr, _, err := r.Next()
		if err != nil {
			break
		}
		if hdr.Type == proto.TypeAllowResult {
			answered++
		}
	}
	if answered != 50 {
		t.Errorf("answered %d of the 50 requests sent before shutdown", answered)
	}
	if st := nd.Engine().Stats(); st.Viewers != 50 {
		t.Errorf("%d viewers recorded, want 50", st.Viewers)
	}
}

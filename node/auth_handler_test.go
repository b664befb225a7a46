package node

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/node/security"
	"github.com/fcap-io/fcap/proto"
)

// answer decodes the single frame a handler appended.
func answer(t *testing.T, out []byte) (proto.Header, error) {
	t.Helper()
	body := out[proto.HeaderSize:]
	h := proto.Header{Type: proto.Type(out[5])}
	if h.Type == proto.TypeError {
		var e proto.Error
		if err := proto.Decode(body, &e); err != nil {
			t.Fatal(err)
		}
		return h, &e
	}
	return h, nil
}

func authNode(t *testing.T) *Node {
	t.Helper()
	cfg := DefaultLocalConfig("auth")
	cfg.HTTPAddr = ""
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.Security.Tokens = map[string]security.Role{"adserver-token-0001": security.RoleAdServer, "peer-token-00000001": security.RolePeer}
	cfg.Security.PeerToken = "peer-token-00000001"
	n, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Shutdown(context.Background()) })
	waitOwns(t, n)
	return n
}

// waitOwns waits until the one-node cluster n serves viewer "v".
func waitOwns(t *testing.T, n *Node) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !n.view.Load().owns("v") || n.repl.Syncing(partitionOf(n.view.Load(), "v")); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the node never served viewer v")
		}
	}
}

func request(t testing.TB, m proto.Message) (proto.Header, []byte) {
	frame, err := proto.AppendFrame(nil, 1, m)
	if err != nil {
		t.Fatal(err)
	}
	return proto.Header{Version: proto.Version, Type: m.Type(), ID: 1}, frame[proto.HeaderSize:]
}

// TestHandlerAuth drives one connection's handler: nothing before Hello,
// a role's requests after it, a wrong token hangs up.
func TestHandlerAuth(t *testing.T) {
	n := authNode(t)
	caps := []fcap.Cap{{Scope: "campaign", ID: "c", Limit: 1, Window: time.Second}}
	allowHdr, allowBody := request(t, &proto.Allow{Viewer: "v", Now: 1, HasNow: true, Caps: caps})

	h := newHandler(n)
	if _, err := answer(t, h.handle(nil, allowHdr, allowBody)); !errors.Is(err, proto.ErrUnauthenticated) {
		t.Fatalf("allow before hello: %v", err)
	}
	hh, hb := request(t, &proto.Hello{Token: "adserver-token-0001"})
	if typ, err := answer(t, h.handle(nil, hh, hb)); err != nil || typ.Type != proto.TypeHelloResult || h.hangup {
		t.Fatalf("hello: %v %v", typ.Type, err)
	}
	if typ, err := answer(t, h.handle(nil, allowHdr, allowBody)); err != nil || typ.Type != proto.TypeAllowResult {
		t.Fatalf("allow after hello: %v %v", typ.Type, err)
	}
	sh, sb := request(t, &proto.StatusRequest{})
	if _, err := answer(t, h.handle(nil, sh, sb)); !errors.Is(err, proto.ErrPermissionDenied) {
		t.Fatalf("status as adserver: %v", err)
	}

	bad := newHandler(n)
	hh, hb = request(t, &proto.Hello{Token: "adserver-token-0002"})
	if _, err := answer(t, bad.handle(nil, hh, hb)); !errors.Is(err, proto.ErrUnauthenticated) || !bad.hangup {
		t.Fatalf("wrong token: %v, hangup %v", err, bad.hangup)
	}
	// Garbage in a Hello is a bad request, and hangs up too.
	bad = newHandler(n)
	if _, err := answer(t, bad.handle(nil, proto.Header{Version: proto.Version, Type: proto.TypeHello, ID: 1}, []byte{0xc1})); !errors.Is(err, proto.ErrBadRequest) || !bad.hangup {
		t.Fatalf("garbage hello: %v, hangup %v", err, bad.hangup)
	}
}

// TestAuthAddsNoAllocation: an Allow does not allocate, on an
// authenticated connection as on a node without tokens (what
// BenchmarkHandleAllow measures): the role check is a bit test. Under
// the race detector, whose sync.Pool drops items, it checks only that
// tokens add nothing.
func TestAuthAddsNoAllocation(t *testing.T) {
	caps := []fcap.Cap{{Scope: "campaign", ID: "c", Limit: 5, Window: time.Second}}
	bodies := make([][]byte, 64)
	var hdr proto.Header
	for i := range bodies {
		hdr, bodies[i] = request(t, &proto.Allow{Viewer: "v", Now: int64(i * 300), HasNow: true, Caps: caps})
	}
	allocs := func(n *Node, h *handler) float64 {
		out := make([]byte, 0, 64<<10)
		i := 0
		for range 200 { // warm up: the viewer's counters exist
			out = h.handle(out[:0], hdr, bodies[i&63])
			i++
		}
		// The least of a few runs: under the race detector sync.Pool
		// drops items at random, which adds allocations to one run or
		// another but not to every run.
		least := math.Inf(1)
		for range 5 {
			least = min(least, testing.AllocsPerRun(500, func() {
				out = h.handle(out[:0], hdr, bodies[i&63])
				i++
			}))
		}
		return least
	}
	plain := DefaultLocalConfig("plain")
	plain.HTTPAddr = ""
	plain.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	pn, err := Start(plain)
	if err != nil {
		t.Fatal(err)
	}
	defer pn.Shutdown(context.Background())
	waitOwns(t, pn)
	base := allocs(pn, newHandler(pn))

	an := authNode(t)
	h := newHandler(an)
	hh, hb := request(t, &proto.Hello{Token: "adserver-token-0001"})
	h.handle(nil, hh, hb)
	got := allocs(an, h)
	if got > base || (!raceEnabled && got != 0) {
		t.Errorf("an authenticated Allow allocates %v times, %v without tokens", got, base)
	}
}

// TestClientPingMakesNoPromise: a Ping naming a member, sent on an ad
// server's connection, is answered as a client's: the node promises no
// epoch (a promise would keep it from confirming the next ring to its
// peers, so a client could stall strict writes cluster-wide). The same
// Ping on a peer's connection does make one.
func TestClientPingMakesNoPromise(t *testing.T) {
	n := authNode(t)
	epoch := n.view.Load().ring.Epoch()
	for _, tc := range []struct {
		token string
		want  int
	}{{"adserver-token-0001", 0}, {"peer-token-00000001", 1}} {
		h := newHandler(n)
		hh, hb := request(t, &proto.Hello{Token: tc.token})
		if _, err := answer(t, h.handle(nil, hh, hb)); err != nil {
			t.Fatalf("hello: %v", err)
		}
		ph, pb := request(t, &proto.Ping{From: "auth", FromEpoch: epoch})
		if typ, err := answer(t, h.handle(nil, ph, pb)); err != nil || typ.Type != proto.TypePong {
			t.Fatalf("ping: %v %v", typ.Type, err)
		}
		if got := n.promises.Len(); got != tc.want {
			t.Fatalf("after a ping on a connection with %s: %d promises, want %d", tc.token, got, tc.want)
		}
	}
}

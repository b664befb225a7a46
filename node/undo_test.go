package node_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/internal/testwait"
	"github.com/fcap-io/fcap/node"
	"github.com/fcap-io/fcap/node/nodetest"
	"github.com/fcap-io/fcap/proto"
)

// TestLateStrictGrantIsGivenBack: a strict Allow the node answered in
// time, whose answer reached the client only after the call gave up,
// must not use up a slot. The client connects through a proxy that holds
// every answer from the node; the call gives up only once the node has
// answered, and the proxy lets the answer through only after the call
// returned, so the grant is late whatever the machine's speed.
func TestLateStrictGrantIsGivenBack(t *testing.T) {
	px := newStallProxy(t, true)
	reg := prometheus.NewRegistry()
	cfg := node.DefaultLocalConfig("node-0")
	cfg.Logger = nodetest.Quiet
	cfg.Registerer, cfg.Gatherer = reg, reg
	cfg.DataAddr = freeAddr(t)
	cfg.AdvertiseDataAddr = px.addr()
	px.setTarget(cfg.DataAddr)
	nd := nodetest.Start(t, cfg)
	testwait.Eventually(t, 20*time.Second, nd.Ready, "the node is not ready")
	c := newClient(t, []*node.Node{nd}, func(cfg *client.Config) { cfg.Timeout = 10 * time.Second })

	strictCap := fcap.Cap{Scope: "campaign", ID: "contract", Limit: 2, Window: fcap.MaxWindow, Mode: fcap.Strict}
	caps := []fcap.Cap{strictCap}

	px.stall()
	ctx, cancel := context.WithCancel(context.Background())
	type result struct {
		vd  client.Verdict
		err error
	}
	done := make(chan result, 1)
	go func() {
		vd, err := c.Allow(ctx, "viewer-late", caps)
		done <- result{vd, err}
	}()
	testwait.Eventually(t, 20*time.Second, func() bool { return allowsAnswered(reg) >= 1 }, "the node did not answer the Allow")
	cancel() // the caller gives up with the grant on its way
	r := <-done
	if r.vd.Allowed {
		t.Fatalf("Allow = %+v, %v: the answer was held, the call cannot have seen it", r.vd, r.err)
	}
	px.release()

	testwait.Eventually(t, 20*time.Second, func() bool { return c.Stats().ReturnedGrants == 1 },
		"late grants %d, returned %d, want 1 returned", c.Stats().LateGrants, c.Stats().ReturnedGrants)
	// The slot is free again: the cap grants its full limit.
	for i := range 2 {
		vd, err := c.Allow(context.Background(), "viewer-late", caps)
		if err != nil || !vd.Allowed {
			t.Fatalf("Allow %d after the give-back: %+v %v, want granted", i, vd, err)
		}
	}
	if vd, err := c.Allow(context.Background(), "viewer-late", caps); err != nil || vd.Allowed {
		t.Fatalf("Allow past the cap: %+v %v, want refused", vd, err)
	}
}

// TestUndo drives Undo on the wire: it takes back exactly the strict
// grant it names, once; it never touches a soft grant; bad input is
// refused and changes nothing.
func TestUndo(t *testing.T) {
	nd := settledCluster(t, "node", 1)[0]
	rc := dialRaw(t, nd.DataAddr())
	strictCap := fcap.Cap{Scope: "campaign", ID: "contract", Limit: 2, Window: fcap.MaxWindow, Mode: fcap.Strict}
	softCap := fcap.Cap{Scope: "campaign", ID: "soft", Limit: 2, Window: fcap.MaxWindow}

	allow := func(viewer string, c fcap.Cap) proto.AllowResult {
		t.Helper()
		var res proto.AllowResult
		if err := rc.call(&proto.Allow{Viewer: viewer, Caps: []fcap.Cap{c}}, &res); err != nil {
			t.Fatalf("Allow: %v", err)
		}
		return res
	}
	undo := func(viewer string, grant uint64) (proto.UndoResult, error) {
		t.Helper()
		var res proto.UndoResult
		err := rc.call(&proto.Undo{Viewer: viewer, Grant: grant}, &res)
		return res, err
	}

	a := allow("v1", strictCap)
	b := allow("v2", strictCap) // another caller's grant on the same cap
	if !a.Verdict.Allowed || a.Grant == 0 || !b.Verdict.Allowed || b.Grant == 0 || a.Grant == b.Grant {
		t.Fatalf("strict grants %+v %+v: want granted with distinct grant ids", a, b)
	}
	// Another viewer's id, a bad viewer, id 0: refused or ignored, no change.
	if res, err := undo("v1", b.Grant); err != nil || res.Undone {
		t.Fatalf("Undo of another viewer's grant: %+v %v, want nothing undone", res, err)
	}
	if _, err := undo("", a.Grant); !errors.Is(err, proto.ErrBadRequest) {
		t.Fatalf("Undo with no viewer: %v, want a bad request", err)
	}
	if _, err := undo("v1", 0); !errors.Is(err, proto.ErrBadRequest) {
		t.Fatalf("Undo of grant 0: %v, want a bad request", err)
	}
	if res, err := undo("v1", a.Grant); err != nil || !res.Undone {
		t.Fatalf("Undo: %+v %v, want undone", res, err)
	}
	if res, err := undo("v1", a.Grant); err != nil || res.Undone {
		t.Fatalf("second Undo: %+v %v, want nothing undone", res, err)
	}
	// v1 has both slots again, v2 still one used.
	for i := range 2 {
		if r := allow("v1", strictCap); !r.Verdict.Allowed {
			t.Fatalf("v1 Allow %d after the undo: %+v, want granted", i, r)
		}
	}
	if r := allow("v1", strictCap); r.Verdict.Allowed {
		t.Fatalf("v1 Allow past the cap: %+v, want refused", r)
	}
	if r := allow("v2", strictCap); !r.Verdict.Allowed {
		t.Fatalf("v2 second Allow: %+v, want granted", r)
	}
	if r := allow("v2", strictCap); r.Verdict.Allowed {
		t.Fatalf("v2 Allow past the cap: %+v, want refused (another viewer's undo touched it)", r)
	}

	// A soft grant carries no id and cannot be undone.
	s := allow("v3", softCap)
	if !s.Verdict.Allowed || s.Grant != 0 {
		t.Fatalf("soft grant %+v: want granted without a grant id", s)
	}
	if res, err := undo("v3", a.Grant); err != nil || res.Undone {
		t.Fatalf("Undo on a soft viewer: %+v %v, want nothing undone", res, err)
	}
	if r := allow("v3", softCap); !r.Verdict.Allowed || r.Verdict.Remaining != 0 {
		t.Fatalf("second soft Allow: %+v, want granted with 0 left", r)
	}
}

// rawConn speaks the data protocol to one node, one request at a time.
type rawConn struct {
	nc net.Conn
	r  *proto.Reader
	id uint64
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &rawConn{nc: nc, r: proto.NewReader(nc, 1<<20)}
}

// call sends m and decodes the answer into res, or returns the Error
// the node answered with.
func (c *rawConn) call(m, res proto.Message) error {
	c.id++
	b, err := proto.AppendFrame(nil, c.id, m)
	if err != nil {
		return err
	}
	c.nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.nc.Write(b); err != nil {
		return err
	}
	hdr, body, err := c.r.Next()
	if err != nil {
		return err
	}
	if hdr.Type == proto.TypeError {
		var e proto.Error
		if err := proto.Decode(body, &e); err != nil {
			return err
		}
		return &e
	}
	return proto.Decode(body, res)
}

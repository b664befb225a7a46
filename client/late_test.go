package client_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/proto"
)

// TestLateGrantIsCounted: a strict Allow tells the node how long it will
// wait, and a grant that arrives after the call gave up is counted, so
// an operator sees the slots spent on ads the caller never showed.
func TestLateGrantIsCounted(t *testing.T) {
	answer := make(chan struct{})
	var budget atomic.Int64
	f := startFake(t, func(hdr proto.Header, body []byte) proto.Message {
		if hdr.Type != proto.TypeAllow {
			return nil
		}
		var m proto.Allow
		if err := proto.Decode(body, &m); err != nil {
			t.Errorf("decode: %v", err)
			return nil
		}
		budget.Store(int64(m.Budget))
		<-answer // until the caller has given up
		return &proto.AllowResult{Epoch: 42, Verdict: fcap.Verdict{Allowed: true, Blocking: -1}}
	})
	c := newClient(t, nil, f.addr())
	ready, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.WaitReady(ready); err != nil {
		t.Fatal(err)
	}
	strictCap := fcap.Cap{Scope: "campaign", ID: "contract", Limit: 3, Window: time.Second, Mode: fcap.Strict}
	ctx, cancelCall := context.WithTimeout(context.Background(), 200*time.Millisecond)
	vd, err := c.Allow(ctx, "v", []fcap.Cap{strictCap})
	cancelCall()
	close(answer)
	if err != nil || !vd.FailClosed {
		t.Fatalf("Allow = %+v, %v; want failed closed", vd, err)
	}
	// The call may give up before the node has read the request on a
	// busy machine: wait for the node to have it.
	deadline := time.Now().Add(10 * time.Second)
	for budget.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if b := time.Duration(budget.Load()); b <= 0 || b > 200*time.Millisecond {
		t.Fatalf("the request's budget is %v, want in (0, 200ms]", b)
	}
	for c.Stats().LateGrants != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("late grants %d, want 1", c.Stats().LateGrants)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestLateGrantIsGivenBackAndReported: a strict grant that arrives after
// its call gave up is given back with an Undo naming its id, and
// Config.OnGiveBack hears of it: the viewer, "returned", and a time span
// that holds the Undo's answer.
func TestLateGrantIsGivenBackAndReported(t *testing.T) {
	answer := make(chan struct{})
	var undone atomic.Uint64
	f := startFake(t, func(hdr proto.Header, body []byte) proto.Message {
		switch hdr.Type {
		case proto.TypeAllow:
			<-answer // until the caller has given up
			return &proto.AllowResult{Epoch: 42, Verdict: fcap.Verdict{Allowed: true, Blocking: -1}, Grant: 77}
		case proto.TypeUndo:
			var m proto.Undo
			if err := proto.Decode(body, &m); err != nil {
				t.Errorf("decode: %v", err)
				return nil
			}
			undone.Store(m.Grant)
			return &proto.UndoResult{Epoch: 42, Undone: m.Grant == 77 && m.Viewer == "v"}
		}
		return nil
	})
	reports := make(chan client.GiveBack, 4)
	c := newClient(t, func(cfg *client.Config) {
		cfg.OnGiveBack = func(g client.GiveBack) { reports <- g }
	}, f.addr())
	ready, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.WaitReady(ready); err != nil {
		t.Fatal(err)
	}
	strictCap := fcap.Cap{Scope: "campaign", ID: "contract", Limit: 3, Window: time.Second, Mode: fcap.Strict}
	ctx, cancelCall := context.WithTimeout(context.Background(), time.Second)
	before := time.Now()
	vd, err := c.Allow(ctx, "v", []fcap.Cap{strictCap})
	cancelCall()
	close(answer)
	if err != nil || !vd.FailClosed {
		t.Fatalf("Allow = %+v, %v; want failed closed", vd, err)
	}
	select {
	case g := <-reports:
		if g.Viewer != "v" || g.Result != "returned" || g.Start.Before(before) || g.End.Before(g.Start) {
			t.Fatalf("OnGiveBack got %+v; want viewer v, returned, a span after the call", g)
		}
		if undone.Load() != 77 {
			t.Fatalf("the node was asked to undo grant %d, want 77", undone.Load())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("OnGiveBack never heard of the late grant")
	}
}

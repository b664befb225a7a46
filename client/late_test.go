package client_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
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
	strictCap := fcap.Cap{Scope: "campaign", ID: "contract", Limit: 3, Window: 1000, Mode: fcap.Strict}
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

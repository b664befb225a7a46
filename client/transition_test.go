package client_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/proto"
)

// TestWriteWaitsOutAnOwnerInTransition: an owner that refuses an Allow
// because it is between states (a partition still arriving, a node on
// its way out) is asked again within the deadline, and the caller gets
// the owner's verdict, not a policy one. A drain costs latency only.
func TestWriteWaitsOutAnOwnerInTransition(t *testing.T) {
	for _, code := range []proto.Code{proto.CodeOverloaded, proto.CodeShuttingDown} {
		t.Run(code.String(), func(t *testing.T) {
			var asked atomic.Int32
			f := startFake(t, func(hdr proto.Header, _ []byte) proto.Message {
				if hdr.Type != proto.TypeAllow {
					return nil
				}
				if asked.Add(1) <= 3 {
					return &proto.Error{Code: code, Message: "partition not received yet", Epoch: 42}
				}
				return &proto.AllowResult{Epoch: 42, Verdict: fcap.Verdict{Allowed: true, Remaining: 2, Blocking: -1}}
			})
			c := newClient(t, nil, f.addr())
			v, err := c.Allow(context.Background(), "v", []fcap.Cap{strict})
			if err != nil {
				t.Fatal(err)
			}
			if v.Failed() || !v.Allowed || v.Remaining != 2 {
				t.Fatalf("verdict %+v after %d asks, want the owner's grant", v, asked.Load())
			}
			if n := asked.Load(); n != 4 {
				t.Fatalf("the owner was asked %d times, want 4", n)
			}
		})
	}
}

// TestTransitionRetriesStopAtTheDeadline: an owner that keeps refusing
// is asked again only while the deadline leaves room, and the caller gets
// its policy verdict in time.
func TestTransitionRetriesStopAtTheDeadline(t *testing.T) {
	var asked atomic.Int32
	f := startFake(t, func(hdr proto.Header, _ []byte) proto.Message {
		if hdr.Type != proto.TypeAllow {
			return nil
		}
		asked.Add(1)
		return &proto.Error{Code: proto.CodeOverloaded, Message: "partition not received yet", Epoch: 42}
	})
	c := newClient(t, nil, f.addr())
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	v, err := c.Allow(ctx, "v", []fcap.Cap{strict})
	if err != nil {
		t.Fatal(err)
	}
	if !v.Failed() || v.Allowed {
		t.Fatalf("verdict %+v from an owner that always refuses, want fail-closed", v)
	}
	if n := asked.Load(); n < 2 || n > 64 {
		t.Fatalf("the owner was asked %d times, want between 2 and 64", n)
	}
}

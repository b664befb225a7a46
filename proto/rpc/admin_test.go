package rpc_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fcap-io/fcap/proto"
	"github.com/fcap-io/fcap/proto/rpc"
)

// fakeNode answers each request on its connections with what answer
// returns for it, and records the tokens connections said Hello with.
type fakeNode struct {
	ln     net.Listener
	wg     sync.WaitGroup
	mu     sync.Mutex // guards tokens
	tokens []string
}

func startFake(t *testing.T, answer func(proto.Header, []byte) proto.Message) *fakeNode {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeNode{ln: ln}
	var conns sync.WaitGroup
	f.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				conns.Wait()
				return
			}
			conns.Go(func() {
				defer c.Close()
				rd := proto.NewReader(c, proto.DefaultMaxFrame)
				for {
					hdr, body, err := rd.Next()
					if err != nil {
						return
					}
					var resp proto.Message
					if hdr.Type == proto.TypeHello {
						var h proto.Hello
						if err := proto.Decode(body, &h); err != nil {
							return
						}
						f.mu.Lock()
						f.tokens = append(f.tokens, strings.Clone(h.Token))
						f.mu.Unlock()
						resp = &proto.HelloResult{Role: "operator"}
					} else {
						resp = answer(hdr, body)
					}
					out, err := proto.AppendFrame(nil, hdr.ID, resp)
					if err != nil {
						return
					}
					if _, err := c.Write(out); err != nil {
						return
					}
				}
			})
		}
	})
	t.Cleanup(func() {
		ln.Close()
		f.wg.Wait()
	})
	return f
}

func (f *fakeNode) addr() string { return f.ln.Addr().String() }

// TestAdminConnSeriesOfCalls: one connection carries calls one after
// another; an Error answer comes back as a *proto.Error and leaves the
// connection usable; an answer of another type than asked is an error;
// the token is said in a Hello before the first call.
func TestAdminConnSeriesOfCalls(t *testing.T) {
	f := startFake(t, func(hdr proto.Header, _ []byte) proto.Message {
		switch hdr.Type {
		case proto.TypeStatusRequest:
			return &proto.Status{Name: "fake", Primaries: 3}
		case proto.TypePing:
			return &proto.Status{Name: "not a pong"}
		default:
			return &proto.Error{Code: proto.CodeUnsupported, Message: "no such thing here"}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := (&rpc.Admin{Token: "tok-123"}).Dial(ctx, f.addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := range 3 {
		var st proto.Status
		if err := c.Call(ctx, &proto.StatusRequest{}, &st); err != nil || st.Name != "fake" || st.Primaries != 3 {
			t.Fatalf("call %d: %+v, %v", i, st, err)
		}
		var dr proto.DrainResult
		err := c.Call(ctx, &proto.Drain{}, &dr)
		var pe *proto.Error
		if !errors.As(err, &pe) || !errors.Is(err, proto.ErrUnsupported) || pe.Message != "no such thing here" {
			t.Fatalf("call %d: an Error answer gave %v, want a *proto.Error of ErrUnsupported with its message", i, err)
		}
	}
	var pong proto.Pong
	if err := c.Call(ctx, &proto.Ping{}, &pong); err == nil || !strings.Contains(err.Error(), "answered") {
		t.Errorf("an answer of the wrong type: %v, want an error saying what it answered", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.tokens) != 1 || f.tokens[0] != "tok-123" {
		t.Errorf("Hellos said %q, want one with the Admin's token", f.tokens)
	}
}

// TestDialUnreachable: a node that does not listen is "cannot reach"
// with its address.
func TestDialUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := rpc.NodeStatus(ctx, addr); err == nil || !strings.Contains(err.Error(), "cannot reach "+addr) {
		t.Errorf("NodeStatus of a closed port: %v, want cannot reach %s", err, addr)
	}
}

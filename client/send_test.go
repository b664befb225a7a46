package client

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/fcap-io/fcap/proto"
)

// TestLateCallerLeavesTheConnectionUp: a caller whose deadline passed
// before it could write (starved of CPU, or slow to encode) fails alone.
// Its write would fail at once and close the connection under every
// other call pending on it; it must not be attempted.
func TestLateCallerLeavesTheConnectionUp(t *testing.T) {
	local, remote := net.Pipe()
	defer local.Close()
	defer remote.Close()
	c := &conn{p: &peer{addr: "pipe"}, nc: local, kick: make(chan struct{}, 1), pending: map[uint64]*call{}}
	other := getCall(proto.TypePong)
	c.pending[99] = other // another caller's request, in flight

	late := getCall(proto.TypePong)
	err := c.send(late, &proto.Ping{}, time.Now().Add(-time.Millisecond))
	if !errors.Is(err, errTimeout) {
		t.Fatalf("send past the deadline = %v, want %v", err, errTimeout)
	}
	c.mu.Lock()
	closed, pending, queued := c.err, len(c.pending), len(c.out)
	c.mu.Unlock()
	if closed != nil || c.isClosed() {
		t.Fatalf("a late caller closed the connection: %v", closed)
	}
	if pending != 1 || queued != 0 {
		t.Fatalf("after a late send: %d calls pending (want only the other one), %d bytes queued (want 0)", pending, queued)
	}
	select {
	case <-other.done:
		t.Fatalf("the other call failed: %v", other.err)
	default:
	}

	// The connection still carries the next caller's request, whole.
	got := make(chan uint64, 1)
	go func() {
		r := proto.NewReader(remote, 0)
		hdr, _, err := r.Next()
		if err != nil {
			t.Errorf("reading the next request: %v", err)
		}
		got <- hdr.ID
	}()
	next := getCall(proto.TypePong)
	if err := c.send(next, &proto.Ping{}, time.Now().Add(10*time.Second)); err != nil {
		t.Fatalf("send in time: %v", err)
	}
	select {
	case id := <-got:
		if id != next.id {
			t.Fatalf("the node read request %d, want %d", id, next.id)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the next request never arrived")
	}
}

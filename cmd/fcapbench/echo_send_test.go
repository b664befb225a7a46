package main

import (
	"bytes"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/fcap-io/fcap/internal/connrec"
	"github.com/fcap-io/fcap/proto"
)

// The echo's caller writes as the fcap client does (its
// TestCallersReadyTogetherShareAWrite): callers ready together share a
// write, each frame whole, once, with its own request id. Otherwise the
// floor would pay a system call a request where fcap pays fewer.
func TestEchoCallersReadyTogetherShareAWrite(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	w := &connrec.Conn{}
	c := &echoConn{nc: w, pending: map[uint64]*echoCall{}}
	frame := appendEchoFrame(nil, proto.TypeCheck, 0, 2500, 400)
	const callers = 8
	ids := make([]uint64, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			cl := &echoCall{done: make(chan error, 1)}
			if err := c.send(cl, frame, time.Now().Add(time.Minute)); err != nil {
				t.Errorf("send: %v", err)
			}
			ids[i] = cl.id
		})
	}
	wg.Wait()
	writes := w.Writes()
	seen := map[uint64]int{}
	for _, b := range writes {
		r := proto.NewReader(bytes.NewReader(b), proto.DefaultMaxFrame)
		for {
			hdr, body, err := r.Next()
			if err != nil {
				break
			}
			if len(body) != 2500 {
				t.Errorf("request %d: body of %d bytes, want 2500", hdr.ID, len(body))
			}
			seen[hdr.ID]++
		}
	}
	for _, id := range ids {
		if seen[id] != 1 {
			t.Errorf("request %d written %d times, want once (written: %v)", id, seen[id], seen)
		}
	}
	if len(writes) >= callers {
		t.Errorf("%d callers ready together took %d writes, want fewer", callers, len(writes))
	}
}

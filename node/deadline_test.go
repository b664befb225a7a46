package node

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/proto"
)

// TestNoWriteAfterDeadline: a request whose budget ran out before its turn
// came is answered DeadlineExceeded and changes nothing; one within its
// budget, or with none, is served.
func TestNoWriteAfterDeadline(t *testing.T) {
	cfg := DefaultLocalConfig("deadline")
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	n, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Shutdown(context.Background()) })
	// Served only once the node owns its partitions: on a busy machine
	// that is not at once.
	for ready := time.Now().Add(30 * time.Second); !n.Ready(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(ready) {
			t.Fatalf("the node never became ready: %s", n.notReady())
		}
	}

	soft := fcap.Cap{Scope: "campaign", ID: "soft", Limit: 3, Window: fcap.MaxWindow}
	strictCap := fcap.Cap{Scope: "campaign", ID: "strict", Limit: 5, Window: fcap.MaxWindow, Mode: fcap.Strict}
	table := fcap.CheckTable{Caps: []fcap.Cap{soft}, Refs: []uint16{0}, Ends: []uint32{1}}
	requests := func(budget time.Duration) []proto.Message {
		return []proto.Message{
			&proto.Allow{Viewer: "v", Caps: []fcap.Cap{soft}, Budget: budget},
			&proto.Allow{Viewer: "v", Caps: []fcap.Cap{strictCap}, Budget: budget},
			&proto.Reserve{Viewer: "v", TTL: 60_000, Caps: []fcap.Cap{strictCap}, Budget: budget},
			&proto.Check{Viewer: "v", Table: table, Budget: budget},
		}
	}
	left := func(c fcap.Cap) int64 {
		t.Helper()
		vd, err := n.engine.Check("v", []fcap.Candidate{{Caps: []fcap.Cap{c}}}, n.clock(), nil)
		if err != nil {
			t.Fatal(err)
		}
		return vd[0].Remaining
	}
	send := func(h *handler, m proto.Message) (proto.Header, []byte) {
		t.Helper()
		frame, err := proto.AppendFrame(nil, 7, m)
		if err != nil {
			t.Fatal(err)
		}
		out := h.handle(nil, proto.Header{Version: proto.Version, Type: m.Type(), ID: 7}, frame[proto.HeaderSize:])
		hdr, body, err := proto.NewReader(bytes.NewReader(out), 0).Next()
		if err != nil {
			t.Fatal(err)
		}
		return hdr, body
	}

	// Arrived a second ago with a budget of a millisecond: too late.
	h := newHandler(n)
	for _, m := range requests(time.Millisecond) {
		h.arrived = time.Now().Add(-time.Second)
		hdr, body := send(h, m)
		var e proto.Error
		if hdr.Type != proto.TypeError || proto.Decode(body, &e) != nil || !errors.Is(&e, proto.ErrDeadlineExceeded) {
			t.Fatalf("%T past its deadline answered %v %+v, want DeadlineExceeded", m, hdr.Type, e)
		}
	}
	if l, s := left(soft), left(strictCap); l != 3 || s != 5 {
		t.Fatalf("requests past their deadline changed the counts: %d and %d left, want 3 and 5", l, s)
	}

	// Within a generous budget, or with none, every request is served.
	for _, budget := range []time.Duration{time.Minute, 0} {
		for _, m := range requests(budget) {
			h.arrived = time.Now()
			if hdr, body := send(h, m); hdr.Type == proto.TypeError {
				var e proto.Error
				_ = proto.Decode(body, &e)
				t.Fatalf("%T with budget %v refused: %+v", m, budget, e)
			}
		}
	}
	if l, s := left(soft), left(strictCap); l != 1 || s != 1 {
		t.Fatalf("%d and %d left after two rounds, want 1 and 1 (the strict cap takes an Allow and a Reserve each round)", l, s)
	}
}

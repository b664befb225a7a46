package node

import (
	"errors"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/proto"
)

// TestEraseOnANodeWithTokens: an adserver erases a viewer with a linked
// device and impressions; the device is unlinked, the node holds nothing
// of the viewer, and an impression dated before the erasure no longer
// counts. A peer may send the Unlink an erasure needs, not an Erase.
func TestEraseOnANodeWithTokens(t *testing.T) {
	n := authNode(t)
	h := helloAs(t, n, "adserver-token-0001")
	call := func(h *handler, m proto.Message, want proto.Type) error {
		t.Helper()
		return callAs(t, h, m, want)
	}
	if err := call(h, &proto.Link{Device: "phone", Viewer: "v"}, proto.TypeLinkResult); err != nil {
		t.Fatalf("link: %v", err)
	}
	caps := []fcap.Cap{{Scope: "campaign", ID: "c", Limit: 5, Window: time.Hour}}
	before := time.Now().UnixMilli()
	if st, err := n.engine.Record("v", fcap.Impression{ID: "i", Time: before, Caps: caps}); err != nil || st != fcap.Recorded {
		t.Fatalf("record: %v %v", st, err)
	}
	if err := call(h, &proto.Erase{Viewer: "v"}, proto.TypeEraseResult); err != nil {
		t.Fatalf("erase: %v", err)
	}
	if _, found := n.engine.Viewer("v"); found {
		t.Error("the node still holds the erased viewer")
	}
	if _, linked, _ := n.engine.Resolve("phone"); linked {
		t.Error("the erased viewer's device is still linked")
	}
	if st, err := n.engine.Record("v", fcap.Impression{ID: "j", Time: before, Caps: caps}); err != nil || st != fcap.Stale {
		t.Errorf("record dated before the erasure: %v %v, want stale", st, err)
	}
	if err := call(h, &proto.Erase{Viewer: ""}, proto.TypeEraseResult); !errors.Is(err, proto.ErrBadRequest) {
		t.Errorf("erase of an empty viewer: %v, want a bad request", err)
	}

	peer := helloAs(t, n, "peer-token-00000001")
	if err := call(peer, &proto.Erase{Viewer: "v"}, proto.TypeEraseResult); !errors.Is(err, proto.ErrPermissionDenied) {
		t.Errorf("erase as a peer: %v, want permission denied", err)
	}
	if err := call(peer, &proto.Unlink{Device: "phone"}, proto.TypeUnlinkResult); err != nil {
		t.Errorf("unlink as a peer (an erasure's step): %v", err)
	}
}

// helloAs returns a handler of n whose connection said Hello with token.
func helloAs(t *testing.T, n *Node, token string) *handler {
	t.Helper()
	h := newHandler(n)
	hh, hb := request(t, &proto.Hello{Token: token})
	if _, err := answer(t, h.handle(nil, hh, hb)); err != nil {
		t.Fatalf("hello: %v", err)
	}
	return h
}

// callAs sends m through h and returns the error it was answered with;
// an answer of another type than want fails the test.
func callAs(t *testing.T, h *handler, m proto.Message, want proto.Type) error {
	t.Helper()
	hdr, body := request(t, m)
	typ, err := answer(t, h.handle(nil, hdr, body))
	if err == nil && typ.Type != want {
		t.Fatalf("%s answered %s", m.Type(), typ.Type)
	}
	return err
}

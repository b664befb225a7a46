package node

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/node/engine"
	"github.com/fcap-io/fcap/node/security"
	"github.com/fcap-io/fcap/proto"
)

// TestRegionMergeHandler: only a peer may send a RegionMerge; a node
// merges the states of the viewers it owns (the same state twice counts
// once), refuses what comes from its own region name or a bad one, and
// a state that does not decode changes nothing. A node of a single
// region has no links at all.
func TestRegionMergeHandler(t *testing.T) {
	cfg := DefaultLocalConfig("region-b")
	cfg.HTTPAddr = ""
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.Security.Tokens = map[string]security.Role{"adserver-token-0001": security.RoleAdServer, "peer-token-00000001": security.RolePeer}
	cfg.Security.PeerToken = "peer-token-00000001"
	cfg.Region.Name = "b"
	n, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Shutdown(context.Background()) })
	waitOwns(t, n)
	if n.region == nil || n.shipping != nil {
		t.Fatalf("a node with a region and no peers: links %v, shipping %v; want links that only receive", n.region, n.shipping)
	}

	// The state of viewer v in region a: one impression.
	a, err := engine.New(engine.DefaultLocalConfig())
	if err != nil {
		t.Fatal(err)
	}
	c := fcap.Cap{Scope: "campaign", ID: "c", Limit: 5, Window: time.Hour}
	now := time.Now().UnixMilli()
	if _, err := a.Record("v", fcap.Impression{ID: "i1", Time: now, Caps: []fcap.Cap{c}}); err != nil {
		t.Fatal(err)
	}
	state := a.Export(fcap.ViewerKey("v"), nil)
	merge := &proto.RegionMerge{Region: "a", HighWater: now, States: state}

	ad := helloAs(t, n, "adserver-token-0001")
	if err := callAs(t, ad, merge, proto.TypeRegionMergeResult); !errors.Is(err, proto.ErrPermissionDenied) {
		t.Errorf("region merge from an ad server: %v, want permission denied", err)
	}
	peer := helloAs(t, n, "peer-token-00000001")
	for _, bad := range []*proto.RegionMerge{
		{Region: "b", States: state},
		{Region: "Bad_Name", States: state},
		{Region: "a", States: []byte{1, 2, 3}},
	} {
		if err := callAs(t, peer, bad, proto.TypeRegionMergeResult); !errors.Is(err, proto.ErrBadRequest) {
			t.Errorf("region merge %q with %d state bytes: %v, want a bad request", bad.Region, len(bad.States), err)
		}
	}
	if got := count(t, n, "v", c); got != 0 {
		t.Fatalf("refused merges changed the viewer: count %d", got)
	}
	for range 2 {
		hdr, body := request(t, merge)
		out := peer.handle(nil, hdr, body)
		if _, err := answer(t, out); err != nil {
			t.Fatalf("region merge: %v", err)
		}
		var res proto.RegionMergeResult
		if err := proto.Decode(out[proto.HeaderSize:], &res); err != nil || res.Applied != 1 || len(res.Refused) != 0 {
			t.Fatalf("region merge answered %+v, %v; want one state applied", res, err)
		}
	}
	if got := count(t, n, "v", c); got != 1 {
		t.Errorf("the same state merged twice: count %d, want 1", got)
	}

	// A single region: no links, nothing to ship.
	single := authNode(t)
	if single.region != nil || single.shipping != nil {
		t.Error("a node without a region has region links")
	}
}

// count is how many impressions n counts for viewer under c now.
func count(t *testing.T, n *Node, viewer string, c fcap.Cap) int64 {
	t.Helper()
	vs, err := n.engine.Check(viewer, []fcap.Candidate{{Caps: []fcap.Cap{c}}}, time.Now().UnixMilli(), nil)
	if err != nil || len(vs) != 1 {
		t.Fatalf("check %s: %v", viewer, err)
	}
	return c.Limit - vs[0].Remaining
}

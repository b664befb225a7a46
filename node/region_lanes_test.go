package node

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/node/engine"
	"github.com/fcap-io/fcap/node/security"
	"github.com/fcap-io/fcap/proto"
)

// TestRegionMergeKeepsRegionsApart: a node of region b records an
// impression of viewer v at one millisecond, and RegionMerges from
// regions a and c bring one each at the same millisecond (distinct ids):
// the node counts 3, re-sent merges change nothing, and what it would
// ship to a peer region holds only its own impression.
func TestRegionMergeKeepsRegionsApart(t *testing.T) {
	cfg := DefaultLocalConfig("region-b")
	cfg.HTTPAddr = ""
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.Security.Tokens = map[string]security.Role{"peer-token-00000001": security.RolePeer}
	cfg.Security.PeerToken = "peer-token-00000001"
	cfg.Region.Name = "b"
	n, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Shutdown(context.Background()) })
	waitOwns(t, n)

	c := fcap.Cap{Scope: "campaign", ID: "c", Limit: 5, Window: time.Hour}
	now := time.Now().UnixMilli()
	if _, err := n.engine.Record("v", fcap.Impression{ID: "in-b", Time: now, Caps: []fcap.Cap{c}}); err != nil {
		t.Fatal(err)
	}
	peer := helloAs(t, n, "peer-token-00000001")
	for range 2 {
		for _, region := range []string{"a", "c"} {
			e, err := engine.New(engine.DefaultLocalConfig())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := e.Record("v", fcap.Impression{ID: "in-" + region, Time: now, Caps: []fcap.Cap{c}}); err != nil {
				t.Fatal(err)
			}
			hdr, body := request(t, &proto.RegionMerge{Region: region, HighWater: now, States: e.ExportLocal(fcap.ViewerKey("v"), nil)})
			if _, err := answer(t, peer.handle(nil, hdr, body)); err != nil {
				t.Fatalf("region merge from %s: %v", region, err)
			}
		}
		if got := count(t, n, "v", c); got != 3 {
			t.Fatalf("b counts %d, want 3: its own impression and a's and c's at the same millisecond", got)
		}
	}
	shipped, err := engine.New(engine.DefaultLocalConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := shipped.ImportAll(localStates{n.engine}.Export(fcap.ViewerKey("v"), nil), nil); err != nil {
		t.Fatal(err)
	}
	st, _ := shipped.Viewer("v")
	if len(st.Keys) != 1 || st.Keys[0].Lane || len(st.Keys[0].Times) != 1 {
		t.Fatalf("what b ships holds %+v, want its own counter of 1 impression (lanes are not passed on)", st.Keys)
	}
}

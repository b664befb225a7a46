package node

import (
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/proto"
)

// TestVoidOnANodeWithTokens: an adserver voids a recorded impression and
// the node counts it no more, keeps it from counting again and counts
// the void in fcap_voided_impressions_total; a void named with another
// time, or of an empty viewer, is a bad request that changes nothing; a
// peer may not void.
func TestVoidOnANodeWithTokens(t *testing.T) {
	n := authNode(t)
	h := helloAs(t, n, "adserver-token-0001")
	caps := []fcap.Cap{{Scope: "campaign", ID: "c", Limit: 5, Window: time.Hour}}
	imp := fcap.Impression{ID: "i", Time: time.Now().UnixMilli(), Caps: caps}
	if st, err := n.engine.Record("v", imp); err != nil || st != fcap.Recorded {
		t.Fatalf("record: %v %v", st, err)
	}
	other := imp
	other.Time -= 60_000
	for _, m := range []*proto.Void{{Viewer: "v", Impression: other}, {Viewer: "", Impression: imp}} {
		if err := callAs(t, h, m, proto.TypeVoidResult); !errors.Is(err, proto.ErrBadRequest) {
			t.Errorf("void of %q at %d: %v, want a bad request", m.Viewer, m.Impression.Time, err)
		}
	}
	if n.engine.Voided("v", "i") {
		t.Fatal("a refused void left a mark")
	}
	if err := callAs(t, h, &proto.Void{Viewer: "v", Impression: imp}, proto.TypeVoidResult); err != nil {
		t.Fatalf("void: %v", err)
	}
	if st, _ := n.engine.Viewer("v"); len(st.Keys) != 1 || len(st.Keys[0].Times) != 0 || st.VoidedIDs != 1 {
		t.Errorf("after the void the node holds %+v, want an empty counter and one void mark", st)
	}
	if st, err := n.engine.Record("v", imp); err != nil || st != fcap.Duplicate {
		t.Errorf("record of the voided id: %v %v, want duplicate", st, err)
	}
	if got := testutil.ToFloat64(n.metrics.Voided.WithLabelValues("true")); got != 1 {
		t.Errorf("fcap_voided_impressions_total{counted=\"true\"} = %v, want 1", got)
	}
	peer := helloAs(t, n, "peer-token-00000001")
	if err := callAs(t, peer, &proto.Void{Viewer: "v", Impression: imp}, proto.TypeVoidResult); !errors.Is(err, proto.ErrPermissionDenied) {
		t.Errorf("void as a peer: %v, want permission denied", err)
	}
}

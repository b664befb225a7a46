package api

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fcap-io/fcap/client/httpapi"
	"github.com/fcap-io/fcap/node"
	"github.com/fcap-io/fcap/node/nodetest"
	"github.com/fcap-io/fcap/test/nodeclient"
)

// oneNode starts a single node and waits until its API answers from it.
func oneNode(t *testing.T, name string, mutate ...func(*node.Config)) *node.Node {
	t.Helper()
	cfg := node.DefaultLocalConfig(name)
	cfg.Logger = quiet
	nodeclient.ServeAPI(&cfg)
	cfg.APITimeout = 2 * time.Second // a loaded test machine
	for _, m := range mutate {
		m(&cfg)
	}
	nd := nodetest.Start(t, cfg)
	t.Cleanup(http.DefaultClient.CloseIdleConnections)
	waitReady(t, nd)
	return nd
}

// TestRecordRefusedUpFront: POST /v1/record answers 400, naming the field
// and what is accepted, for an impression its owner would drop, and
// queues nothing; an impression without a time counts now.
func TestRecordRefusedUpFront(t *testing.T) {
	nd := oneNode(t, "api-record-valid")
	good := httpapi.Cap{Scope: "campaign", ID: "c", Limit: 3, WindowMillis: 3_600_000}
	for _, tc := range []struct {
		name string
		req  httpapi.RecordRequest
		says string
	}{
		{"unknown scope", httpapi.RecordRequest{Viewer: "v", Impression: httpapi.Impression{ID: "i", Caps: []httpapi.Cap{{Scope: "placement", ID: "p", Limit: 1, WindowMillis: 1000}}}},
			`"placement" (accepted: creative, campaign, advertiser)`},
		{"viewer of 300 bytes", httpapi.RecordRequest{Viewer: strings.Repeat("v", 300), Impression: httpapi.Impression{ID: "i", Caps: []httpapi.Cap{good}}},
			"viewer is 300 bytes, at most 256"},
		{"device of 300 bytes", httpapi.RecordRequest{Device: strings.Repeat("d", 300), Impression: httpapi.Impression{ID: "i", Caps: []httpapi.Cap{good}}},
			"viewer is 300 bytes, at most 256"},
		{"impression id of 300 bytes", httpapi.RecordRequest{Viewer: "v", Impression: httpapi.Impression{ID: strings.Repeat("i", 300), Caps: []httpapi.Cap{good}}},
			"impression id is 300 bytes, at most 256"},
		{"too many caps", httpapi.RecordRequest{Viewer: "v", Impression: httpapi.Impression{ID: "i", Caps: make([]httpapi.Cap, 17)}},
			"17 caps, at most 16"},
		{"negative time", httpapi.RecordRequest{Viewer: "v", Impression: httpapi.Impression{ID: "i", Time: -5, Caps: []httpapi.Cap{good}}},
			"impression time"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var e struct{ Error string }
			if st := post(t, nd, "/v1/record", tc.req, &e); st != http.StatusBadRequest || !strings.Contains(e.Error, tc.says) {
				t.Fatalf("status %d %q, want 400 saying %q", st, e.Error, tc.says)
			}
		})
	}
	if keys := nd.Engine().Stats().Keys; keys != 1 { // the probe's
		t.Errorf("refused records left %d counters, want only the probe's", keys)
	}

	// No time: the impression counts now.
	var rr httpapi.RecordResponse
	if st := post(t, nd, "/v1/record", `{"viewer":"v","impression":{"id":"no-time","caps":[{"scope":"campaign","id":"c","limit":3,"window":3600000}]}}`, &rr); st != http.StatusAccepted || !rr.Queued {
		t.Fatalf("record without a time: %d %+v", st, rr)
	}
	check := httpapi.CheckRequest{Viewer: "v", Candidates: []httpapi.Candidate{{Caps: []httpapi.Cap{good}}}}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var res httpapi.CheckResponse
		if st := post(t, nd, "/v1/check", check, &res); st == http.StatusOK && len(res.Verdicts) == 1 && res.Verdicts[0].Remaining == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("an impression recorded without a time never counted")
		}
	}
}

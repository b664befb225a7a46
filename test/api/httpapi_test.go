// Package api tests client/httpapi's JSON API served by running nodes
// (node/nodetest), against docs/openapi.yaml. It lives in the test module:
// a test beside client/httpapi that starts a node would make the library
// module require the node module.
package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client/httpapi"
	"github.com/fcap-io/fcap/node"
	"github.com/fcap-io/fcap/node/nodetest"
	"github.com/fcap-io/fcap/node/security"
	"github.com/fcap-io/fcap/test/nodeclient"
)

var quiet = nodetest.Quiet

// twoNodes starts a two-node cluster with R=1, so each node owns about
// half of the viewers and the other half must be forwarded.
func twoNodes(t *testing.T) []*node.Node {
	t.Helper()
	nodes := nodetest.Cluster(t, "api", 2, func(cfg *node.Config) {
		cfg.Membership.Ring.Replicas = 1
		cfg.APITimeout = 2 * time.Second // a loaded test machine
		nodeclient.ServeAPI(cfg)
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		// Both active on one ring: before that, ownership still moves and
		// a viewer picked for one owner may belong to the other a moment
		// later.
		ok := true
		for _, nd := range nodes {
			r := nd.Ring()
			ok = ok && len(r.Members()) == 2 && r.ActiveMembers() == 2 && nd.Ready() && r.Epoch() == nodes[0].Ring().Epoch()
		}
		if ok {
			return nodes
		}
		if time.Now().After(deadline) {
			t.Fatal("the two nodes did not form a cluster")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// post sends body to path on nd and decodes the answer into out (when
// not nil), returning the status.
func post(t *testing.T, nd *node.Node, path string, body any, out any) int {
	t.Helper()
	var b []byte
	switch v := body.(type) {
	case string:
		b = []byte(v)
	default:
		var err error
		if b, err = json.Marshal(body); err != nil {
			t.Fatal(err)
		}
	}
	resp, err := http.Post("http://"+nd.HTTPAddr()+path, "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s: answer %q: %v", path, raw, err)
		}
	}
	return resp.StatusCode
}

// viewerOwnedBy returns a viewer whose partition's primary is owner.
func viewerOwnedBy(t *testing.T, nd *node.Node, owner string) string {
	t.Helper()
	// The node's ring may still be moving partitions to the newer member.
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		r := nd.Ring()
		for i := range 10000 {
			v := fmt.Sprint("viewer-", i)
			if _, owners := r.Lookup(v); len(owners) > 0 && r.Member(owners[0]).Name == owner {
				return v
			}
		}
	}
	t.Fatalf("no viewer owned by %s", owner)
	return ""
}

// waitReady polls until the node's API client has the topology (its
// first call could otherwise fail open).
func waitReady(t *testing.T, nd *node.Node) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var v httpapi.Verdict
		st := post(t, nd, "/v1/allow", httpapi.AllowRequest{Viewer: "probe", Caps: []httpapi.Cap{{Scope: "campaign", ID: "probe", Limit: 65535, WindowMillis: 1}}}, &v)
		if st == http.StatusOK && !v.FailOpen {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the JSON API never answered from the cluster: status %d %+v", st, v)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestAllowCheckAndForwarding(t *testing.T) {
	nodes := twoNodes(t)
	entry := nodes[0]
	waitReady(t, entry)
	capOf := func(id string) httpapi.Cap {
		return httpapi.Cap{Scope: "campaign", ID: id, Limit: 2, WindowMillis: 3_600_000}
	}
	for _, owner := range nodes {
		viewer := viewerOwnedBy(t, entry, owner.Name())
		t.Run("owner="+owner.Name(), func(t *testing.T) {
			now := time.Now().UnixMilli()
			for i, want := range []bool{true, true, false} {
				var v httpapi.Verdict
				req := httpapi.AllowRequest{Viewer: viewer, Caps: []httpapi.Cap{capOf("c1")}, Now: &now}
				if st := post(t, entry, "/v1/allow", req, &v); st != http.StatusOK {
					t.Fatalf("allow %d: status %d", i, st)
				}
				if v.Allowed != want || v.FailOpen || v.FailClosed {
					t.Fatalf("allow %d: %+v, want allowed=%v from the cluster", i, v, want)
				}
			}
			// The counts live on the owner's engine, whichever node was asked.
			if got := owner.Engine().Stats().Keys; got == 0 {
				t.Errorf("owner %s holds no counter after allows through %s", owner.Name(), entry.Name())
			}
			var res httpapi.CheckResponse
			req := httpapi.CheckRequest{Viewer: viewer, Now: &now, Candidates: []httpapi.Candidate{
				{Caps: []httpapi.Cap{capOf("c1")}},
				{Caps: []httpapi.Cap{capOf("c2")}},
			}}
			if st := post(t, entry, "/v1/check", req, &res); st != http.StatusOK {
				t.Fatalf("check: status %d", st)
			}
			if len(res.Verdicts) != 2 || res.Verdicts[0].Allowed || !res.Verdicts[1].Allowed || res.Verdicts[1].Remaining != 2 || res.Verdicts[0].Blocking != 0 {
				t.Fatalf("check: %+v, want c1 blocked by cap 0 and c2 allowed with 2 left", res)
			}
		})
	}
}

func TestRecordReserveRelease(t *testing.T) {
	nodes := twoNodes(t)
	entry := nodes[1]
	waitReady(t, entry)
	viewer := viewerOwnedBy(t, entry, nodes[0].Name())
	c := httpapi.Cap{Scope: "campaign", ID: "r", Limit: 3, WindowMillis: 3_600_000}
	now := time.Now().UnixMilli()

	var rr httpapi.RecordResponse
	rec := httpapi.RecordRequest{Viewer: viewer, Impression: httpapi.Impression{ID: "imp-1", Time: now, Caps: []httpapi.Cap{c}}}
	if st := post(t, entry, "/v1/record", rec, &rr); st != http.StatusAccepted || !rr.Queued {
		t.Fatalf("record: status %d %+v", st, rr)
	}
	// Recorded twice: idempotent on the id.
	post(t, entry, "/v1/record", rec, nil)
	remaining := func() int64 {
		var res httpapi.CheckResponse
		post(t, entry, "/v1/check", httpapi.CheckRequest{Viewer: viewer, Now: &now, Candidates: []httpapi.Candidate{{Caps: []httpapi.Cap{c}}}}, &res)
		return res.Verdicts[0].Remaining
	}
	deadline := time.Now().Add(10 * time.Second)
	for remaining() != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("after recording imp-1 twice, remaining %d, want 2", remaining())
		}
		time.Sleep(10 * time.Millisecond)
	}

	var res httpapi.ReserveResponse
	if st := post(t, entry, "/v1/reserve", httpapi.ReserveRequest{Viewer: viewer, Candidate: httpapi.Candidate{Caps: []httpapi.Cap{c}}, TTLMillis: 60_000, Now: &now}, &res); st != http.StatusOK {
		t.Fatalf("reserve: status %d", st)
	}
	if !res.Verdict.Allowed || res.Reservation == "" {
		t.Fatalf("reserve: %+v, want a granted reservation", res)
	}
	if got := remaining(); got != 1 {
		t.Fatalf("with a reservation held, remaining %d, want 1", got)
	}
	if st := post(t, entry, "/v1/release", httpapi.ReleaseRequest{Viewer: viewer, Reservation: res.Reservation}, nil); st != http.StatusOK {
		t.Fatalf("release: status %d", st)
	}
	if got := remaining(); got != 2 {
		t.Fatalf("after release, remaining %d, want 2", got)
	}
	if st := post(t, entry, "/v1/release", httpapi.ReleaseRequest{Viewer: viewer, Reservation: res.Reservation}, nil); st != http.StatusNotFound {
		t.Fatalf("second release: status %d, want 404", st)
	}
}

func TestBadRequests(t *testing.T) {
	nodes := twoNodes(t)
	entry := nodes[0]
	waitReady(t, entry)
	before := nodes[0].Engine().Stats().Keys + nodes[1].Engine().Stats().Keys
	good := httpapi.Cap{Scope: "campaign", ID: "x", Limit: 1, WindowMillis: 1000}
	huge := `{"viewer":"v","caps":[` + strings.Repeat(`{"scope":"campaign","id":"x","limit":1,"window":1000},`, 30000) + `{}]}`
	for _, tc := range []struct {
		name, path string
		body       any
		status     int
	}{
		{"empty viewer", "/v1/allow", httpapi.AllowRequest{Caps: []httpapi.Cap{good}}, 400},
		{"negative window", "/v1/allow", httpapi.AllowRequest{Viewer: "v", Caps: []httpapi.Cap{{Scope: "campaign", ID: "x", Limit: 1, WindowMillis: -5}}}, 400},
		{"unknown algorithm", "/v1/allow", httpapi.AllowRequest{Viewer: "v", Caps: []httpapi.Cap{{Scope: "campaign", ID: "x", Limit: 1, WindowMillis: 5, Algorithm: "magic"}}}, 400},
		{"unknown field", "/v1/allow", `{"viewer":"v","caps":[],"extra":1}`, 400},
		{"wrong type", "/v1/allow", `{"viewer":7,"caps":[]}`, 400},
		{"not JSON", "/v1/check", `viewer=v`, 400},
		{"two values", "/v1/check", `{"viewer":"v","candidates":[]} {}`, 400},
		{"record without id", "/v1/record", httpapi.RecordRequest{Viewer: "v", Impression: httpapi.Impression{Time: 1, Caps: []httpapi.Cap{good}}}, 400},
		{"record without caps", "/v1/record", httpapi.RecordRequest{Viewer: "v", Impression: httpapi.Impression{ID: "i", Time: 1}}, 400},
		{"reserve without ttl", "/v1/reserve", httpapi.ReserveRequest{Viewer: "v", Candidate: httpapi.Candidate{Caps: []httpapi.Cap{good}}}, 400},
		{"release of a non-number", "/v1/release", httpapi.ReleaseRequest{Viewer: "v", Reservation: "abc"}, 400},
		{"body over the limit", "/v1/allow", huge, 413},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var e struct{ Error string }
			if st := post(t, entry, tc.path, tc.body, &e); st != tc.status || e.Error == "" {
				t.Fatalf("status %d error %q, want %d and a message", st, e.Error, tc.status)
			}
		})
	}
	resp, err := http.Post("http://"+entry.HTTPAddr()+"/v1/allow", "text/plain", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Errorf("text/plain body: status %d, want 415", resp.StatusCode)
	}
	resp, err = http.Get("http://" + entry.HTTPAddr() + "/v1/allow")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET /v1/allow: status %d, want 405", resp.StatusCode)
	}
	// The probe's counter is the only one the test created.
	if after := nodes[0].Engine().Stats().Keys + nodes[1].Engine().Stats().Keys; after != before {
		t.Errorf("bad requests changed state: %d counters before, %d after", before, after)
	}
}

// TestTokens: with tokens configured, the JSON API wants an ad server's
// or operator's bearer token, refuses anything else with 401 and changes
// nothing, and its own client authenticates to the data plane.
func TestTokens(t *testing.T) {
	const ad, peer = "adserver-token-0123456789", "peer-token-0123456789"
	cfg := node.DefaultLocalConfig("api-tokens")
	cfg.Logger = quiet
	nodeclient.ServeAPI(&cfg)
	cfg.APITimeout = 2 * time.Second
	cfg.Security.Tokens = map[string]security.Role{ad: security.RoleAdServer, peer: security.RolePeer}
	cfg.Security.PeerToken = peer
	nd := nodetest.Start(t, cfg)
	t.Cleanup(http.DefaultClient.CloseIdleConnections)
	body := `{"viewer":"v-tok","caps":[{"scope":"campaign","id":"t","limit":5,"window":3600000}]}`
	send := func(auth string) (int, httpapi.Verdict) {
		req, _ := http.NewRequest(http.MethodPost, "http://"+nd.HTTPAddr()+"/v1/allow", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v httpapi.Verdict
		json.NewDecoder(resp.Body).Decode(&v)
		return resp.StatusCode, v
	}
	for _, auth := range []string{"", "Bearer wrong-token-0123456789", "Bearer " + peer, "Basic " + ad} {
		if st, _ := send(auth); st != http.StatusUnauthorized {
			t.Errorf("Authorization %q: status %d, want 401", auth, st)
		}
	}
	if keys := nd.Engine().Stats().Keys; keys != 0 {
		t.Fatalf("refused requests created %d counters", keys)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		st, v := send("Bearer " + ad)
		if st == http.StatusOK && v.Allowed && !v.FailOpen {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("with the ad server's token: status %d %+v, want an answer from the node", st, v)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if keys := nd.Engine().Stats().Keys; keys != 1 {
		t.Errorf("after one allowed call the node holds %d counters, want 1", keys)
	}
}

// TestIdentityOverHTTP: link, resolve and unlink, and calls naming a
// device, through either node of two.
func TestIdentityOverHTTP(t *testing.T) {
	nodes := twoNodes(t)
	for _, nd := range nodes {
		waitReady(t, nd)
	}
	capc := map[string]any{"scope": "campaign", "id": "http-id", "limit": 2, "window": 3_600_000, "mode": "strict"}
	var verdict httpapi.Verdict
	if st := post(t, nodes[0], "/v1/allow", map[string]any{"device": "http-phone", "caps": []any{capc}}, &verdict); st != 200 || !verdict.Allowed {
		t.Fatalf("allow by an unlinked device: %d %+v", st, verdict)
	}
	var linked struct {
		httpapi.LinkResponse
		Error string
	}
	if st := post(t, nodes[1], "/v1/link", map[string]any{"device": "http-phone", "viewer": "http-person"}, &linked); st != 200 || linked.Merged != 1 {
		t.Fatalf("link: %d %+v, want 1 impression merged", st, linked)
	}
	var who httpapi.ViewerResponse
	if st := post(t, nodes[0], "/v1/resolve", map[string]any{"device": "http-phone"}, &who); st != 200 || who.Viewer != "http-person" {
		t.Fatalf("resolve: %d %+v", st, who)
	}
	// The person has the phone's impression: one more, then the cap.
	if st := post(t, nodes[0], "/v1/allow", map[string]any{"viewer": "http-person", "caps": []any{capc}}, &verdict); st != 200 || !verdict.Allowed {
		t.Fatalf("the person's 2nd impression: %d %+v", st, verdict)
	}
	var check httpapi.CheckResponse
	if st := post(t, nodes[1], "/v1/check", map[string]any{"device": "http-phone", "candidates": []any{map[string]any{"caps": []any{capc}}}}, &check); st != 200 || check.Verdicts[0].Allowed {
		t.Fatalf("check by the linked device after 2 impressions: %d %+v", st, check)
	}
	var bad struct{ Error string }
	if st := post(t, nodes[0], "/v1/check", map[string]any{"device": "d", "viewer": "v", "candidates": []any{map[string]any{"caps": []any{capc}}}}, &bad); st != 400 || !strings.Contains(bad.Error, "not both") {
		t.Errorf("viewer and device both given: %d %+v", st, bad)
	}
	if st := post(t, nodes[0], "/v1/link", map[string]any{"device": "x", "viewer": "x"}, &bad); st != 400 {
		t.Errorf("self link: %d %+v", st, bad)
	}
	if st := post(t, nodes[1], "/v1/unlink", map[string]any{"device": "http-phone"}, &who); st != 200 || who.Viewer != "http-person" {
		t.Fatalf("unlink: %d %+v", st, who)
	}
	if st := post(t, nodes[0], "/v1/resolve", map[string]any{"device": "http-phone"}, &who); st != 200 || who.Viewer != "http-phone" {
		t.Fatalf("resolve after unlink: %d %+v", st, who)
	}
}

// TestRecordReplicatedAck: a record with "ack": "replicated" is answered
// 200 only once every owner of the viewer applied it, so both nodes of a
// cluster with two replicas hold it the moment the answer comes (read
// from each node's own engine, no waiting); a second one is a duplicate;
// an unknown ack, or a device with a replicated ack, is a 400.
func TestRecordReplicatedAck(t *testing.T) {
	nodes := nodetest.Cluster(t, "apirep", 2, func(cfg *node.Config) {
		cfg.Membership.Ring.Replicas = 2
		cfg.APITimeout = 2 * time.Second
		nodeclient.ServeAPI(cfg)
	})
	entry := nodes[1]
	waitReady(t, entry)
	c := httpapi.Cap{Scope: "campaign", ID: "rep", Limit: 10, WindowMillis: 3_600_000}
	now := time.Now().UnixMilli()
	rec := httpapi.RecordRequest{Viewer: "rep-viewer", Ack: httpapi.AckReplicated,
		Impression: httpapi.Impression{ID: "imp-rep-1", Time: now, Caps: []httpapi.Cap{c}}}
	var rr httpapi.RecordResponse
	// Recorded, or duplicate when an attempt of the client's that was
	// not acknowledged in time (the cluster has just formed) counted it.
	if st := post(t, entry, "/v1/record", rec, &rr); st != http.StatusOK || !rr.Replicated || rr.Queued || rr.Status != "recorded" && rr.Status != "duplicate" {
		t.Fatalf("replicated record: status %d %+v; want 200, replicated, recorded", st, rr)
	}
	capc := fcap.Cap{Scope: c.Scope, ID: c.ID, Limit: c.Limit, Window: fcap.Millis(c.WindowMillis)}
	for _, nd := range nodes {
		vds, err := nd.Engine().Check("rep-viewer", []fcap.Candidate{{Caps: []fcap.Cap{capc}}}, now, nil)
		if err != nil {
			t.Fatal(err)
		}
		if vds[0].Remaining != c.Limit-1 {
			t.Errorf("%s holds %d of the viewer's impressions when the record was answered, want 1", nd.Name(), c.Limit-vds[0].Remaining)
		}
	}
	rr = httpapi.RecordResponse{}
	if st := post(t, entry, "/v1/record", rec, &rr); st != http.StatusOK || rr.Status != "duplicate" {
		t.Fatalf("the same record again: status %d %+v; want 200, duplicate", st, rr)
	}
	bad := rec
	bad.Ack = "sometime"
	if st := post(t, entry, "/v1/record", bad, nil); st != http.StatusBadRequest {
		t.Fatalf(`"ack": "sometime": status %d, want 400`, st)
	}
	bad = rec
	bad.Viewer, bad.Device = "", "dev-1"
	if st := post(t, entry, "/v1/record", bad, nil); st != http.StatusBadRequest {
		t.Fatalf("a device with a replicated ack: status %d, want 400", st)
	}
}

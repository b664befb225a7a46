package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/client/httpapi"
	"github.com/fcap-io/fcap/node"
	"github.com/fcap-io/fcap/node/nodetest"
	"github.com/fcap-io/fcap/node/security"
	"github.com/fcap-io/fcap/test/nodeclient"
)

// The JSON API and docs/openapi.yaml must agree. These tests send a set
// of requests, valid and not, to a live node and check, with an OpenAPI
// library rather than by hand:
//   - every answer against the spec: its status is documented for the
//     operation, its Content-Type and body match the schema (404 and 405
//     for paths and methods the spec does not have, against its Error
//     schema);
//   - every request the node accepts is valid by the spec, and every
//     request marked specRefuses (required fields, types, ranges, the
//     timeout header, the media type) is refused by both.
// Refusals the spec cannot express (a scope outside the node's --scopes,
// an id over its --max-id-length, a time ahead of its clock, a
// reservation that expired) are answered with a documented status and an
// Error body.

// spec loads docs/openapi.yaml, checks that it is a valid OpenAPI
// document, and returns it with a router over its operations.
func spec(t *testing.T) (*openapi3.T, routers.Router) {
	t.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromFile("../../docs/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("docs/openapi.yaml is not a valid OpenAPI document: %v", err)
	}
	doc.Servers = nil // route by path, whatever the test node's address
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	return doc, router
}

// exchange is one request and what the node must answer.
type exchange struct {
	name        string
	method      string // default POST
	path        string
	body        string
	header      map[string]string // replaces the defaults (JSON, the bearer token) when set
	status      int
	code        httpapi.Code // for an error, its code; "" to skip
	specRefuses bool         // the spec itself refuses the request
}

// conformance drives exchanges against base and checks request and
// answer against the spec. It returns the answers' bodies, by name.
func conformance(t *testing.T, base string, defaults map[string]string, exchanges []exchange) map[string][]byte {
	t.Helper()
	doc, router := spec(t)
	errorSchema := doc.Components.Schemas["Error"].Value
	opts := &openapi3filter.Options{
		IncludeResponseStatus: true, // an undocumented status is an error
		MultiError:            true,
		AuthenticationFunc:    openapi3filter.NoopAuthenticationFunc,
	}
	bodies := map[string][]byte{}
	for _, ex := range exchanges {
		t.Run(ex.name, func(t *testing.T) {
			method := ex.method
			if method == "" {
				method = http.MethodPost
			}
			newReq := func() *http.Request {
				req, err := http.NewRequest(method, base+ex.path, strings.NewReader(ex.body))
				if err != nil {
					t.Fatal(err)
				}
				header := defaults
				if ex.header != nil {
					header = ex.header
				}
				for k, v := range header {
					req.Header.Set(k, v)
				}
				return req
			}

			// The request, judged by the spec.
			vreq := newReq()
			route, pathParams, routeErr := router.FindRoute(vreq)
			var input *openapi3filter.RequestValidationInput
			var reqErr error
			if routeErr == nil {
				input = &openapi3filter.RequestValidationInput{Request: vreq, PathParams: pathParams, Route: route, Options: opts}
				reqErr = openapi3filter.ValidateRequest(context.Background(), input)
			}

			// The request, judged by the node.
			resp, err := http.DefaultClient.Do(newReq())
			if err != nil {
				t.Fatal(err)
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			bodies[ex.name] = body
			if resp.StatusCode != ex.status {
				t.Fatalf("status %d %s, want %d", resp.StatusCode, body, ex.status)
			}
			switch {
			case resp.StatusCode < 300 && reqErr != nil:
				t.Errorf("the node accepted a request the spec refuses: %v", reqErr)
			case ex.specRefuses && routeErr == nil && reqErr == nil:
				t.Errorf("the spec accepts a request the node refuses with %d %s", resp.StatusCode, body)
			}
			if ex.code != "" {
				var e httpapi.Error
				if err := json.Unmarshal(body, &e); err != nil || e.Code != ex.code {
					t.Errorf("error %s, want code %q", body, ex.code)
				}
			}

			// The answer, judged by the spec.
			if routeErr != nil {
				// A path or method the spec does not have: the answer is
				// still an Error.
				if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
					t.Errorf("Content-Type %q for a path the spec does not have", ct)
				}
				var v any
				if err := json.Unmarshal(body, &v); err != nil {
					t.Fatalf("answer %q: %v", body, err)
				}
				if err := errorSchema.VisitJSON(v); err != nil {
					t.Errorf("answer %s is not an Error: %v", body, err)
				}
				return
			}
			if input == nil {
				input = &openapi3filter.RequestValidationInput{Request: vreq, PathParams: pathParams, Route: route, Options: opts}
			}
			rin := &openapi3filter.ResponseValidationInput{RequestValidationInput: input, Status: resp.StatusCode, Header: resp.Header, Options: opts}
			rin.SetBodyBytes(body)
			if err := openapi3filter.ValidateResponse(context.Background(), rin); err != nil {
				t.Errorf("answer %d %s does not match the spec: %v", resp.StatusCode, body, err)
			}
		})
	}
	return bodies
}

const (
	specToken = "adserver-token-spec-0123456789"
	specPeer  = "peer-token-spec-0123456789"
)

// TestOpenAPIAgreesWithALiveNode runs requests of every operation, valid
// and not, against a node with tokens.
func TestOpenAPIAgreesWithALiveNode(t *testing.T) {
	nd := tokenNode(t)
	base := "http://" + nd.HTTPAddr()
	auth := map[string]string{"Content-Type": "application/json", "Authorization": "Bearer " + specToken}
	with := func(k, v string) map[string]string { return withHeader(auth, k, v) }
	capJSON := specCap
	now := time.Now().UnixMilli()
	huge := `{"viewer":"v","candidates":[` + strings.Repeat(`{"caps":[`+capJSON("x", 1)+`]},`, 20000) + `{"caps":[` + capJSON("x", 1) + `]}]}`

	// A reservation to release, one to release twice, and one that
	// expired (reserved in the past, its ttl over by the node's clock).
	reserveID := func(viewer, body string) string { return reserveOn(t, base, auth, viewer, body) }
	live := reserveID("rv", `{"viewer":"rv","candidate":{"caps":[`+capJSON("r", 5)+`]},"ttl_ms":60000}`)
	expired := reserveID("rv", fmt.Sprintf(`{"viewer":"rv","candidate":{"caps":[%s]},"ttl_ms":1000,"now":%d}`, capJSON("r", 5), now-10_000))

	bodies := conformance(t, base, auth, append([]exchange{
		// check
		{name: "check", path: "/v1/check", body: `{"viewer":"v","candidates":[{"caps":[` + capJSON("a", 3) + `,` + capJSON("b", 5) + `]},{"caps":[` + capJSON("b", 5) + `]}]}`, status: 200},
		{name: "check by device", path: "/v1/check", body: `{"device":"d","candidates":[{"caps":[` + capJSON("a", 3) + `]}]}`, status: 200},
		{name: "check at a time", path: "/v1/check", body: fmt.Sprintf(`{"viewer":"v","now":%d,"candidates":[{"caps":[%s]}]}`, now, capJSON("a", 3)), status: 200},
		{name: "check without candidates", path: "/v1/check", body: `{"viewer":"v"}`, status: 400, code: httpapi.CodeBadRequest, specRefuses: true},
		{name: "check with no candidate", path: "/v1/check", body: `{"viewer":"v","candidates":[]}`, status: 400, code: httpapi.CodeBadRequest, specRefuses: true},
		{name: "check of a candidate without caps", path: "/v1/check", body: `{"viewer":"v","candidates":[{"caps":[]}]}`, status: 400, specRefuses: true},
		{name: "check without viewer or device", path: "/v1/check", body: `{"candidates":[{"caps":[` + capJSON("a", 3) + `]}]}`, status: 400, specRefuses: true},
		{name: "check with viewer and device", path: "/v1/check", body: `{"viewer":"v","device":"d","candidates":[{"caps":[` + capJSON("a", 3) + `]}]}`, status: 400, specRefuses: true},
		{name: "check with an unknown field", path: "/v1/check", body: `{"viewer":"v","candidates":[{"caps":[` + capJSON("a", 3) + `]}],"extra":1}`, status: 400, specRefuses: true},
		{name: "check with a viewer of the wrong type", path: "/v1/check", body: `{"viewer":7,"candidates":[{"caps":[` + capJSON("a", 3) + `]}]}`, status: 400, specRefuses: true},
		{name: "check with a negative window", path: "/v1/check", body: `{"viewer":"v","candidates":[{"caps":[{"scope":"campaign","id":"a","limit":1,"window":-5}]}]}`, status: 400, specRefuses: true},
		{name: "check with a window past 400 days", path: "/v1/check", body: `{"viewer":"v","candidates":[{"caps":[{"scope":"campaign","id":"a","limit":1,"window":34560000001}]}]}`, status: 400, code: httpapi.CodeBadRequest, specRefuses: true},
		{name: "check with a window of 400 days", path: "/v1/check", body: `{"viewer":"v","candidates":[{"caps":[{"scope":"campaign","id":"a","limit":1,"window":34560000000}]}]}`, status: 200},
		{name: "check with an unknown algorithm", path: "/v1/check", body: `{"viewer":"v","candidates":[{"caps":[{"scope":"campaign","id":"a","limit":1,"window":5,"algorithm":"magic"}]}]}`, status: 400, specRefuses: true},
		{name: "check with an unknown scope", path: "/v1/check", body: `{"viewer":"v","candidates":[{"caps":[{"scope":"placement","id":"a","limit":1,"window":5}]}]}`, status: 400, code: httpapi.CodeBadRequest},
		{name: "check in the future", path: "/v1/check", body: fmt.Sprintf(`{"viewer":"v","now":%d,"candidates":[{"caps":[%s]}]}`, now+3_600_000, capJSON("a", 3)), status: 400, code: httpapi.CodeFutureTime},
		{name: "check with timeout 100", path: "/v1/check", header: with("X-Fcap-Timeout-Ms", "100"), body: `{"viewer":"v","candidates":[{"caps":[` + capJSON("a", 3) + `]}]}`, status: 200},
		{name: "check with timeout 0", path: "/v1/check", header: with("X-Fcap-Timeout-Ms", "0"), body: `{"viewer":"v","candidates":[{"caps":[` + capJSON("a", 3) + `]}]}`, status: 400, code: httpapi.CodeBadRequest, specRefuses: true},
		{name: "check with timeout abc", path: "/v1/check", header: with("X-Fcap-Timeout-Ms", "abc"), body: `{"viewer":"v","candidates":[{"caps":[` + capJSON("a", 3) + `]}]}`, status: 400, specRefuses: true},
		{name: "check with timeout 60001", path: "/v1/check", header: with("X-Fcap-Timeout-Ms", "60001"), body: `{"viewer":"v","candidates":[{"caps":[` + capJSON("a", 3) + `]}]}`, status: 400, specRefuses: true},
		{name: "check that is not JSON", path: "/v1/check", body: `viewer=v`, status: 400, specRefuses: true},
		// Not one JSON text; the library reads the first value only.
		{name: "check of two values", path: "/v1/check", body: `{"viewer":"v","candidates":[{"caps":[` + capJSON("a", 3) + `]}]} {}`, status: 400, code: httpapi.CodeBadRequest},
		{name: "check as text/plain", path: "/v1/check", header: with("Content-Type", "text/plain"), body: `{"viewer":"v","candidates":[{"caps":[` + capJSON("a", 3) + `]}]}`, status: 415, code: httpapi.CodeUnsupportedMediaType, specRefuses: true},
		{name: "check over the body limit", path: "/v1/check", body: huge, status: 413, code: httpapi.CodeTooLarge},
		{name: "check without a token", path: "/v1/check", header: map[string]string{"Content-Type": "application/json"}, body: `{"viewer":"v","candidates":[{"caps":[` + capJSON("a", 3) + `]}]}`, status: 401, code: httpapi.CodeUnauthenticated},
		{name: "check with a peer token", path: "/v1/check", header: with("Authorization", "Bearer "+specPeer), body: `{"viewer":"v","candidates":[{"caps":[` + capJSON("a", 3) + `]}]}`, status: 401, code: httpapi.CodeUnauthenticated},

		// allow
		{name: "allow", path: "/v1/allow", body: `{"viewer":"v","caps":[` + capJSON("al", 1) + `]}`, status: 200},
		{name: "allow denied", path: "/v1/allow", body: `{"viewer":"v","caps":[` + capJSON("al", 1) + `]}`, status: 200},
		{name: "allow without caps", path: "/v1/allow", body: `{"viewer":"v"}`, status: 400, specRefuses: true},
		{name: "allow with limit 0", path: "/v1/allow", body: `{"viewer":"v","caps":[` + capJSON("al", 0) + `]}`, status: 400, specRefuses: true},
		{name: "allow with a negative now", path: "/v1/allow", body: `{"viewer":"v","now":-1,"caps":[` + capJSON("al", 1) + `]}`, status: 400, specRefuses: true},
		{name: "allow with an empty viewer", path: "/v1/allow", body: `{"viewer":"","caps":[` + capJSON("al", 1) + `]}`, status: 400, specRefuses: true},

		// record
		{name: "record", path: "/v1/record", body: fmt.Sprintf(`{"viewer":"v","impression":{"id":"i1","time":%d,"caps":[%s]}}`, now, capJSON("rec", 3)), status: 202},
		{name: "record without a time", path: "/v1/record", body: `{"viewer":"v","impression":{"id":"i2","caps":[` + capJSON("rec", 3) + `]}}`, status: 202},
		{name: "record acknowledged once replicated", path: "/v1/record", body: fmt.Sprintf(`{"viewer":"v","ack":"replicated","impression":{"id":"i7","time":%d,"caps":[%s]}}`, now, capJSON("rec", 3)), status: 200},
		{name: "record with an unknown ack", path: "/v1/record", body: fmt.Sprintf(`{"viewer":"v","ack":"later","impression":{"id":"i8","time":%d,"caps":[%s]}}`, now, capJSON("rec", 3)), status: 400, specRefuses: true},
		{name: "record without an impression", path: "/v1/record", body: `{"viewer":"v"}`, status: 400, specRefuses: true},
		{name: "record without an id", path: "/v1/record", body: `{"viewer":"v","impression":{"caps":[` + capJSON("rec", 3) + `]}}`, status: 400, specRefuses: true},
		{name: "record of a non-numeric reservation", path: "/v1/record", body: `{"viewer":"v","impression":{"id":"i3","reservation":"abc","caps":[` + capJSON("rec", 3) + `]}}`, status: 400, specRefuses: true},
		{name: "record with an unknown scope", path: "/v1/record", body: `{"viewer":"v","impression":{"id":"i4","caps":[{"scope":"placement","id":"p","limit":1,"window":1000}]}}`, status: 400, code: httpapi.CodeBadRequest},
		{name: "record for a 300-byte viewer", path: "/v1/record", body: `{"viewer":"` + strings.Repeat("v", 300) + `","impression":{"id":"i5","caps":[` + capJSON("rec", 3) + `]}}`, status: 400, code: httpapi.CodeBadRequest},
		{name: "record in the future", path: "/v1/record", body: fmt.Sprintf(`{"viewer":"v","impression":{"id":"i6","time":%d,"caps":[%s]}}`, now+3_600_000, capJSON("rec", 3)), status: 400, code: httpapi.CodeFutureTime},

		// reserve
		{name: "reserve", path: "/v1/reserve", body: `{"viewer":"v","candidate":{"caps":[` + capJSON("res", 1) + `]},"ttl_ms":60000}`, status: 200},
		{name: "reserve denied", path: "/v1/reserve", body: `{"viewer":"v","candidate":{"caps":[` + capJSON("res", 1) + `]},"ttl_ms":60000}`, status: 200},
		{name: "reserve without ttl", path: "/v1/reserve", body: `{"viewer":"v","candidate":{"caps":[` + capJSON("res", 1) + `]}}`, status: 400, specRefuses: true},
		{name: "reserve with timeout abc", path: "/v1/reserve", header: with("X-Fcap-Timeout-Ms", "abc"), body: `{"viewer":"v","candidate":{"caps":[` + capJSON("res", 1) + `]},"ttl_ms":60000}`, status: 400, specRefuses: true},

		// release
		{name: "release", path: "/v1/release", body: `{"viewer":"rv","reservation":"` + live + `"}`, status: 200},
		{name: "release again", path: "/v1/release", body: `{"viewer":"rv","reservation":"` + live + `"}`, status: 404, code: httpapi.CodeUnknownReservation},
		{name: "release of an expired reservation", path: "/v1/release", body: `{"viewer":"rv","reservation":"` + expired + `"}`, status: 404, code: httpapi.CodeUnknownReservation},
		{name: "release without a viewer", path: "/v1/release", body: `{"reservation":"` + live + `"}`, status: 400, specRefuses: true},
		{name: "release of a non-number", path: "/v1/release", body: `{"viewer":"rv","reservation":"abc"}`, status: 400, specRefuses: true},
	}, identityAndVoidExchanges(auth, now)...))

	// The check answer holds every cap's remaining impressions, in the
	// order of the candidate's caps.
	var res httpapi.CheckResponse
	if err := json.Unmarshal(bodies["check"], &res); err != nil {
		t.Fatal(err)
	}
	if len(res.Verdicts) != 2 || fmt.Sprint(res.Verdicts[0].CapsRemaining) != "[3 5]" || fmt.Sprint(res.Verdicts[1].CapsRemaining) != "[5]" {
		t.Errorf("check: %+v, want caps_remaining [3 5] and [5]", res.Verdicts)
	}
	// An id never recorded: nothing taken back, said so.
	var vr httpapi.VoidResponse
	if err := json.Unmarshal(bodies["void of an unknown id"], &vr); err != nil || vr.Voided {
		t.Errorf("void of an unknown id: %s (%v), want voided false", bodies["void of an unknown id"], err)
	}
}

// identityAndVoidExchanges are TestOpenAPIAgreesWithALiveNode's link,
// resolve, unlink, erase and void requests, valid and not, and paths and
// methods the spec does not have; they follow its check, allow, record,
// reserve and release requests (a void names an impression recorded
// there).
func identityAndVoidExchanges(auth map[string]string, now int64) []exchange {
	with := func(k, v string) map[string]string { return withHeader(auth, k, v) }
	capJSON := specCap
	return []exchange{
		// identity
		{name: "link", path: "/v1/link", body: `{"device":"phone","viewer":"person"}`, status: 200},
		{name: "link to itself", path: "/v1/link", body: `{"device":"x","viewer":"x"}`, status: 400, code: httpapi.CodeBadRequest},
		{name: "link without a viewer", path: "/v1/link", body: `{"device":"phone"}`, status: 400, specRefuses: true},
		{name: "link with timeout 0", path: "/v1/link", header: with("X-Fcap-Timeout-Ms", "0"), body: `{"device":"phone","viewer":"person"}`, status: 400, specRefuses: true},
		{name: "resolve", path: "/v1/resolve", body: `{"device":"phone"}`, status: 200},
		{name: "resolve without a device", path: "/v1/resolve", body: `{}`, status: 400, specRefuses: true},
		{name: "unlink", path: "/v1/unlink", body: `{"device":"phone"}`, status: 200},
		{name: "erase", method: http.MethodDelete, path: "/v1/viewers/person", status: 204},
		{name: "erase again", method: http.MethodDelete, path: "/v1/viewers/person", status: 204},
		{name: "erase a 300-byte viewer", method: http.MethodDelete, path: "/v1/viewers/" + strings.Repeat("v", 300), status: 400, code: httpapi.CodeBadRequest},
		{name: "erase with timeout 0", method: http.MethodDelete, path: "/v1/viewers/person", header: with("X-Fcap-Timeout-Ms", "0"), status: 400, specRefuses: true},
		{name: "GET of a viewer", method: http.MethodGet, path: "/v1/viewers/person", status: 405, code: httpapi.CodeMethodNotAllowed},

		// void
		{name: "void", path: "/v1/void", body: fmt.Sprintf(`{"viewer":"v","impression":{"id":"i1","time":%d,"caps":[%s]}}`, now, capJSON("rec", 3)), status: 200},
		{name: "void again", path: "/v1/void", body: fmt.Sprintf(`{"viewer":"v","impression":{"id":"i1","time":%d,"caps":[%s]}}`, now, capJSON("rec", 3)), status: 200},
		{name: "void of an unknown id", path: "/v1/void", body: fmt.Sprintf(`{"viewer":"v","impression":{"id":"never","time":%d,"caps":[%s]}}`, now, capJSON("rec", 3)), status: 200},
		{name: "void without a time", path: "/v1/void", body: `{"viewer":"v","impression":{"id":"i1","caps":[` + capJSON("rec", 3) + `]}}`, status: 400, code: httpapi.CodeBadRequest, specRefuses: true},
		{name: "void without a viewer", path: "/v1/void", body: fmt.Sprintf(`{"impression":{"id":"i1","time":%d,"caps":[%s]}}`, now, capJSON("rec", 3)), status: 400, code: httpapi.CodeBadRequest, specRefuses: true},
		{name: "void without caps", path: "/v1/void", body: fmt.Sprintf(`{"viewer":"v","impression":{"id":"i1","time":%d}}`, now), status: 400, specRefuses: true},
		{name: "void with an unknown scope", path: "/v1/void", body: fmt.Sprintf(`{"viewer":"v","impression":{"id":"i1","time":%d,"caps":[{"scope":"placement","id":"p","limit":1,"window":1000}]}}`, now), status: 400, code: httpapi.CodeBadRequest},
		{name: "void in the future", path: "/v1/void", body: fmt.Sprintf(`{"viewer":"v","impression":{"id":"i1","time":%d,"caps":[%s]}}`, now+3_600_000, capJSON("rec", 3)), status: 400, code: httpapi.CodeFutureTime},
		{name: "void with timeout 0", path: "/v1/void", header: with("X-Fcap-Timeout-Ms", "0"), body: fmt.Sprintf(`{"viewer":"v","impression":{"id":"i1","time":%d,"caps":[%s]}}`, now, capJSON("rec", 3)), status: 400, specRefuses: true},
		{name: "void with a peer token", path: "/v1/void", header: with("Authorization", "Bearer "+specPeer), body: fmt.Sprintf(`{"viewer":"v","impression":{"id":"i1","time":%d,"caps":[%s]}}`, now, capJSON("rec", 3)), status: 401, code: httpapi.CodeUnauthenticated},

		// paths and methods the spec does not have
		{name: "GET of a route", method: http.MethodGet, path: "/v1/check", status: 405, code: httpapi.CodeMethodNotAllowed},
		{name: "PUT of a route", method: http.MethodPut, path: "/v1/record", body: `{}`, status: 405, code: httpapi.CodeMethodNotAllowed},
		{name: "an unknown path", path: "/v1/nope", body: `{}`, status: 404, code: httpapi.CodeNotFound},
		{name: "GET of an unknown path", method: http.MethodGet, path: "/v1/", status: 404, code: httpapi.CodeNotFound},
	}
}

// specCap is a campaign cap of one hour in the API's JSON.
func specCap(id string, limit int) string {
	return fmt.Sprintf(`{"scope":"campaign","id":%q,"limit":%d,"window":3600000}`, id, limit)
}

// withHeader is a copy of headers with k set to v.
func withHeader(headers map[string]string, k, v string) map[string]string {
	h := map[string]string{}
	for k, v := range headers {
		h[k] = v
	}
	h[k] = v
	return h
}

// reserveOn takes a reservation through the API and returns its id.
func reserveOn(t *testing.T, base string, auth map[string]string, viewer, body string) string {
	t.Helper()
	var res httpapi.ReserveResponse
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/reserve", strings.NewReader(body))
	for k, v := range auth {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil || res.Reservation == "" || res.Viewer != viewer {
		t.Fatalf("reserve %s: %d %+v %v", body, resp.StatusCode, res, err)
	}
	return res.Reservation
}

// tokenNode starts a node with an ad server's and a peer's token and
// waits until its API answers from the cluster.
func tokenNode(t *testing.T) *node.Node {
	t.Helper()
	cfg := node.DefaultLocalConfig("api-spec")
	cfg.Logger = quiet
	nodeclient.ServeAPI(&cfg)
	cfg.APITimeout = 2 * time.Second // a loaded test machine
	cfg.Security.Tokens = map[string]security.Role{specToken: security.RoleAdServer, specPeer: security.RolePeer}
	cfg.Security.PeerToken = specPeer
	nd := nodetest.Start(t, cfg)
	t.Cleanup(http.DefaultClient.CloseIdleConnections)
	probe := `{"viewer":"probe","caps":[{"scope":"campaign","id":"probe","limit":65535,"window":1}]}`
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		req, _ := http.NewRequest(http.MethodPost, "http://"+nd.HTTPAddr()+"/v1/allow", strings.NewReader(probe))
		req.Header.Set("Authorization", "Bearer "+specToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var v httpapi.Verdict
		json.NewDecoder(resp.Body).Decode(&v)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK && !v.FailOpen {
			return nd
		}
		if time.Now().After(deadline) {
			t.Fatalf("the JSON API never answered from the cluster: %d %+v", resp.StatusCode, v)
		}
	}
}

// TestOpenAPIAgreesWhenTheClusterIsDown: the answers of an API whose
// cluster cannot be reached (policy verdicts, 502, a full record queue,
// 503 once closed) are the spec's too.
func TestOpenAPIAgreesWhenTheClusterIsDown(t *testing.T) {
	dead := deadAddr(t)
	c, err := client.New(client.Config{
		Seeds: []string{dead}, Logger: quiet, DialTimeout: 10 * time.Millisecond,
		RecordQueue: 1, RecordRetryMin: time.Hour, RecordRetryMax: time.Hour, // the first record stays queued
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.New(c, httpapi.Options{Timeout: 50 * time.Millisecond}))
	defer srv.Close()
	json := map[string]string{"Content-Type": "application/json"}
	capJSON := `{"scope":"campaign","id":"c","limit":3,"window":3600000}`
	strictJSON := `{"scope":"campaign","id":"s","limit":3,"window":3600000,"mode":"strict"}`
	conformance(t, srv.URL, json, []exchange{
		{name: "check fails open and closed", path: "/v1/check", body: `{"viewer":"v","candidates":[{"caps":[` + capJSON + `]},{"caps":[` + strictJSON + `]}]}`, status: 200},
		{name: "allow fails open", path: "/v1/allow", body: `{"viewer":"v","caps":[` + capJSON + `]}`, status: 200},
		{name: "reserve fails closed", path: "/v1/reserve", body: `{"viewer":"v","candidate":{"caps":[` + strictJSON + `]},"ttl_ms":1000}`, status: 200},
		{name: "release", path: "/v1/release", body: `{"viewer":"v","reservation":"42"}`, status: 502, code: httpapi.CodeUnavailable},
		{name: "link", path: "/v1/link", body: `{"device":"d","viewer":"v"}`, status: 502, code: httpapi.CodeUnavailable},
		{name: "unlink", path: "/v1/unlink", body: `{"device":"d"}`, status: 502, code: httpapi.CodeUnavailable},
		{name: "erase", method: http.MethodDelete, path: "/v1/viewers/v", status: 502, code: httpapi.CodeUnavailable},
		{name: "void", path: "/v1/void", body: `{"viewer":"v","impression":{"id":"i1","time":1700000000000,"caps":[` + capJSON + `]}}`, status: 502, code: httpapi.CodeUnavailable},
		{name: "resolve", path: "/v1/resolve", body: `{"device":"d"}`, status: 502, code: httpapi.CodeUnavailable},
		{name: "record", path: "/v1/record", body: `{"viewer":"v","impression":{"id":"i1","caps":[` + capJSON + `]}}`, status: 202},
		{name: "record with the queue full", path: "/v1/record", body: `{"viewer":"v","impression":{"id":"i2","caps":[` + capJSON + `]}}`, status: 503, code: httpapi.CodeQueueFull},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	c.Close(ctx) // the queued record is dropped
	conformance(t, srv.URL, json, []exchange{
		{name: "check after close", path: "/v1/check", body: `{"viewer":"v","candidates":[{"caps":[` + capJSON + `]}]}`, status: 503, code: httpapi.CodeShuttingDown},
		{name: "record after close", path: "/v1/record", body: `{"viewer":"v","impression":{"id":"i3","caps":[` + capJSON + `]}}`, status: 503, code: httpapi.CodeShuttingDown},
	})
}

// deadAddr returns an address nothing listens on.
func deadAddr(t *testing.T) string {
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := srv.Listener.Addr().String()
	srv.Close()
	return addr
}

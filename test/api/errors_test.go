package api

import (
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/fcap-io/fcap/node"
	"github.com/fcap-io/fcap/node/nodetest"
	"github.com/fcap-io/fcap/test/nodeclient"
)

// TestBadJSONIsToldInJSONTerms: a body that does not decode is answered
// with the JSON field and the type it takes, not encoding/json's Go
// struct fields and Go types ("Go struct field Cap.candidates.caps.window
// of type int64").
func TestBadJSONIsToldInJSONTerms(t *testing.T) {
	cfg := node.DefaultLocalConfig("errors")
	cfg.Logger = quiet
	nodeclient.ServeAPI(&cfg)
	nd := nodetest.Start(t, cfg)
	waitReady(t, nd)
	for _, c := range []struct {
		path, body, says string
	}{
		{"/v1/check", `{"viewer":"v","candidates":[{"caps":[{"scope":"campaign","id":"c","limit":1,"window":"1h"}]}]}`,
			`bad JSON: field "candidates.caps.window" is string, want an integer`},
		{"/v1/allow", `{"viewer":7,"caps":[]}`, `bad JSON: field "viewer" is number, want a string`},
		{"/v1/allow", `{"viewer":"v","caps":[{"limit":1.5}]}`, `bad JSON: field "caps.limit" is number 1.5, want an integer`},
		{"/v1/allow", `{"viewer":"v","caps":{}}`, `bad JSON: field "caps" is object, want an array`},
		{"/v1/allow", `[1]`, `bad JSON: the body is array, want an object`},
		{"/v1/allow", `{"viewer":"v","caps":[],"extra":1}`, `bad JSON: unknown field "extra"`},
		{"/v1/allow", `{"viewer":"v",}`, `bad JSON: invalid character '}' looking for beginning of object key string (at byte 15)`},
		{"/v1/allow", `{"viewer":"v"`, `bad JSON: the body ends in the middle of a value`},
		{"/v1/allow", ``, `bad JSON: empty body`},
	} {
		var e struct{ Error string }
		st := post(t, nd, c.path, c.body, &e)
		if st != 400 || e.Error != c.says {
			t.Errorf("%s %s: %d %q; want 400 %q", c.path, c.body, st, e.Error, c.says)
		}
		if strings.Contains(e.Error, "Go ") || strings.Contains(e.Error, "int64") || strings.Contains(e.Error, "httpapi.") {
			t.Errorf("%s %s: %q names Go internals", c.path, c.body, e.Error)
		}
	}
}

// TestNodeServesItsOpenAPISpec: GET /openapi.yaml on a node's HTTP
// address answers docs/openapi.yaml, byte for byte, as YAML; a node with
// the JSON API off serves neither.
func TestNodeServesItsOpenAPISpec(t *testing.T) {
	want, err := os.ReadFile("../../docs/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	get := func(nd *node.Node) (int, string, string) {
		resp, err := http.Get("http://" + nd.HTTPAddr() + "/openapi.yaml")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
	}
	cfg := node.DefaultLocalConfig("spec")
	cfg.Logger = quiet
	nodeclient.ServeAPI(&cfg)
	st, ct, body := get(nodetest.Start(t, cfg))
	if st != http.StatusOK || ct != "application/yaml" || body != string(want) {
		t.Errorf("GET /openapi.yaml: %d %q, %d bytes; want 200 application/yaml and docs/openapi.yaml's %d bytes", st, ct, len(body), len(want))
	}
	off := node.DefaultLocalConfig("spec-off")
	off.Logger = quiet
	nodeclient.ServeAPI(&off)
	off.HTTPAPI = false
	if st, _, _ := get(nodetest.Start(t, off)); st != http.StatusNotFound {
		t.Errorf("GET /openapi.yaml with the JSON API off: %d, want 404", st)
	}
}

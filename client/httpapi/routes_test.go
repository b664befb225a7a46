package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/fcap-io/fcap/client/httpapi"
)

// TestOpenAPIListsEveryRoute keeps docs/openapi.yaml in step with the
// routes the API serves.
func TestOpenAPIListsEveryRoute(t *testing.T) {
	doc, err := os.ReadFile("../../docs/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	api := httpapi.New(nil, httpapi.Options{})
	for _, path := range []string{"/v1/check", "/v1/allow", "/v1/record", "/v1/reserve", "/v1/release", "/v1/link", "/v1/unlink", "/v1/resolve"} {
		if !strings.Contains(string(doc), "\n  "+path+":\n    post:") {
			t.Errorf("docs/openapi.yaml does not describe POST %s", path)
		}
		// and the API serves it: a GET is refused as a wrong method, not unknown.
		req := httptest.NewRequest(http.MethodGet, path, nil)
		w := httptest.NewRecorder()
		api.ServeHTTP(w, req)
		if w.Code != http.StatusMethodNotAllowed {
			t.Errorf("GET %s: %d, want 405 (the route exists for POST)", path, w.Code)
		}
	}
}

package node_test

import (
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestHTTPRequestMetrics: requests to the HTTP address are counted by
// route and code and timed by route; an unknown path is "other".
func TestHTTPRequestMetrics(t *testing.T) {
	nodes := settledCluster(t, "node", 1)
	t.Cleanup(http.DefaultClient.CloseIdleConnections)
	base := "http://" + nodes[0].HTTPAddr()
	for _, path := range []string{"/readyz", "/healthz", "/nope/" + strings.Repeat("x", 40)} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	resp, err := http.Post(base+"/v1/check", "application/json", strings.NewReader("{not json"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	metrics := httpGet(t, base+"/metrics")
	value := func(series string) float64 {
		m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindStringSubmatch(metrics)
		if m == nil {
			return -1
		}
		v, _ := strconv.ParseFloat(m[1], 64)
		return v
	}
	for _, c := range []struct {
		series string
		want   float64
	}{
		{`fcap_http_requests_total{code="200",route="/readyz"}`, 1},
		{`fcap_http_requests_total{code="200",route="/healthz"}`, 1},
		{`fcap_http_requests_total{code="404",route="other"}`, 1},
		{`fcap_http_requests_total{code="400",route="/v1/check"}`, 1},
		{`fcap_http_request_duration_seconds_count{route="/v1/check"}`, 1},
	} {
		if got := value(c.series); got != c.want {
			t.Errorf("%s = %v, want %v", c.series, got, c.want)
		}
	}
	if strings.Contains(metrics, "xxxxxxxx") {
		t.Error("an unknown path became a label value")
	}
}

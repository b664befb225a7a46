package api

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fcap-io/fcap/node"
	"github.com/fcap-io/fcap/node/nodetest"
	"github.com/fcap-io/fcap/test/cluster"
	"github.com/fcap-io/fcap/test/nodeclient"
)

// TestNodeInternalClientMetricsAreLabelled: a node's /metrics carries the
// metrics of the client its JSON API goes through, and dashboards and
// alerts sum fcap_client_* across everything scraped: each of the node's
// fcap_client_* series has role="node-internal", so they can be told
// from the ad servers' (which have no role label).
func TestNodeInternalClientMetricsAreLabelled(t *testing.T) {
	cfg := node.DefaultLocalConfig("metrics")
	cfg.Logger = quiet
	nodeclient.ServeAPI(&cfg)
	nd := nodetest.Start(t, cfg)
	var metrics string
	cluster.Eventually(t, 30*time.Second, func() bool {
		resp, err := http.Get("http://" + nd.HTTPAddr() + "/metrics")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		metrics = string(b)
		return strings.Contains(metrics, "fcap_client_calls_total")
	}, "the node's /metrics has no client metrics: its JSON API did not start")
	series := 0
	for _, line := range strings.Split(metrics, "\n") {
		if !strings.HasPrefix(line, "fcap_client_") {
			continue
		}
		series++
		if !strings.Contains(line, `role="node-internal"`) {
			t.Errorf("a node's internal client exports %s without role=\"node-internal\"", line)
		}
	}
	if series == 0 {
		t.Fatal("no fcap_client_ series in the node's /metrics")
	}
}

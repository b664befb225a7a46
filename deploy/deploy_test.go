// Package deploy holds deployment files; its test keeps the dashboard and
// the alert rules built on metric names fcapd, the client and fcapingest
// export.
package deploy

import (
	"context"
	"io"
	"log/slog"
	"os"
	"regexp"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/node"
	"github.com/fcap-io/fcap/node/region"
)

func TestDashboardAndAlertsUseExportedMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	cfg := node.DefaultLocalConfig("deploy-test")
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.Registerer = reg
	cfg.Gatherer = reg
	cfg.HTTPAPI = false
	cfg.Storage.DataDir = t.TempDir() // the log and snapshot metrics exist only on a durable node
	// The region link's metrics exist only on a node with a peer region
	// (one nobody answers for: the link is down, its series are there).
	cfg.Region.Name = "here"
	cfg.Region.Peers = []region.Peer{{Name: "there", Seeds: []string{"127.0.0.1:1"}}}
	nd, err := node.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		nd.Shutdown(ctx)
	}()
	ccfg := client.DefaultConfig(nd.DataAddr())
	ccfg.Registerer = reg
	c, err := client.New(ccfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	defer runIngester(t, reg, c)() // fcapingest's metrics (ingest_test.go)

	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, f := range families {
		have[f.GetName()] = true
	}
	if len(have) < 20 {
		t.Fatalf("only %d metric families gathered", len(have))
	}
	name := regexp.MustCompile(`\bfcap_[a-z_]+`)
	for _, file := range []string{"grafana/fcap-dashboard.json", "prometheus/fcap-alerts.yaml"} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		used := 0
		for _, m := range name.FindAllString(string(b), -1) {
			base := regexp.MustCompile(`_(bucket|sum|count)$`).ReplaceAllString(m, "")
			if !have[base] {
				t.Errorf("%s uses %s, which neither fcapd, the client nor fcapingest exports", file, m)
			}
			used++
		}
		if used == 0 {
			t.Errorf("%s uses no fcap metric", file)
		}
	}
}

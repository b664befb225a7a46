package deploy

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/client/ingest"
)

// runIngester runs an ingester (fcapingest's library) registered on reg,
// recording through c, against a Kafka in this process until it has
// accounted for one impression: every metric it exports then has a
// series, as on a live fcapingest. The returned function stops it.
func runIngester(t *testing.T, reg *prometheus.Registry, c *client.Client) (stop func()) {
	t.Helper()
	kc, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "impressions"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := kgo.NewClient(kgo.SeedBrokers(kc.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	value := `{"id":"deploy-test","viewer":"v","caps":[{"scope":"campaign","id":"c","limit":1,"window":"1h"}]}`
	if err := p.ProduceSync(ctx, &kgo.Record{Topic: "impressions", Value: []byte(value)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cfg := ingest.DefaultConfig(kc.ListenAddrs(), "impressions")
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.Registerer = reg
	cfg.CommitInterval = 10 * time.Millisecond
	in, err := ingest.New(cfg, c)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stopRun := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- in.Run(runCtx) }()
	stop = func() {
		stopRun()
		<-done
		kc.Close()
	}
	// The lag gauge gets its series when the partition is assigned, which
	// can be before the record is accounted for: wait for both.
	for ctx.Err() == nil {
		families, _ := reg.Gather()
		seen := 0
		for _, f := range families {
			switch f.GetName() {
			case "fcap_ingest_lag_records":
				if len(f.GetMetric()) > 0 {
					seen++
				}
			case "fcap_ingest_records_total":
				for _, m := range f.GetMetric() {
					if m.GetCounter().GetValue() >= 1 {
						seen++
						break
					}
				}
			}
		}
		if seen == 2 {
			return stop
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	t.Fatal("the ingester accounted for nothing in 30s")
	return nil
}

package conformance_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/node"
	"github.com/fcap-io/fcap/test/cluster"
	"github.com/fcap-io/fcap/test/conformance"
)

// TestClusterCasesStartAfterEarlierCases: cases share the cluster, whose
// sweeper frees what has aged out by the newest time it saw. A case that
// ran its ticks behind an earlier case's could have its counters swept
// between two calls (a flake seen in CI's e2e run). Each case's ticks now
// start past every earlier one, so a sweep between calls frees nothing
// the case still counts.
func TestClusterCasesStartAfterEarlierCases(t *testing.T) {
	cfg := node.DefaultLocalConfig("conformance-sweep")
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	nd, err := node.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer nd.Shutdown(context.Background())
	ccfg := cluster.ClientConfig(nd.DataAddr())
	ccfg.Logger = cfg.Logger
	c, err := client.New(ccfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	allow := func(cp conformance.Capper, viewer string, tick int64) bool {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			ok, err := cp.Allow(viewer, "c", tick)
			if err == nil {
				return ok
			}
			if time.Now().After(deadline) { // a lone node turns active a moment after it listens
				t.Fatal(err)
			}
		}
	}
	factory := conformance.Cluster(c, "sweep-", 0)
	first, _ := factory(1, 5, 10)
	allow(first, "u", 1000) // the cluster's newest time is now 1000
	second, _ := factory(2, 2, 10)
	for i := range 2 {
		if !allow(second, "u1", 0) {
			t.Fatalf("allow %d of a cap of 2 was denied", i+1)
		}
	}
	nd.Engine().Sweep(1 << 30)
	if allow(second, "u1", 1) {
		t.Fatal("third allow of a cap of 2 within its window was granted: the sweep freed the case's counter")
	}
}

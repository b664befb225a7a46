package node_test

import (
	"context"
	"testing"
	"time"

	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/client/httpapi"
	"github.com/fcap-io/fcap/node"
	"github.com/fcap-io/fcap/node/nodetest"
)

// The node module links no client (node/nodetest imports none), and its
// tests cannot import the test module (which requires this one), so
// these are test/nodeclient's helpers again, for this package's tests.

// serveAPI makes a node serve the JSON API (client/httpapi's gateway),
// as cmd/fcapd's do.
func serveAPI(cfg *node.Config) {
	cfg.API = func(env node.APIEnv) (node.API, error) { return httpapi.Start(httpapi.Config(env)) }
}

// settledCluster is nodetest.SettledCluster with nodes serving the JSON
// API (serveAPI, before each mutate), as fcapd's do.
func settledCluster(t testing.TB, prefix string, n int, mutate ...func(*node.Config)) []*node.Node {
	t.Helper()
	return nodetest.SettledCluster(t, prefix, n, append([]func(*node.Config){serveAPI}, mutate...)...)
}

// clientTimeout is the deadline of every call, first dial and Record
// batch of a client built by newClient: race-built nodes on a busy
// machine answer far later than the client's production defaults.
const clientTimeout = 5 * time.Second

// newClient builds a client of nodes with deadlines of seconds
// (clientTimeout), logging to nodetest.Quiet before each mutate changes
// its config, closes it when the test ends, and waits (up to 60 s) until
// it knows the topology and is connected to every active member.
func newClient(t testing.TB, nodes []*node.Node, mutate ...func(*client.Config)) *client.Client {
	t.Helper()
	cfg := client.DefaultConfig(nodetest.Seeds(nodes...)...)
	cfg.Timeout, cfg.DialTimeout, cfg.RecordTimeout = clientTimeout, clientTimeout, clientTimeout
	cfg.Logger = nodetest.Quiet
	for _, m := range mutate {
		m(&cfg)
	}
	c, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c.Close(ctx)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}

// Package nodetest starts fcap nodes inside a test's own process, on
// loopback with ports the kernel picks, and stops them when the test ends:
// what net/http/httptest is to an HTTP server. What only real processes
// show (kill -9, restart, a node's flags) belongs to test/cluster.
package nodetest

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/client/httpapi"
	"github.com/fcap-io/fcap/node"
	"github.com/fcap-io/fcap/test/cluster"
)

// Quiet drops every record: a node's log is noise in a test that passes.
var Quiet = slog.New(slog.DiscardHandler)

// ServeAPI makes a node serve the JSON API (client/httpapi's gateway),
// as cmd/fcapd's do.
func ServeAPI(cfg *node.Config) {
	cfg.API = func(env node.APIEnv) (node.API, error) { return httpapi.Start(httpapi.Config(env)) }
}

// Start starts a node from cfg and shuts it down when the test ends,
// giving the shutdown ten seconds. A node that does not start fails the
// test.
func Start(t testing.TB, cfg node.Config) *node.Node {
	t.Helper()
	nd, err := node.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		nd.Shutdown(ctx)
	})
	return nd
}

// Cluster starts n nodes named prefix-0 to prefix-<n-1> from
// DefaultLocalConfig, logging to Quiet, the later ones joining the first.
// They serve the JSON API, as fcapd's do (ServeAPI). Each mutate changes
// every node's config before it starts. Cluster does
// not wait for the nodes to see each other: see Settle.
func Cluster(t testing.TB, prefix string, n int, mutate ...func(*node.Config)) []*node.Node {
	t.Helper()
	var nodes []*node.Node
	for i := range n {
		cfg := node.DefaultLocalConfig(fmt.Sprintf("%s-%d", prefix, i))
		cfg.Logger = Quiet
		ServeAPI(&cfg)
		if i > 0 {
			cfg.Membership.Seeds = []string{nodes[0].GossipAddr()}
		}
		for _, m := range mutate {
			m(&cfg)
		}
		nodes = append(nodes, Start(t, cfg))
	}
	return nodes
}

// SettledCluster starts a Cluster and waits (a minute, see Settle) until
// every node is ready and sees all of them.
func SettledCluster(t testing.TB, prefix string, n int, mutate ...func(*node.Config)) []*node.Node {
	t.Helper()
	nodes := Cluster(t, prefix, n, mutate...)
	Settle(t, nodes, 60*time.Second)
	return nodes
}

// Settle waits until every node is ready and sees all of them as members,
// failing the test after timeout. Pass a generous one (a minute): gossip
// on a busy machine may suspect a node that is only slow, and converging
// again takes seconds.
func Settle(t testing.TB, nodes []*node.Node, timeout time.Duration) {
	t.Helper()
	for deadline := time.Now().Add(timeout); !Settled(nodes); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d nodes did not converge in %v", len(nodes), timeout)
		}
	}
}

// Settled reports whether every node is ready, sees all of them as
// members, and holds a majority for strict writes.
func Settled(nodes []*node.Node) bool {
	for _, nd := range nodes {
		if len(nd.Ring().Members()) != len(nodes) || !nd.Ready() || !nd.Authority() {
			return false
		}
	}
	return true
}

// Seeds returns the data-plane addresses of nodes: a client's seeds.
func Seeds(nodes ...*node.Node) []string {
	s := make([]string, len(nodes))
	for i, nd := range nodes {
		s[i] = nd.DataAddr()
	}
	return s
}

// NewClient builds a ready client of nodes, as cluster.NewClient does
// (deadlines of seconds: a busy machine runs these tests), logging to
// Quiet before each mutate changes its config.
func NewClient(t testing.TB, nodes []*node.Node, mutate ...func(*client.Config)) *client.Client {
	t.Helper()
	quiet := func(cfg *client.Config) { cfg.Logger = Quiet }
	return cluster.NewClient(t, Seeds(nodes...), append([]func(*client.Config){quiet}, mutate...)...)
}

// Package nodeclient joins node/nodetest's in-process nodes to the
// client: a client of them, and the JSON API's gateway (client/httpapi)
// served by them. It lives in the test module because node/nodetest, in
// the node module, must link no client.
package nodeclient

import (
	"testing"

	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/client/httpapi"
	"github.com/fcap-io/fcap/node"
	"github.com/fcap-io/fcap/node/nodetest"
	"github.com/fcap-io/fcap/test/cluster"
)

// ServeAPI makes a node serve the JSON API (client/httpapi's gateway),
// as cmd/fcapd's do. Pass it to nodetest.Cluster as a mutate.
func ServeAPI(cfg *node.Config) {
	cfg.API = func(env node.APIEnv) (node.API, error) { return httpapi.Start(httpapi.Config(env)) }
}

// NewClient builds a ready client of nodes, as cluster.NewClient does
// (deadlines of seconds: a busy machine runs these tests), logging to
// nodetest.Quiet before each mutate changes its config.
func NewClient(t testing.TB, nodes []*node.Node, mutate ...func(*client.Config)) *client.Client {
	t.Helper()
	quiet := func(cfg *client.Config) { cfg.Logger = nodetest.Quiet }
	return cluster.NewClient(t, nodetest.Seeds(nodes...), append([]func(*client.Config){quiet}, mutate...)...)
}

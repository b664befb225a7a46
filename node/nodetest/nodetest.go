// Package nodetest starts fcap nodes inside a test's own process, on
// loopback with ports the kernel picks, and stops them when the test ends:
// what net/http/httptest is to an HTTP server. What only real processes
// show (kill -9, restart, a node's flags) belongs to test/cluster.
//
// It imports no client: the node module links none. A client of these
// nodes (test/nodeclient.NewClient) and the JSON API's gateway
// (test/nodeclient.ServeAPI) live in the test module.
package nodetest

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fcap-io/fcap/node"
	"github.com/fcap-io/fcap/ring"
)

// Quiet drops every record: a node's log is noise in a test that passes.
var Quiet = slog.New(slog.DiscardHandler)

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
// They serve no JSON API unless a mutate sets node.Config.API
// (test/nodeclient.ServeAPI does). Each mutate changes every node's
// config before it starts. Cluster does not wait for the nodes to see
// each other: see Settle.
func Cluster(t testing.TB, prefix string, n int, mutate ...func(*node.Config)) []*node.Node {
	t.Helper()
	var nodes []*node.Node
	for i := range n {
		cfg := node.DefaultLocalConfig(fmt.Sprintf("%s-%d", prefix, i))
		cfg.Logger = Quiet
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

// OwnedBy returns n viewer ids, prefix-0, prefix-1 and so on, whose
// primary owner in r is the member named name; it fails the test when
// the first 100,000 ids do not hold n of them.
func OwnedBy(t testing.TB, r *ring.Ring, name, prefix string, n int) []string {
	t.Helper()
	var out []string
	for i := 0; len(out) < n && i < 100_000; i++ {
		v := fmt.Sprintf("%s-%d", prefix, i)
		if _, owners := r.Lookup(v); len(owners) > 0 && r.Member(owners[0]).Name == name {
			out = append(out, v)
		}
	}
	if len(out) < n {
		t.Fatalf("fewer than %d viewers owned by %s", n, name)
	}
	return out
}

// LogBuffer is a log sink a node and the test may share: a test reads
// what the node logged while the node still writes.
type LogBuffer struct {
	mu sync.Mutex
	b  strings.Builder // guarded by mu
}

func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

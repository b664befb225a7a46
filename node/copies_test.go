package node_test

import (
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fcap-io/fcap/node"
	"github.com/fcap-io/fcap/node/nodetest"
)

// TestLoneNodeWarnsItHasNoBackup: one node started with --replicas 2
// served as if all were well. It is ready (it serves), but its log warns
// that no partition has a backup and /readyz's body says so; with a
// second member the warning goes from /readyz.
func TestLoneNodeWarnsItHasNoBackup(t *testing.T) {
	var logs nodetest.LogBuffer
	nodes := nodetest.SettledCluster(t, "lone", 1, func(cfg *node.Config) {
		cfg.Membership.Ring.Replicas = 2
		cfg.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	})
	readyz := func(nd *node.Node) (int, string) {
		resp, err := http.Get("http://" + nd.HTTPAddr() + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s; log:\n%s", what, logs.String())
			}
		}
	}
	waitFor("no WARN saying the lone node has no backup", func() bool {
		for _, line := range strings.Split(logs.String(), "\n") {
			if strings.Contains(line, `"level":"WARN"`) && strings.Contains(line, "no backup: --replicas 2") {
				return true
			}
		}
		return false
	})
	if code, body := readyz(nodes[0]); code != http.StatusOK || !strings.Contains(body, "warning: no backup: --replicas 2") {
		t.Errorf("/readyz of a lone node with --replicas 2: %d %q; want 200 and the warning", code, body)
	}

	second := nodetest.Start(t, func() node.Config {
		cfg := node.DefaultLocalConfig("lone-1")
		cfg.Logger = nodetest.Quiet
		cfg.Membership.Ring.Replicas = 2
		cfg.Membership.Seeds = []string{nodes[0].GossipAddr()}
		return cfg
	}())
	nodetest.Settle(t, []*node.Node{nodes[0], second}, time.Minute)
	waitFor("the warning stays on /readyz with two members", func() bool {
		code, body := readyz(nodes[0])
		return code == http.StatusOK && !strings.Contains(body, "warning")
	})
}

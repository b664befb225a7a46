package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/test/cluster"
)

// TestEraseSurvivesWholeClusterKill9: a viewer with impressions on caps of
// every algorithm, a remembered impression id and a linked device is
// erased on three durable nodes (R=2); then every node is killed with
// kill -9 and restarted from its log and snapshots. Nothing of the viewer
// comes back on any owner (fcapctl keys), the device is its own viewer
// again, and a Check shows every cap's full limit.
func TestEraseSurvivesWholeClusterKill9(t *testing.T) {
	const viewer, device = "erase-me", "erase-me-phone"
	nodes, c, caps, _ := recordedCluster(t, viewer, "erase", 5)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.Link(ctx, device, viewer); err != nil {
		t.Fatalf("link: %v", err)
	}
	for _, cp := range caps {
		if n := countOf(t, c, viewer, cp); n != 5 {
			t.Fatalf("%s: %d counted before the erasure, want 5", cp.ID, n)
		}
	}

	if err := c.Erase(ctx, viewer); err != nil {
		t.Fatalf("erase: %v", err)
	}
	assertErased(t, nodes, viewer, device)
	if got := sum(t, nodes, "fcap_erased_viewers_total"); got != 1 {
		t.Errorf("fcap_erased_viewers_total = %v over the nodes, want 1", got)
	}

	killAndRestart(t, nodes)
	assertErased(t, nodes, viewer, device)
	c2 := cluster.NewClient(t, cluster.Seeds(nodes...))
	for _, cp := range caps {
		if n := countOf(t, c2, viewer, cp); n != 0 {
			t.Errorf("%s: %d counted after the erasure and a restart, want 0", cp.ID, n)
		}
	}
	resolved, err := c2.Resolve(ctx, device)
	if err != nil || resolved != device {
		t.Errorf("Resolve(%q) after the erasure = %q, %v; want the device itself", device, resolved, err)
	}
	// Erasing again (a retried privacy request), through fcapctl, is fine.
	if out := runFcapctl(t, "erase", "--addr", nodes[1].Data, viewer); !strings.Contains(out, "erased") {
		t.Errorf("fcapctl erase printed %q", out)
	}
}

// assertErased waits until no owner of viewer holds anything of it
// (fcapctl keys on every owner) and device holds no link.
func assertErased(t *testing.T, nodes []*cluster.Node, viewer, device string) {
	t.Helper()
	cluster.Eventually(t, 30*time.Second, func() bool {
		for _, id := range []string{viewer, device} {
			owners := ownerStates(t, nodes, id)
			if len(owners) != 2 {
				return false
			}
			for _, o := range owners {
				if o.Error != "" || o.State == nil {
					return false
				}
				if id == viewer && o.State.Found {
					return false
				}
				if id == device && (o.State.LinkedTo != "" || len(o.State.Devices) > 0) {
					return false
				}
			}
		}
		return true
	}, "an owner still holds something of the erased viewer")
}

// recordedCluster starts three durable nodes (R=2) and records n
// impressions (prefix-imp-0, ...) for viewer on caps of every algorithm,
// one strict, each with its time set; it returns the nodes, a client, the
// caps and what it recorded.
func recordedCluster(t *testing.T, viewer, prefix string, n int) ([]*cluster.Node, *client.Client, []fcap.Cap, []client.RecordItem) {
	t.Helper()
	nodes := cluster.StartCluster(t, 3, cluster.Options{Replicas: 2, DataDir: t.TempDir()})
	cluster.WaitActive(t, nodes, 3)
	c := cluster.NewClient(t, cluster.Seeds(nodes...))
	caps := []fcap.Cap{
		{Scope: "campaign", ID: prefix + "-s", Limit: 50, Window: time.Hour},
		{Scope: "campaign", ID: prefix + "-f", Limit: 50, Window: time.Hour, Algorithm: fcap.Fixed},
		{Scope: "campaign", ID: prefix + "-b", Limit: 50, Window: time.Hour, Algorithm: fcap.Buckets},
		{Scope: "campaign", ID: prefix + "-strict", Limit: 50, Window: time.Hour, Mode: fcap.Strict},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	now := time.Now().UnixMilli()
	var items []client.RecordItem
	for i := range n {
		items = append(items, client.RecordItem{Viewer: viewer, Impression: fcap.Impression{ID: fmt.Sprint(prefix, "-imp-", i), Time: now + int64(i), Caps: caps}})
	}
	for i, ack := range c.RecordSync(ctx, items) {
		if ack.Err != nil || ack.Status != fcap.Recorded {
			t.Fatalf("record %d: %v %v", i, ack.Status, ack.Err)
		}
	}
	return nodes, c, caps, items
}

// killAndRestart kills every node with kill -9, restarts each from its
// data dir and waits until they are active again.
func killAndRestart(t *testing.T, nodes []*cluster.Node) {
	t.Helper()
	cluster.KillAll(nodes)
	for _, n := range nodes {
		n.Restart()
	}
	cluster.WaitActive(t, nodes, 3)
}

// ownerState is one owner's answer in "fcapctl keys --json".
type ownerState struct {
	Error string
	State *struct {
		Found    bool
		LinkedTo string `json:"linked_to"`
		Devices  []string
		Counters []struct {
			Algorithm string
			Values    []int64
		}
	}
}

// ownerStates runs "fcapctl keys --json id" and returns what each owner
// holds.
func ownerStates(t *testing.T, nodes []*cluster.Node, id string) []ownerState {
	t.Helper()
	out := runFcapctl(t, "keys", "--addr", nodes[0].Data, "--json", id)
	var ks struct{ Owners []ownerState }
	if err := json.Unmarshal([]byte(out), &ks); err != nil {
		t.Fatalf("fcapctl keys: %v\n%s", err, out)
	}
	return ks.Owners
}

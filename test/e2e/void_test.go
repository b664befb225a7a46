package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/test/cluster"
)

// TestVoidSurvivesWholeClusterKill9: three impressions on caps of every
// algorithm (one strict) are recorded on three durable nodes (R=2), one
// is voided; on both owners its counts are gone at once. Then every node
// is killed with kill -9 and restarted from its log and snapshots: the
// void holds on both owners (fcapctl keys), a Check counts two, a late
// Record of the voided id counts nothing, the owners and their logs
// agree (fcapctl verify), and voiding again through fcapctl is a no-op.
func TestVoidSurvivesWholeClusterKill9(t *testing.T) {
	const viewer = "void-me"
	nodes, c, caps, items := recordedCluster(t, viewer, "void", 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	bot := items[1].Impression
	voided, err := c.Void(ctx, viewer, bot)
	if err != nil || !voided {
		t.Fatalf("Void = %v, %v; want true", voided, err)
	}
	if voided, err := c.Void(ctx, viewer, fcap.Impression{ID: "never-recorded", Time: bot.Time, Caps: caps}); err != nil || voided {
		t.Fatalf("Void of an unknown id = %v, %v; want false", voided, err)
	}
	// Acknowledged: both owners hold the void already.
	assertOwnersCount(t, nodes, viewer, 2)
	if got := sum(t, nodes, `fcap_voided_impressions_total{counted="true"}`); got != 1 {
		t.Errorf(`fcap_voided_impressions_total{counted="true"} = %v over the nodes, want 1`, got)
	}

	killAndRestart(t, nodes)
	assertOwnersCount(t, nodes, viewer, 2)
	c2 := cluster.NewClient(t, cluster.Seeds(nodes...))
	for _, cp := range caps {
		if n := countOf(t, c2, viewer, cp); n != 2 {
			t.Errorf("%s: %d counted after the void and a restart, want 2", cp.ID, n)
		}
	}
	// A late copy of the voided impression (a retry still queued) does
	// not count.
	for _, ack := range c2.RecordSync(ctx, []client.RecordItem{{Viewer: viewer, Impression: bot}}) {
		if ack.Err != nil || ack.Status != fcap.Duplicate {
			t.Errorf("a late Record of the voided id: %v %v, want duplicate", ack.Status, ack.Err)
		}
	}
	assertOwnersCount(t, nodes, viewer, 2)
	if rep, code := runVerify(t, nodes[0].Data); code != 0 {
		t.Errorf("fcapctl verify after the restart: exit %d: %+v", code, rep)
	}
	// Voiding again (a retried refund), through fcapctl, changes nothing.
	out := runFcapctl(t, "void", "--addr", nodes[2].Data, "--time", fmt.Sprint(bot.Time), viewer, bot.ID,
		"campaign:void-s:50:3600000+campaign:void-f:50:3600000:fixed+campaign:void-b:50:3600000:buckets+campaign:void-strict:50:3600000:strict")
	if !strings.Contains(out, "voided "+bot.ID) {
		t.Errorf("fcapctl void printed %q", out)
	}
	assertOwnersCount(t, nodes, viewer, 2)
}

// assertOwnersCount waits until each of viewer's two owners counts want
// impressions on every one of its counters (fcapctl keys: a sliding
// counter's timestamps, a fixed or bucketed counter's counts).
func assertOwnersCount(t *testing.T, nodes []*cluster.Node, viewer string, want int64) {
	t.Helper()
	cluster.Eventually(t, 30*time.Second, func() bool {
		owners := ownerStates(t, nodes, viewer)
		if len(owners) != 2 {
			return false
		}
		for _, o := range owners {
			if o.Error != "" || o.State == nil || len(o.State.Counters) != 4 {
				return false
			}
			for _, k := range o.State.Counters {
				n := int64(len(k.Values))
				if k.Algorithm != "sliding" {
					n = 0
					for _, v := range k.Values {
						n += v
					}
				}
				if n != want {
					t.Logf("an owner counts %d on a %s counter", n, k.Algorithm)
					return false
				}
			}
		}
		return true
	}, "the owners of %s do not each count %d impressions", viewer, want)
}

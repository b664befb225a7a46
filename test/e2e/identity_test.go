package e2e

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/proto"
	"github.com/fcap-io/fcap/test/cluster"
)

// identityClient is a client with a generous deadline: these tests are
// about counts, not latency.
func identityClient(t *testing.T, nodes ...*cluster.Node) *client.Client {
	t.Helper()
	return cluster.NewClient(t, seeds(nodes...))
}

// TestOneViewerOnThreeDevices: a person on three devices hits a cap of 3
// after 3 impressions in total, whatever the order of devices, through a
// 3-node cluster; the viewer id itself sees the same count.
func TestOneViewerOnThreeDevices(t *testing.T) {
	nodes := cluster.StartCluster(t, 3, cluster.Options{Replicas: 2})
	cluster.WaitActive(t, nodes, 3)
	c := identityClient(t, nodes...)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	for _, mode := range []fcap.Mode{fcap.Soft, fcap.Strict} {
		for trial := range 4 {
			person := fmt.Sprintf("person-%v-%d", mode, trial)
			devices := []string{person + "-phone", person + "-tv", person + "-laptop"}
			for _, d := range devices {
				if n, err := c.Link(ctx, d, person); err != nil || n != 0 {
					t.Fatalf("Link(%s, %s): %d %v", d, person, n, err)
				}
			}
			capc := fcap.Cap{Scope: "campaign", ID: "three", Limit: 3, Window: time.Hour, Mode: mode}
			granted := 0
			for i := range 6 {
				d := devices[rng.IntN(len(devices))]
				vd, err := c.Allow(ctx, d, []fcap.Cap{capc}, client.Device())
				if err != nil || vd.Failed() {
					t.Fatalf("Allow %d on %s: %+v %v", i, d, vd, err)
				}
				if vd.Allowed {
					granted++
				}
				if want := i < 3; vd.Allowed != want {
					t.Fatalf("%s, impression %d on %s: allowed %v, want %v", person, i+1, d, vd.Allowed, want)
				}
			}
			res, err := c.Check(ctx, person, []fcap.Candidate{{Caps: []fcap.Cap{capc}}})
			if err != nil || res.Verdicts[0].Allowed || granted != 3 {
				t.Fatalf("%s: %d granted; the viewer itself: %+v %v", person, granted, res.Verdicts, err)
			}
		}
	}
	if st := c.Stats(); st.ResolveFailures != 0 {
		t.Errorf("%d resolutions failed", st.ResolveFailures)
	}
}

// TestLinkAfterImpressionsMergesExactly: a device that already counted
// impressions as its own viewer brings them to the viewer it is linked
// to, once; a second link of the same device merges nothing; unlinking
// makes it its own viewer again.
func TestLinkAfterImpressionsMergesExactly(t *testing.T) {
	nodes := cluster.StartCluster(t, 3, cluster.Options{Replicas: 2})
	cluster.WaitActive(t, nodes, 3)
	c := identityClient(t, nodes...)
	ctx := context.Background()
	capc := fcap.Cap{Scope: "campaign", ID: "five", Limit: 5, Window: time.Hour, Mode: fcap.Strict}
	allow := func(id string, opts ...client.CallOption) bool {
		t.Helper()
		vd, err := c.Allow(ctx, id, []fcap.Cap{capc}, opts...)
		if err != nil || vd.Failed() {
			t.Fatalf("Allow(%s): %+v %v", id, vd, err)
		}
		return vd.Allowed
	}
	for range 2 {
		allow("tablet") // as its own viewer: nothing linked yet
	}
	allow("reader")
	merged, err := c.Link(ctx, "tablet", "reader")
	if err != nil || merged != 2 {
		t.Fatalf("Link(tablet, reader): merged %d, %v; want 2", merged, err)
	}
	if merged, err := c.Link(ctx, "tablet", "reader"); err != nil || merged != 0 {
		t.Fatalf("linking again: merged %d, %v; want 0", merged, err)
	}
	// reader: 1 + 2 merged = 3 of 5; a record through the device (the
	// asynchronous path) makes 4.
	if err := c.RecordDevice("tablet", fcap.Impression{ID: "tablet-played-1", Time: time.Now().UnixMilli(), Caps: []fcap.Cap{capc}}); err != nil {
		t.Fatal("RecordDevice refused to queue")
	}
	fctx, fcancel := context.WithTimeout(ctx, 10*time.Second)
	defer fcancel()
	if err := c.Flush(fctx); err != nil {
		t.Fatal(err)
	}
	if !allow("reader") {
		t.Fatal("the 5th impression was refused")
	}
	if allow("tablet", client.Device()) || allow("reader") {
		t.Fatal("a 6th impression was granted: the merge counted something twice or the link is not used")
	}
	if v, err := c.Resolve(ctx, "tablet"); err != nil || v != "reader" {
		t.Fatalf("Resolve(tablet) = %q %v", v, err)
	}
	if was, err := c.Unlink(ctx, "tablet"); err != nil || was != "reader" {
		t.Fatalf("Unlink(tablet) = %q %v", was, err)
	}
	if v, err := c.Resolve(ctx, "tablet"); err != nil || v != "tablet" {
		t.Fatalf("after Unlink, Resolve(tablet) = %q %v", v, err)
	}
	// Its own count again: the 2 it had before the link, 3 left.
	for i := range 3 {
		if !allow("tablet", client.Device()) {
			t.Fatalf("after the unlink, impression %d of the tablet's own 3 left was refused", i+1)
		}
	}
	if allow("tablet", client.Device()) {
		t.Fatal("the unlinked tablet got a 6th impression")
	}
}

// TestLinkRefusals: links that make no sense are refused with clear
// errors and change nothing.
func TestLinkRefusals(t *testing.T) {
	nodes := cluster.StartCluster(t, 3, cluster.Options{Replicas: 2, Args: []string{"--max-devices", "2"}})
	cluster.WaitActive(t, nodes, 3)
	c := identityClient(t, nodes...)
	ctx := context.Background()
	mustLink := func(d, v string) {
		t.Helper()
		if _, err := c.Link(ctx, d, v); err != nil {
			t.Fatalf("Link(%s, %s): %v", d, v, err)
		}
	}
	mustLink("phone", "alice")
	for _, tc := range []struct {
		name, device, viewer string
	}{
		{"to itself", "x", "x"},
		{"a viewer with devices as a device", "alice", "bob"},
		{"to a device", "watch", "phone"},
		{"an empty device", "", "alice"},
		{"an empty viewer", "pad", ""},
	} {
		_, err := c.Link(ctx, tc.device, tc.viewer)
		if !errors.Is(err, proto.ErrBadRequest) {
			t.Errorf("linking %s: %v, want a bad request", tc.name, err)
		} else {
			t.Logf("linking %s: %v", tc.name, err)
		}
	}
	mustLink("tv", "alice")
	if _, err := c.Link(ctx, "laptop", "alice"); !errors.Is(err, proto.ErrBadRequest) {
		t.Errorf("a third device with --max-devices 2: %v", err)
	}
	// None of the refusals changed a resolution.
	for d, want := range map[string]string{"phone": "alice", "tv": "alice", "watch": "watch", "alice": "alice", "laptop": "laptop"} {
		if v, err := c.Resolve(ctx, d); err != nil || v != want {
			t.Errorf("Resolve(%s) = %q %v, want %q", d, v, err, want)
		}
	}
}

// TestResolutionSurvivesANodeKill: with R=2, links live on two nodes;
// killing one leaves every device resolving to its viewer, and counts
// follow the link.
func TestResolutionSurvivesANodeKill(t *testing.T) {
	nodes := cluster.StartCluster(t, 3, cluster.Options{Replicas: 2})
	cluster.WaitActive(t, nodes, 3)
	c := identityClient(t, nodes...)
	ctx := context.Background()
	const n = 30
	for i := range n {
		if _, err := c.Link(ctx, fmt.Sprintf("dev-%d", i), fmt.Sprintf("who-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	nodes[1].Kill()
	alive := []*cluster.Node{nodes[0], nodes[2]}
	waitStable(t, alive)
	cluster.Eventually(t, 60*time.Second, func() bool {
		for _, nd := range alive {
			m, err := nd.Metrics()
			if err != nil || m["fcap_partitions_syncing"] != 0 {
				return false
			}
		}
		return true
	}, "partitions not served again")
	fresh := identityClient(t, alive...) // no cached resolutions
	capc := fcap.Cap{Scope: "campaign", ID: "after-kill", Limit: 1, Window: time.Hour, Mode: fcap.Strict}
	for i := range n {
		d, who := fmt.Sprintf("dev-%d", i), fmt.Sprintf("who-%d", i)
		if v, err := fresh.Resolve(ctx, d); err != nil || v != who {
			t.Fatalf("after the kill, Resolve(%s) = %q %v, want %q", d, v, err, who)
		}
		if vd, err := fresh.Allow(ctx, d, []fcap.Cap{capc}, client.Device()); err != nil || !vd.Allowed {
			t.Fatalf("Allow(%s): %+v %v", d, vd, err)
		}
		if vd, err := fresh.Allow(ctx, who, []fcap.Cap{capc}); err != nil || vd.Allowed {
			t.Fatalf("the viewer %s after its device's impression: %+v %v, want denied", who, vd, err)
		}
	}
}

// TestFcapctlIdentity: link, resolve and unlink from the command line.
func TestFcapctlIdentity(t *testing.T) {
	nodes := cluster.StartCluster(t, 3, cluster.Options{Replicas: 2})
	cluster.WaitActive(t, nodes, 3)
	addr := nodes[0].Data
	runFcapctl(t, "allow", "--addr", addr, "--device", "cli-tv", "campaign:cli:3:1h")
	if out := runFcapctl(t, "link", "--addr", addr, "--json", "cli-tv", "cli-person"); !strings.Contains(out, `"merged":1`) {
		t.Errorf("fcapctl link --json: %s", out)
	}
	if out := runFcapctl(t, "resolve", "--addr", addr, "cli-tv"); !strings.Contains(out, "cli-tv counts as cli-person") {
		t.Errorf("fcapctl resolve: %s", out)
	}
	if out := runFcapctl(t, "check", "--addr", addr, "--json", "cli-person", "campaign:cli:3:1h"); !strings.Contains(out, `"remaining":2`) {
		t.Errorf("the merged impression does not count for the person: %s", out)
	}
	if out := runFcapctl(t, "keys", "--addr", addr, "cli-tv"); !strings.Contains(out, `a device linked to "cli-person"`) {
		t.Errorf("fcapctl keys of the device does not show its link: %s", out)
	}
	if out := runFcapctl(t, "keys", "--addr", addr, "cli-person"); !strings.Contains(out, "devices linked to it: cli-tv") {
		t.Errorf("fcapctl keys of the person does not list its device: %s", out)
	}
	if out := runFcapctl(t, "unlink", "--addr", addr, "--json", "cli-tv"); !strings.Contains(out, `"was":"cli-person"`) {
		t.Errorf("fcapctl unlink --json: %s", out)
	}
}

package e2e

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fcap-io/fcap/test/cluster"
)

// readyz returns the node's /readyz status and body.
func readyz(t *testing.T, n *cluster.Node) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + n.HTTP + "/readyz")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// syncTimeout is the formation tests' --sync-timeout: what they show
// happens once it has passed, whatever its length (10 s by default).
//
// The formation tests run in parallel: each starts one or two nodes of
// its own that mostly wait on timers, and none looks at another's.
var syncTimeout = []string{"--sync-timeout", "2s"}

// TestTypoInJoinFormsNoCluster: a node whose only seed answers nothing
// used to log "fcapd ready", never say the join failed, and after the
// sync timeout claim every partition alone: a second cluster. It now
// warns with the seed and the reason, says so on /readyz and in fcapctl
// status, and claims nothing.
func TestTypoInJoinFormsNoCluster(t *testing.T) {
	t.Parallel()
	typo := fmt.Sprintf("127.0.0.1:%d", cluster.FreePort(t))
	n := cluster.Start(t, "lonely", cluster.Options{Seeds: []string{typo}, Args: syncTimeout})
	cluster.Eventually(t, 30*time.Second, func() bool {
		for _, line := range strings.Split(n.Logs(), "\n") {
			if strings.Contains(line, `"level":"WARN"`) && strings.Contains(line, "join failed") &&
				strings.Contains(line, `"seed":"`+typo+`"`) && strings.Contains(line, `"reason":`) {
				return true
			}
		}
		return false
	}, "no warning naming the seed %s and why it failed:\n%s", typo, n.Logs())
	// Past the sync timeout, where the node used to claim everything.
	cluster.Eventually(t, 60*time.Second, func() bool {
		return strings.Contains(n.Logs(), "not forming a cluster alone")
	}, "the node never reached the point of claiming partitions alone:\n%s", n.Logs())

	m, err := n.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	if c := m["fcap_partitions_claimed_total"]; c != 0 {
		t.Errorf("the node claimed %v partitions alone", c)
	}
	if a := m[`fcap_ring_members{state="active"}`]; a != 0 {
		t.Errorf("%v active members: the node formed a cluster of its own", a)
	}
	if code, body := readyz(t, n); code != http.StatusServiceUnavailable || !strings.Contains(body, typo) {
		t.Errorf("/readyz: %d %q; want 503 naming the seed %s", code, body, typo)
	}
	if strings.Contains(n.Logs(), `"msg":"fcapd ready"`) {
		t.Errorf("a node that joined nothing logged fcapd ready:\n%s", n.Logs())
	}
	code, _, stderr := runFcapctlCode(t, "status", "--addr", n.Data)
	if code != 4 || !strings.Contains(stderr, "has joined no cluster") || !strings.Contains(stderr, typo) {
		t.Errorf("fcapctl status: exit %d, stderr %q; want 4 naming the seed %s", code, stderr, typo)
	}
}

// TestBootstrapFormsAloneWhenTold: the same node started with
// --bootstrap forms a cluster of its own once no seed answered.
func TestBootstrapFormsAloneWhenTold(t *testing.T) {
	t.Parallel()
	typo := fmt.Sprintf("127.0.0.1:%d", cluster.FreePort(t))
	n := cluster.Start(t, "founder", cluster.Options{Seeds: []string{typo}, Args: append([]string{"--bootstrap"}, syncTimeout...)})
	cluster.Eventually(t, 60*time.Second, n.Ready, "a --bootstrap node with no seed answering did not form a cluster:\n%s", n.Logs())
	// The node takes its partitions before it logs why, and its log
	// reaches n.Logs() through a pipe the test copies: a ready node's line
	// can still be on its way.
	cluster.Eventually(t, 30*time.Second, func() bool { return strings.Contains(n.Logs(), "forming a new cluster alone") },
		"the node did not say it formed a cluster alone:\n%s", n.Logs())
}

// TestNameTakenRefusesToStart: a second node with the name of a live
// member used to log "Conflicting address" forever and keep running
// beside it. It now exits with status 3 and one line saying why.
func TestNameTakenRefusesToStart(t *testing.T) {
	t.Parallel()
	first := cluster.Start(t, "twin", cluster.Options{})
	cluster.Eventually(t, 60*time.Second, first.Ready, "the first node is not ready")
	second := cluster.Start(t, "twin", cluster.Options{Seeds: []string{first.Gossip}})
	code, exited := second.Exited(60 * time.Second)
	if !exited {
		t.Fatalf("the second node named twin still runs:\n%s", second.Logs())
	}
	var lines []string
	for _, line := range strings.Split(second.Logs(), "\n") {
		if strings.Contains(line, "refusing to start") {
			lines = append(lines, line)
		}
	}
	if code != 3 || len(lines) != 1 || !strings.Contains(lines[0], `\"twin\" is taken by a live member at `+first.Gossip) {
		t.Errorf("exit %d, lines %q; want 3 and one line naming the member at %s\n%s", code, lines, first.Gossip, second.Logs())
	}
	if !first.Running() || !first.Ready() {
		t.Errorf("the first node suffered:\n%s", first.Logs())
	}
}

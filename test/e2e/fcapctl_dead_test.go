package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/fcap-io/fcap/test/cluster"
)

// TestFcapctlAroundADeadMember kills a member and runs fcapctl before
// gossip has declared it dead. fcapctl used to wait for a connection to
// every member and then blame the first --addr ("cannot reach the
// cluster at <live seed> ... <dead member>: connection refused"); status
// exited 0 and its row for the dead member broke the table.
func TestFcapctlAroundADeadMember(t *testing.T) {
	// The wan gossip profile takes tens of seconds to declare a killed
	// member dead: the window this test runs in.
	nodes := cluster.StartCluster(t, 3, cluster.Options{Replicas: 2, Args: []string{"--gossip-profile", "wan"}})
	c := testClient(t, seeds(nodes...))
	dead := nodes[1]
	var viewer string
	r := c.Ring()
	for i := range 10000 {
		v := fmt.Sprintf("dead-owner-%d", i)
		if _, owners := r.Lookup(v); r.Member(owners[0]).Name == dead.Name {
			viewer = v
			break
		}
	}
	if viewer == "" {
		t.Fatalf("no viewer owned by %s", dead.Name)
	}
	dead.Kill()
	// The dead member first among the seeds, as an operator might list them.
	addrs := dead.Data + "," + nodes[0].Data

	code, stdout, stderr := runFcapctlCode(t, "status", "--addr", addrs)
	if !strings.Contains(stdout, dead.Name) {
		t.Fatalf("status no longer lists %s: gossip declared it dead before the test ran; stdout:\n%s", dead.Name, stdout)
	}
	if code != 4 || !strings.Contains(stderr, dead.Name) || !strings.Contains(stderr, dead.Data) {
		t.Errorf("status with a member down: exit %d, want 4 naming %s at %s; stderr:\n%s", code, dead.Name, dead.Data, stderr)
	}
	var header int
	for _, line := range strings.Split(stdout, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) > 0 && f[0] == "NAME":
			header = len(f)
		case len(f) > 0 && (f[0] == nodes[0].Name || f[0] == dead.Name || f[0] == nodes[2].Name) && len(f) != header:
			t.Errorf("status row %q has %d columns, the header %d", line, len(f), header)
		}
	}

	// A soft Allow for a viewer the dead member owns: its backup answers.
	code, stdout, stderr = runFcapctlCode(t, "allow", "--addr", addrs, "--json", viewer, "campaign:dead:5:1h")
	if code != 0 || !strings.Contains(stdout, `"allowed":true`) {
		t.Errorf("soft allow around the dead owner: exit %d, stdout %q, stderr:\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, dead.Data) || strings.Contains(stderr, "cannot reach the cluster at") {
		t.Errorf("allow should name the dead member %s, not blame the seeds; stderr:\n%s", dead.Data, stderr)
	}
	// A strict one fails closed, naming the owner that did not answer.
	code, _, stderr = runFcapctlCode(t, "allow", "--addr", addrs, viewer, "campaign:dead:5:1h:strict")
	if code != 1 || !strings.Contains(stderr, dead.Name+" at "+dead.Data) {
		t.Errorf("strict allow with its owner dead: exit %d, want 1 naming %s at %s; stderr:\n%s", code, dead.Name, dead.Data, stderr)
	}
	// Reads and inspection still work.
	if code, _, stderr = runFcapctlCode(t, "check", "--addr", addrs, viewer, "campaign:dead:5:1h"); code != 0 {
		t.Errorf("check around the dead owner: exit %d, stderr:\n%s", code, stderr)
	}
	if code, stdout, stderr = runFcapctlCode(t, "keys", "--addr", addrs, viewer); code != 0 || !strings.Contains(stdout, "unreachable") {
		t.Errorf("keys around the dead owner: exit %d, stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}

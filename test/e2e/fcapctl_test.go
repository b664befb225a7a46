package e2e

import (
	"encoding/json"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/fcap-io/fcap/test/cluster"
)

func fcapctl(t *testing.T) string { return cluster.Tool(t, "fcapctl") }

// statusJSON is what "fcapctl status --json" prints (docs/fcapctl.schema.json).
type statusJSON struct {
	Epoch      string `json:"epoch"`
	Partitions int    `json:"partitions"`
	Healthy    bool   `json:"healthy"`
	Members    []struct {
		Name            string `json:"name"`
		State           string `json:"state"`
		Reachable       bool   `json:"reachable"`
		Error           string `json:"error"`
		Primaries       int    `json:"primaries"`
		Backups         int    `json:"backups"`
		Syncing         int    `json:"syncing"`
		Handing         int    `json:"handing"`
		UnderReplicated int    `json:"under_replicated"`
		Viewers         uint64 `json:"viewers"`
		Keys            uint64 `json:"keys"`
		Bytes           uint64 `json:"bytes"`
	} `json:"members"`
}

func runFcapctl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(fcapctl(t), args...).CombinedOutput()
	if err != nil {
		t.Fatalf("fcapctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// clusterStatus runs "fcapctl status --json"; a degraded cluster (exit
// 4: a member unreachable, a partition under-replicated) still prints it.
func clusterStatus(t *testing.T, addr string) statusJSON {
	t.Helper()
	var st statusJSON
	code, out, stderr := runFcapctlCode(t, "status", "--json", "--addr", addr)
	if code != 0 && code != 4 {
		t.Fatalf("fcapctl status: exit %d\n%s", code, stderr)
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("fcapctl status --json printed %q: %v", out, err)
	}
	return st
}

// TestFcapctlStatusAndDrain drains a node with "fcapctl drain" while a
// client records and checks: the drained node's partitions move to the
// others (as "fcapctl status" shows), nothing acknowledged is lost and the
// caller sees no error.
func TestFcapctlStatusAndDrain(t *testing.T) {
	tr := startTraffic(t, "drain", 200, 4)
	nodes, l := tr.nodes, tr.l

	// Every member reports; together they are primary of every partition.
	tr.started(t, 50)
	st := clusterStatus(t, nodes[0].Data)
	primaries := 0
	for _, m := range st.Members {
		if !m.Reachable {
			t.Fatalf("member %s unreachable in status: %s", m.Name, m.Error)
		}
		primaries += m.Primaries
	}
	if len(st.Members) != 3 || primaries != st.Partitions {
		t.Fatalf("status: %d members, %d primaries of %d partitions; want 3 members owning all", len(st.Members), primaries, st.Partitions)
	}

	out := runFcapctl(t, "drain", "--addr", nodes[0].Data, nodes[1].Name)
	if !strings.Contains(out, "drained") {
		t.Errorf("fcapctl drain printed %q", out)
	}
	// The drained node has left: the others own everything.
	cluster.Eventually(t, 30e9, func() bool {
		st := clusterStatus(t, nodes[0].Data)
		primaries := 0
		for _, m := range st.Members {
			if m.Name == nodes[1].Name || !m.Reachable || m.Syncing != 0 {
				return false
			}
			primaries += m.Primaries
		}
		return len(st.Members) == 2 && primaries == st.Partitions
	}, "the cluster did not settle on 2 members after the drain")
	if code, ok := nodes[1].Exited(30e9); !ok || code != 0 {
		t.Errorf("%s after its drain: exited %v, status %d; want it to exit 0 by itself", nodes[1].Name, ok, code)
	}
	// A preStop hook knows only its own address: --self.
	if out := runFcapctl(t, "drain", "--self", "--addr", nodes[2].Data); !strings.Contains(out, nodes[2].Name) || !strings.Contains(out, "drained") {
		t.Errorf("fcapctl drain --self printed %q", out)
	}
	cluster.Eventually(t, 30e9, func() bool {
		st := clusterStatus(t, nodes[0].Data)
		return len(st.Members) == 1 && st.Members[0].Reachable && st.Members[0].Primaries == st.Partitions
	}, "the cluster did not settle on 1 member after the second drain")
	tr.end()

	lost, extra := tr.verify(t)
	t.Logf("acknowledged %d impressions; lost %d, counted twice %d; errors %d", total(l.acked), lost, extra, l.errors)
	if l.errors != 0 {
		t.Errorf("the client surfaced %d errors", l.errors)
	}
}

// TestFcapctlUnreachable: a clear error and a non-zero exit when no node
// answers.
func TestFcapctlUnreachable(t *testing.T) {
	addr := "127.0.0.1:" + strconv.Itoa(cluster.FreePort(t))
	for _, args := range [][]string{{"status", "--addr", addr}, {"drain", "--addr", addr, "n1"}} {
		out, err := exec.Command(fcapctl(t), args...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "cannot connect to "+addr) || !strings.Contains(string(out), "connection refused") {
			t.Errorf("fcapctl %s: err %v, output %q; want a failure naming the refused address", strings.Join(args, " "), err, out)
		}
	}
}

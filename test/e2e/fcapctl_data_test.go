package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/test/cluster"
)

// TestFcapctlDataCommands drives ring, allow, check, record and reserve
// against a real cluster and checks what each one changed.
func TestFcapctlDataCommands(t *testing.T) {
	nodes := cluster.StartCluster(t, 3, cluster.Options{Replicas: 2})
	cluster.WaitActive(t, nodes, 3)
	addr := nodes[0].Data

	var ring struct {
		Partitions int
		Replicas   int
		Members    []struct {
			Name               string
			State              string
			Primaries, Backups int
		}
	}
	if err := json.Unmarshal([]byte(runFcapctl(t, "ring", "--addr", addr, "--json")), &ring); err != nil {
		t.Fatal(err)
	}
	primaries, backups := 0, 0
	for _, m := range ring.Members {
		primaries += m.Primaries
		backups += m.Backups
		if m.State != "active" {
			t.Errorf("member %s is %s", m.Name, m.State)
		}
	}
	if len(ring.Members) != 3 || primaries != ring.Partitions || backups != ring.Partitions*(ring.Replicas-1) {
		t.Fatalf("fcapctl ring: %+v", ring)
	}
	if out := runFcapctl(t, "ring", "--addr", addr, "--partitions"); !strings.Contains(out, "PARTITION") || strings.Count(out, "\n") < ring.Partitions {
		t.Errorf("fcapctl ring --partitions printed too little:\n%s", out)
	}

	verdicts := func(cmd string, args ...string) []struct {
		Allowed   bool
		Remaining int64
		FailOpen  bool `json:"fail_open"`
	} {
		t.Helper()
		var vs []struct {
			Allowed   bool
			Remaining int64
			FailOpen  bool `json:"fail_open"`
		}
		// A deadline of seconds: with fcapctl's 2 s, a soft check the
		// owner answers after half a second (a busy machine) is hedged to
		// a backup, whose copy may lack the record just made.
		code, out, stderr := runFcapctlCode(t, append([]string{cmd, "--addr", addr, "--timeout", "10s", "--json"}, args...)...)
		if code != 0 && code != 3 { // 3: allow denied
			t.Fatalf("fcapctl %s %v: exit %d\n%s", cmd, args, code, stderr)
		}
		if err := json.Unmarshal([]byte(out), &vs); err != nil {
			t.Fatalf("fcapctl %v printed %q: %v", args, out, err)
		}
		return vs
	}
	const capA = "campaign:ctl-a:2:1h"
	for i, want := range []bool{true, true, false} {
		vs := verdicts("allow", "viewer-ctl", capA)
		if len(vs) != 1 || vs[0].Allowed != want || vs[0].FailOpen {
			t.Fatalf("allow %d: %+v, want allowed=%v from the cluster", i, vs, want)
		}
	}
	vs := verdicts("check", "viewer-ctl", capA, "campaign:ctl-b:3:1h", capA+"+campaign:ctl-b:3:1h")
	if len(vs) != 3 || vs[0].Allowed || !vs[1].Allowed || vs[1].Remaining != 3 || vs[2].Allowed {
		t.Fatalf("check: %+v", vs)
	}
	runFcapctl(t, "record", "--addr", addr, "viewer-ctl", "imp-ctl-1", "campaign:ctl-b:3:1h")
	runFcapctl(t, "record", "--addr", addr, "viewer-ctl", "imp-ctl-1", "campaign:ctl-b:3:1h") // idempotent
	if vs := verdicts("check", "viewer-ctl", "campaign:ctl-b:3:1h"); vs[0].Remaining != 2 {
		t.Fatalf("after recording imp-ctl-1 twice: %+v, want 2 left", vs)
	}
	var res struct {
		Verdict     struct{ Allowed bool }
		Reservation string
	}
	if err := json.Unmarshal([]byte(runFcapctl(t, "reserve", "--addr", addr, "--json", "viewer-ctl", "campaign:ctl-b:3:1h")), &res); err != nil {
		t.Fatal(err)
	}
	if !res.Verdict.Allowed || res.Reservation == "0" {
		t.Fatalf("reserve: %+v", res)
	}
	if vs := verdicts("check", "viewer-ctl", "campaign:ctl-b:3:1h"); vs[0].Remaining != 1 {
		t.Fatalf("with a reservation held: %+v, want 1 left", vs)
	}
	// keys: the counter capA reads holds the two allowed impressions, on
	// the primary and (once replicated) on the backup.
	capHash := fcap.KeyHash(fcap.Cap{Scope: "campaign", ID: "ctl-a", Limit: 2, Window: time.Hour})
	cluster.Eventually(t, 10e9, func() bool {
		var ks struct {
			Owners []struct {
				Rank  int
				State *struct {
					Found, Primary bool
					Counters       []struct {
						Hash   string
						Values []int64
					}
				}
			}
		}
		if err := json.Unmarshal([]byte(runFcapctl(t, "keys", "--addr", addr, "--json", "viewer-ctl", capA)), &ks); err != nil {
			t.Fatal(err)
		}
		if len(ks.Owners) != 2 {
			t.Fatalf("keys: %d owners, want 2", len(ks.Owners))
		}
		for _, o := range ks.Owners {
			if o.State == nil || !o.State.Found || o.State.Primary != (o.Rank == 0) {
				return false
			}
			n := -1
			for _, k := range o.State.Counters {
				if k.Hash == fmt.Sprintf("%016x", capHash) {
					n = len(k.Values)
				}
			}
			if n != 2 {
				return false
			}
		}
		return true
	}, "fcapctl keys does not show the two impressions on both owners")
	if out := runFcapctl(t, "keys", "--addr", addr, "viewer-ctl", capA); !strings.Contains(out, "campaign:ctl-a") || !strings.Contains(out, "(primary)") {
		t.Errorf("fcapctl keys printed:\n%s", out)
	}

	// A bad cap is a usage error, before any request.
	if code, _, stderr := runFcapctlCode(t, "allow", "--addr", addr, "viewer-ctl", "campaign:x:notanumber:1h"); code != 2 || !strings.Contains(stderr, "limit") {
		t.Errorf("bad cap: exit %d, stderr %q", code, stderr)
	}
}

// runFcapctlCode runs fcapctl and returns its exit code and outputs.
func runFcapctlCode(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	code, stdout, stderr, err := execFcapctl(fcapctl(t), args...)
	if err != nil {
		t.Fatal(err)
	}
	return code, stdout, stderr
}

// execFcapctl runs the fcapctl binary bin and returns its exit code and
// outputs; err only when it could not be run. It touches no testing.T,
// so it may run off the test's goroutine.
func execFcapctl(bin string, args ...string) (code int, stdout, stderr string, err error) {
	var out, errOut strings.Builder
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, out.String(), errOut.String(), nil
	case errors.As(err, &exit):
		return exit.ExitCode(), out.String(), errOut.String(), nil
	}
	return 0, "", "", err
}

package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/fcap-io/fcap/proto"
)

// TestStatusJudgesEveryProblem: each kind of trouble makes the cluster
// unhealthy (exit 4) and is named; the table keeps one column per header
// for a member that did not answer.
func TestStatusJudgesEveryProblem(t *testing.T) {
	healthy := statusMember{Name: "a", Addr: "10.0.0.1:7700", State: "active", Reachable: true, Primaries: 271}
	for _, c := range []struct {
		name string
		m    statusMember
		says string
	}{
		{"unreachable", statusMember{Name: "b", Addr: "10.0.0.2:7700", State: "active", Error: "connection refused"}, "b (10.0.0.2:7700) is unreachable: connection refused"},
		{"refused", statusMember{Name: "b", Addr: "10.0.0.2:7700", State: "active", Error: "denied", refused: true}, "refused the status request"},
		{"not joined", statusMember{Name: "b", Addr: "10.0.0.2:7700", State: "joining", Reachable: true, JoinError: "not joined: no seed answered; 10.0.0.9:7946: refused"}, "b has joined no cluster: not joined"},
		{"under-replicated", statusMember{Name: "b", Addr: "10.0.0.2:7700", State: "active", Reachable: true, UnderReplicated: 7}, "b is primary of 7 under-replicated partitions"},
		{"no majority", statusMember{Name: "b", Addr: "10.0.0.2:7700", State: "active", Reachable: true, QuorumMembers: 3, QuorumConfirmed: 1}, "b does not hold a majority of the member set (1 of 3 confirm its ring, 2 needed)"},
		{"drifting", statusMember{Name: "b", Addr: "10.0.0.2:7700", State: "active", Reachable: true, Authority: true, QuorumMembers: 2, QuorumConfirmed: 2, Drifting: 4}, "b's copies of 4 viewers differed from a backup's after settling"},
		{"claimed", statusMember{Name: "b", Addr: "10.0.0.2:7700", State: "active", Reachable: true, Authority: true, QuorumMembers: 2, QuorumConfirmed: 2, Claimed: 5}, "b serves 5 partitions claimed without any holder's copy"},
		{"failed member", statusMember{Name: "b", Addr: "10.0.0.2:7700", State: "active", Reachable: true, Authority: true, QuorumMembers: 3, QuorumConfirmed: 2,
			failed: []proto.FailedMember{{Name: "c", Addr: "10.0.0.3:7700", SinceMillis: 1700000000000}}}, "c (10.0.0.3:7700) failed at 2023-11-14T22:13:20Z (reported by b)"},
	} {
		out := statusOut{Epoch: epochString(1), Partitions: 271, Replicas: 2, Members: []statusMember{healthy, c.m}}
		out.collectFailed()
		out.judge()
		if out.Healthy || len(out.Problems) != 1 || !strings.Contains(out.Problems[0], c.says) {
			t.Errorf("%s: healthy %v, problems %q; want one saying %q", c.name, out.Healthy, out.Problems, c.says)
		}
		var b bytes.Buffer
		printStatus(&b, &out)
		var header int
		for _, line := range strings.Split(b.String(), "\n") {
			f := strings.Fields(line)
			switch {
			case len(f) > 0 && f[0] == "NAME":
				header = len(f)
			case len(f) > 0 && (f[0] == "a" || f[0] == "b" || f[0] == "c") && len(f) != header:
				t.Errorf("%s: row %q has %d columns, the header %d", c.name, line, len(f), header)
			}
		}
	}
	out := statusOut{Members: []statusMember{healthy}}
	out.judge()
	if !out.Healthy || len(out.Problems) != 0 {
		t.Errorf("a healthy cluster: %+v", out)
	}
	// One member for two replicas: no partition has a backup. Two
	// members for three: every partition has two copies of three.
	lone := statusOut{Replicas: 2, Members: []statusMember{healthy}}
	lone.judge()
	if lone.Healthy || len(lone.Problems) != 1 || !strings.Contains(lone.Problems[0], "no backup: 2 replicas, but one member holds every partition alone") {
		t.Errorf("1 member, 2 replicas: healthy %v, problems %q; want one saying there is no backup", lone.Healthy, lone.Problems)
	}
	short := statusOut{Replicas: 3, Members: []statusMember{healthy, healthy}}
	short.judge()
	if short.Healthy || len(short.Problems) != 1 || !strings.Contains(short.Problems[0], "2 members for 3 replicas: every partition has 2 copies") {
		t.Errorf("2 members, 3 replicas: healthy %v, problems %q", short.Healthy, short.Problems)
	}
	alone := statusOut{Replicas: 1, Members: []statusMember{healthy}}
	alone.judge()
	if !alone.Healthy {
		t.Errorf("1 member, 1 replica (one copy meant): problems %q", alone.Problems)
	}
	// Five members with two replicas: a minority of two can hold both
	// copies of a partition. A warning, not a problem.
	five := statusOut{Replicas: 2, Members: []statusMember{healthy, healthy, healthy, healthy, healthy}}
	five.judge()
	if !five.Healthy || len(five.Warnings) != 1 || !strings.Contains(five.Warnings[0], "use at least 3") {
		t.Errorf("5 members, 2 replicas: healthy %v, warnings %q", five.Healthy, five.Warnings)
	}
	five.Replicas = 3
	five.judge()
	if len(five.Warnings) != 0 {
		t.Errorf("5 members, 3 replicas: warnings %q", five.Warnings)
	}
}

// TestStatusShowsVersionAndUptime: each member's build and uptime have
// columns; a node that does not report them shows "-".
func TestStatusShowsVersionAndUptime(t *testing.T) {
	out := statusOut{Epoch: epochString(1), Partitions: 271, Replicas: 1, Members: []statusMember{
		{Name: "a", Addr: "10.0.0.1:7700", State: "active", Reachable: true, Version: "v1.2.0", UptimeMillis: 3_723_400},
		{Name: "b", Addr: "10.0.0.2:7700", State: "active", Reachable: true},
	}}
	var b bytes.Buffer
	printStatus(&b, &out)
	rows := map[string][]string{}
	for _, line := range strings.Split(b.String(), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			rows[f[0]] = f
		}
	}
	for name, want := range map[string][]string{"NAME": {"VERSION", "UPTIME"}, "a": {"v1.2.0", "1h2m3s"}, "b": {"-", "-"}} {
		f := rows[name]
		if len(f) < 2 || f[len(f)-2] != want[0] || f[len(f)-1] != want[1] {
			t.Errorf("row %s ends %q, want %q", name, f, want)
		}
	}
}

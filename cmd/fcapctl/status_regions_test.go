package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestStatusShowsRegions: a member's links to peer regions are listed
// under REGIONS; an unreachable one is a warning, not a problem (the
// region serves on its own); a single region prints no such section.
func TestStatusShowsRegions(t *testing.T) {
	out := statusOut{Epoch: epochString(1), Partitions: 271, Replicas: 1, Members: []statusMember{
		{Name: "a", Addr: "10.0.0.1:7700", State: "active", Reachable: true, Primaries: 271, Regions: []statusRegion{
			{Name: "us-east", Reachable: true, LagMillis: 40, Queue: 3, Lent: 2, Borrowed: 7},
			{Name: "ap", LagMillis: 90_000, Queue: 1200},
		}},
	}}
	out.judge()
	if !out.Healthy {
		t.Errorf("a peer region unreachable made the cluster unhealthy: %v", out.Problems)
	}
	if len(out.Warnings) != 1 || !strings.Contains(out.Warnings[0], "peer region ap") || !strings.Contains(out.Warnings[0], "1200") {
		t.Errorf("warnings %q, want one naming peer region ap and its queue", out.Warnings)
	}
	var b bytes.Buffer
	printStatus(&b, &out)
	text := b.String()
	_, regions, ok := strings.Cut(text, "\nREGIONS\n")
	if !ok {
		t.Fatalf("no REGIONS section:\n%s", text)
	}
	rows := map[string][]string{}
	for _, line := range strings.Split(regions, "\n") {
		if f := strings.Fields(line); len(f) == 7 {
			rows[f[1]] = f
		}
	}
	if got := strings.Join(rows["us-east"], " "); got != "a us-east yes 40ms 3 2 7" {
		t.Errorf("us-east row %q", got)
	}
	if got := strings.Join(rows["ap"], " "); got != "a ap NO 1m30s 1200 0 0" {
		t.Errorf("ap row %q", got)
	}

	out.Members[0].Regions = nil
	b.Reset()
	printStatus(&b, &out)
	if strings.Contains(b.String(), "REGIONS") {
		t.Errorf("a single region prints a REGIONS section:\n%s", b.String())
	}
}

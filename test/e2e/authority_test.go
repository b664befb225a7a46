package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fcap-io/fcap/test/cluster"
)

// failedStatus is what these tests read of "fcapctl status --json".
type failedStatus struct {
	Healthy bool `json:"healthy"`
	Members []struct {
		Name      string `json:"name"`
		Authority bool   `json:"strict_authority"`
	} `json:"members"`
	Failed []struct {
		Name       string   `json:"name"`
		Addr       string   `json:"addr"`
		Since      string   `json:"since"`
		ReportedBy []string `json:"reported_by"`
	} `json:"failed"`
}

func failedOf(t *testing.T, addr string) (failedStatus, int) {
	t.Helper()
	code, out, stderr := runFcapctlCode(t, "status", "--json", "--addr", addr)
	var st failedStatus
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("fcapctl status --json: exit %d, printed %q (%v); stderr:\n%s", code, out, err, stderr)
	}
	return st, code
}

// TestStrictNeedsAMajority: two of three nodes are lost for good. The
// survivor still serves soft caps, but it is a minority of the member set
// (the dead count until forgotten), so strict caps fail closed on it and
// fcapctl status names both dead members as failed and exits 4. Once an
// operator forgets them, the survivor is the whole member set and serves
// strict caps again. Before majority authority the survivor counted
// itself a cluster of one and granted strict writes from partitions it
// never held.
func TestStrictNeedsAMajority(t *testing.T) {
	nodes := cluster.StartCluster(t, 3, cluster.Options{Replicas: 2})
	survivor, dead := nodes[0], nodes[1:]
	addr := survivor.Data
	const strictCap = "campaign:majority:5:24h:strict"
	const softCap = "campaign:majority-soft:5:24h"
	if code, _, stderr := runFcapctlCode(t, "allow", "--addr", addr, "v-before", strictCap); code != 0 {
		t.Fatalf("strict allow in a healthy cluster: exit %d\n%s", code, stderr)
	}

	for _, n := range dead {
		n.Kill()
	}
	var st failedStatus
	cluster.Eventually(t, time.Minute, func() bool {
		var code int
		st, code = failedOf(t, addr)
		return code == 4 && len(st.Failed) == 2 && len(st.Members) == 1
	}, "fcapctl status to show both dead members failed, out of the ring, and exit 4; last: %+v", &st)
	for i, f := range st.Failed {
		if f.Name != dead[0].Name && f.Name != dead[1].Name || f.Since == "" || len(f.ReportedBy) != 1 || f.ReportedBy[0] != survivor.Name {
			t.Errorf("failed[%d] = %+v: want a dead member, since when, reported by %s", i, f, survivor.Name)
		}
	}
	if len(st.Members) != 1 || st.Members[0].Authority {
		t.Errorf("members %+v: want the survivor alone, without strict authority", st.Members)
	}

	// Strict caps fail closed, on every viewer; soft caps are served
	// (once the survivor claimed what it did not hold). The client takes
	// a refusal for want of a quorum for a passing state and asks again
	// until its deadline (fcapctl's 2 s): the twenty calls wait together.
	type refusal struct {
		code           int
		stdout, stderr string
		err            error
	}
	refusals := make([]refusal, 20)
	bin := fcapctl(t)
	var wg sync.WaitGroup
	for i := range refusals {
		wg.Go(func() {
			r := &refusals[i]
			r.code, r.stdout, r.stderr, r.err = execFcapctl(bin, "allow", "--addr", addr, fmt.Sprintf("v-strict-%d", i), strictCap)
		})
	}
	wg.Wait()
	for i, r := range refusals {
		if r.err != nil {
			t.Fatal(r.err)
		}
		if r.code == 0 {
			t.Fatalf("strict allow of v-strict-%d granted by a minority of the member set: %s", i, r.stdout)
		}
	}
	t.Logf("strict allow refused (exit %d): %s", refusals[0].code, strings.TrimSpace(refusals[0].stderr))
	cluster.Eventually(t, time.Minute, func() bool {
		code, _, _ := runFcapctlCode(t, "allow", "--addr", addr, "v-soft", softCap)
		return code == 0
	}, "a soft allow on the survivor")
	if v := survivor.Metric(`fcap_strict_refused_total{reason="no_quorum"}`); v < 20 {
		t.Errorf("fcap_strict_refused_total{reason=\"no_quorum\"} = %v, want at least the 20 refusals", v)
	}
	if v := survivor.Metric("fcap_members_failed"); v != 2 {
		t.Errorf("fcap_members_failed = %v, want 2", v)
	}
	resp, err := http.Get("http://" + survivor.HTTP + "/readyz?strict")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("/readyz?strict on a minority: %d, want 503", resp.StatusCode)
	}

	// The operator forgets them: strict caps are served again.
	if code, stdout, _ := runFcapctlCode(t, "forget", "--addr", addr, survivor.Name); code == 0 {
		t.Errorf("forget of a live member succeeded: %s", stdout)
	}
	code, stdout, stderr := runFcapctlCode(t, "forget", "--addr", addr, dead[0].Name, dead[1].Name)
	if code != 0 {
		t.Fatalf("forget: exit %d\n%s%s", code, stdout, stderr)
	}
	cluster.Eventually(t, time.Minute, func() bool {
		code, _, _ := runFcapctlCode(t, "allow", "--addr", addr, "v-after", strictCap)
		return code == 0
	}, "a strict allow after the dead members were forgotten")
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		st, code := failedOf(t, addr)
		if len(st.Failed) == 0 && len(st.Members) == 1 && st.Members[0].Authority {
			break
		}
		if time.Now().After(deadline) {
			_, stdout, stderr := runFcapctlCode(t, "status", "--addr", addr)
			t.Fatalf("status after forget: exit %d, still %+v\n%s%s", code, st, stdout, stderr)
		}
	}
}

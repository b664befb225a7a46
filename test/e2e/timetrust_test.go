package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/test/cluster"
)

// Issue 14, section 1: one ad-server request with a time ten years ahead
// moved every node's "now" there (replication carried it, the log and
// snapshots kept it): real-time impressions were stale and capped
// viewers were unblocked. These reproduce it against three real fcapd
// processes, with the default --max-clock-skew (so the same test runs
// against a binary that predates it), and check that every cap holds.

// The two run in parallel (with the formation tests): each has a
// cluster of its own and spends most of its time in capsHold's window,
// a few checks every half second.

func TestFutureTimeCannotDisableCapping(t *testing.T) {
	t.Parallel()
	futureTimeAttack(t, false)
}

func TestFutureTimeCannotDisableCappingAcrossRestart(t *testing.T) {
	t.Parallel()
	futureTimeAttack(t, true)
}

const tenYearsMillis = int64(10 * 365 * 24 * time.Hour / time.Millisecond)

var capDay3 = fcap.Cap{Scope: "campaign", ID: "day3", Limit: 3, Window: 24 * time.Hour}

func futureTimeAttack(t *testing.T, durable bool) {
	// Every node holds every viewer; JSON calls get a deadline that a busy
	// machine cannot turn into a fail-open verdict.
	o := cluster.Options{Replicas: 3, Args: []string{"--api-timeout", "5s"}}
	if durable {
		o.DataDir = t.TempDir()
	}
	nodes := cluster.StartCluster(t, 3, o)
	c := cluster.NewClient(t, cluster.Seeds(nodes...))
	ctx := context.Background()

	// Thirty viewers at their cap of 3 a day, owned all over the ring.
	capped := viewerIDs("capped", 30)
	for _, v := range capped {
		for i := range 4 {
			vd, err := c.Allow(ctx, v, []fcap.Cap{capDay3})
			if err != nil || vd.Failed() || vd.Allowed != (i < 3) {
				t.Fatalf("setup: allow %d of %s = %+v %v", i+1, v, vd, err)
			}
		}
	}

	// The attack, through one node and through the client.
	attacked := nodes[0]
	future := time.Now().UnixMilli() + tenYearsMillis
	capJSON := fmt.Sprintf(`{"scope":"campaign","id":"day3","limit":3,"window":%d}`, capDay3.WindowMillis())
	if code := postJSON(t, attacked, "/v1/check", fmt.Sprintf(`{"viewer":"attacker","candidates":[{"caps":[%s]}],"now":%d}`, capJSON, future)); code != http.StatusBadRequest {
		t.Errorf("JSON check ten years ahead: HTTP %d, want 400", code)
	}
	if code := postJSON(t, attacked, "/v1/record", fmt.Sprintf(`{"viewer":"attacker","impression":{"id":"json-future","time":%d,"caps":[%s]}}`, future, capJSON)); code != http.StatusBadRequest {
		t.Errorf("JSON record ten years ahead: HTTP %d, want 400", code)
	}
	if _, err := c.Allow(ctx, "attacker", []fcap.Cap{capDay3}, client.At(future)); !errors.Is(err, client.ErrBadRequest) {
		t.Errorf("allow ten years ahead: err = %v, want a bad request", err)
	}
	if _, err := c.Check(ctx, "attacker", []fcap.Candidate{{Caps: []fcap.Cap{capDay3}}}, client.At(future)); !errors.Is(err, client.ErrBadRequest) {
		t.Errorf("check ten years ahead: err = %v, want a bad request", err)
	}
	// Past the default skew of a minute, not ten years: refused too.
	if _, err := c.Check(ctx, "attacker", []fcap.Candidate{{Caps: []fcap.Cap{capDay3}}}, client.At(time.Now().UnixMilli()+2*time.Minute.Milliseconds())); !errors.Is(err, client.ErrBadRequest) {
		t.Errorf("check two minutes ahead: err = %v, want a bad request", err)
	}
	c.Record("attacker", fcap.Impression{ID: "client-future", Time: future, Caps: []fcap.Cap{capDay3}})
	flush(t, c)

	capsHold(t, nodes, c, capped, "after the attack")
	if !durable {
		return
	}
	for _, n := range nodes {
		n.Kill()
	}
	for _, n := range nodes {
		n.Restart()
	}
	cluster.WaitActive(t, nodes, 3)
	capsHold(t, nodes, cluster.NewClient(t, cluster.Seeds(nodes...)), capped, "after a restart of every node")
}

// capsHold checks that every node's "now" is its clock, that real-time
// impressions count, and that the capped viewers stay capped through a
// full pass of every node's sweeper.
func capsHold(t *testing.T, nodes []*cluster.Node, c *client.Client, capped []string, when string) {
	t.Helper()
	for _, n := range nodes {
		// Absent (0) on a node without the gauge; the checks below apply
		// to every version.
		if hw, limit := n.Metric("fcap_engine_high_water_seconds"), float64(time.Now().Unix()+60); hw > limit {
			t.Errorf("%s: %s's high-water mark is %.0f s, past its clock plus the skew (%.0f)", when, n.Name, hw, limit)
		}
	}
	ctx := context.Background()
	// Real-time impressions count: each fresh viewer gets one at a cap of
	// one, so an Allow after it must be denied. A stale impression would
	// count nothing and the Allow would be granted.
	once := fcap.Cap{Scope: "campaign", ID: "once", Limit: 1, Window: time.Hour}
	fresh := viewerIDs("fresh-"+fmt.Sprint(time.Now().UnixNano()), 30)
	for _, v := range fresh {
		c.Record(v, fcap.Impression{ID: v + "-imp", Time: time.Now().UnixMilli(), Caps: []fcap.Cap{once}})
	}
	flush(t, c)
	stale := 0
	for _, v := range fresh {
		vd, err := c.Allow(ctx, v, []fcap.Cap{once})
		if err != nil || vd.Failed() {
			t.Fatalf("%s: allow %s: %+v %v", when, v, vd, err)
		}
		if vd.Allowed {
			stale++
		}
	}
	if stale > 0 {
		t.Errorf("%s: %d of %d real-time impressions did not count (stale)", when, stale, len(fresh))
	}
	// Capped viewers stay capped while every node's sweeper makes a full
	// pass (about 7 s with fcapd's defaults): a "now" in the future would
	// sweep their counters away.
	unblocked := map[string]bool{}
	for deadline := time.Now().Add(12 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		for _, v := range capped {
			res, err := c.Check(ctx, v, []fcap.Candidate{{Caps: []fcap.Cap{capDay3}}})
			if err != nil {
				t.Fatalf("%s: check %s: %v", when, v, err)
			}
			if vd := res.Verdicts[0]; vd.Allowed && !vd.Failed() {
				unblocked[v] = true
			}
		}
	}
	if len(unblocked) > 0 {
		t.Errorf("%s: %d of %d viewers at their cap were unblocked", when, len(unblocked), len(capped))
	}
}

// postJSON posts body to the node's JSON API and returns the status. A
// verdict the cluster did not give (fail_open: the API's own client had
// no answer in time, as on a cluster that just formed) is asked again.
func postJSON(t *testing.T, n *cluster.Node, path, body string) int {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		req, err := http.NewRequest("POST", "http://"+n.HTTP+path, bytes.NewBufferString(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if bytes.Contains(b, []byte(`"fail_open":true`)) && time.Now().Before(deadline) {
			continue
		}
		if resp.StatusCode != http.StatusBadRequest {
			t.Logf("%s %s: HTTP %d %s", n.Name, path, resp.StatusCode, b)
		}
		return resp.StatusCode
	}
}

func flush(t *testing.T, c *client.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

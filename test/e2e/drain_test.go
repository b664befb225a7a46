package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/test/cluster"
)

// TestDrainHandsEverythingOver drains a node with "fcapctl drain" while
// a client runs Allows and Checks on soft and strict caps. (With
// --gossip-profile lan, the default, the code before this test left a
// survivor waiting for 33 partitions when the drain returned and claimed
// 52 without their hand-over 10 s later; that run needs a quiet machine,
// its 200 ms probes declare nodes of a starved one dead.) The drain exits 0 only once the node's
// partitions are with their new owners: when it returns, every
// survivor's ring is without it and no survivor waits for a partition.
// No call returns an error, nothing acknowledged is lost, and no new
// owner claims a partition without its hand-over. Calls decided by the
// failure policy during the drain are counted and logged: the move of a
// primary still refuses for the moment between the old primary's last
// write and the new one's ring (a few calls per drain here).
func TestDrainHandsEverythingOver(t *testing.T) {
	ctl := fcapctl(t) // built before the load: a build starves the nodes
	nodes := cluster.StartCluster(t, 3, cluster.Options{Replicas: 2})
	var clientLog cluster.LogBuffer // the client's own log, for logFailures
	c := cluster.NewClient(t, seeds(nodes...), func(cfg *client.Config) {
		cfg.Logger = slog.New(slog.NewJSONHandler(&clientLog, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	softCap := fcap.Cap{Scope: "campaign", ID: "drain-soft", Limit: fcap.MaxLimit, Window: 24 * time.Hour}
	strictCap := fcap.Cap{Scope: "campaign", ID: "drain-strict", Limit: fcap.MaxLimit, Window: 24 * time.Hour, Mode: fcap.Strict}
	softViewers, strictViewers := viewerIDs("drain-soft", 200), viewerIDs("drain-strict", 200)
	soft, strict := newLedger(), newLedger()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	ws := traffic(ctx, c, soft, softViewers, softCap, 2)
	wst := traffic(ctx, c, strict, strictViewers, strictCap, 2)
	cluster.Eventually(t, 30*time.Second, func() bool {
		strict.mu.Lock()
		defer strict.mu.Unlock()
		return len(strict.acked) > 50
	}, "traffic did not start")
	refused := func() int {
		soft.mu.Lock()
		defer soft.mu.Unlock()
		strict.mu.Lock()
		defer strict.mu.Unlock()
		return soft.failed + soft.errors + strict.failed + strict.errors
	}

	drained, survivors := nodes[1], []*cluster.Node{nodes[0], nodes[2]}
	before := refused()
	// What began before the drain: the forming of the cluster, where
	// three nodes changing rings at different moments can still leave one
	// claiming partitions without a hand-over nobody owed it
	// (ARCHITECTURE.md, "A hand-over that does not come"); logged, not
	// this test's subject. A claim comes SyncTimeout after its wait
	// began, so one that began while the cluster formed can be logged
	// during the drain: each line is placed by when its cause began
	// (beganAt), not by where it falls in the log the test has copied.
	drainStart := time.Now()
	out, err := exec.Command(ctl, "drain", "--addr", nodes[0].Data, drained.Name).CombinedOutput()
	if err != nil {
		t.Fatalf("fcapctl drain %s: %v\n%s\n%s:\n%s", drained.Name, err, out, drained.Name, drained.Logs())
	}
	// Returned: the hand-over is complete on every survivor, now.
	for _, n := range survivors {
		st, err := n.Status()
		if err != nil {
			t.Fatalf("%s status: %v", n.Name, err)
		}
		if st.Members != 2 || st.Syncing != 0 && !lapsed(t, n) {
			t.Errorf("%s when the drain returned: %d members, %d partitions syncing; want 2 members and none syncing", n.Name, st.Members, st.Syncing)
		}
	}
	var why reason
	cluster.Eventually(t, 60*time.Second, func() bool {
		var ok bool
		ok, why.s = cluster.Settled(survivors, 2)
		return ok
	}, "the survivors did not settle after the drain: %v", &why)
	during := refused() - before
	stop()
	ws.Wait()
	wst.Wait()
	// fcapd exits by itself once drained.
	if code, ok := drained.Exited(60 * time.Second); !ok || code != 0 {
		t.Errorf("%s after its drain: exited %v, status %d; want it to exit 0 by itself", drained.Name, ok, code)
	}

	for _, n := range survivors {
		for _, line := range strings.Split(n.Logs(), "\n") {
			if !strings.Contains(line, "without a hand-over") && !strings.Contains(line, "gone before its hand-over") {
				continue
			}
			if began, ok := beganAt(line); ok && began.Before(drainStart) {
				t.Logf("%s, begun before the drain: %s", n.Name, line)
			} else {
				t.Errorf("%s: %s", n.Name, line)
			}
		}
	}
	strictLost, _ := verify(t, strict, counted(t, c, strictViewers, strictCap))
	softLost, _ := verify(t, soft, counted(t, c, softViewers, softCap))
	t.Logf("strict: %d acknowledged, %d failed by policy, %d errors, %d lost; soft: %d acknowledged, %d failed by policy, %d errors, %d lost; %d of them from the drain's start until the survivors settled",
		total(strict.acked), strict.failed, strict.errors, strictLost, total(soft.acked), soft.failed, soft.errors, softLost, during)

	if n := soft.errors + strict.errors; n != 0 {
		t.Errorf("the client surfaced %d errors", n)
	}
	// A drain is invisible to a caller with a budget: the client asks an
	// owner in transition again within the deadline (issue 17).
	if during != 0 {
		t.Errorf("%d calls failed by policy or errors from the drain's start until the survivors settled, want 0", during)
		logFailures(t, c, append(strict.failures(), soft.failures()...), nodes, &clientLog)
	}
}

// logFailures logs the failed calls, then each node's log lines from a
// second before the first began until the last ended that name a failed
// viewer's partition or are not debug: where to look when a call fails.
func logFailures(t *testing.T, c *client.Client, fails []failure, nodes []*cluster.Node, clientLog *cluster.LogBuffer) {
	t.Helper()
	if len(fails) == 0 {
		return
	}
	r := c.Ring()
	from, to := fails[0].end, fails[0].end
	parts := map[string]bool{}
	for _, f := range fails {
		began := f.began
		if began.IsZero() {
			began = f.end.Add(-cluster.ClientTimeout)
		}
		if began.Before(from) {
			from = began
		}
		if f.end.After(to) {
			to = f.end
		}
		p, owners := r.LookupKey(fcap.ViewerKey(f.viewer))
		parts[fmt.Sprintf(`"partition":%d,`, p)] = true
		var names []string
		for _, o := range owners {
			names = append(names, r.Member(o).Name)
		}
		t.Logf("failed: viewer %s (partition %d, owners now %v), %s to %s, err %v", f.viewer, p, names, began.Format("15:04:05.000"), f.end.Format("15:04:05.000"), f.err)
	}
	from = from.Add(-time.Second)
	logs := map[string]string{"client": clientLog.String()}
	names := []string{"client"}
	for _, n := range nodes {
		logs[n.Name] = n.Logs()
		names = append(names, n.Name)
	}
	for _, name := range names {
		var lines []string
		for _, line := range strings.Split(logs[name], "\n") {
			var l struct {
				Time  time.Time `json:"time"`
				Level string    `json:"level"`
			}
			if json.Unmarshal([]byte(line), &l) != nil || l.Time.Before(from) || l.Time.After(to) {
				continue
			}
			named := false
			for p := range parts {
				named = named || strings.Contains(line, p)
			}
			if named || l.Level != "DEBUG" || name == "client" {
				lines = append(lines, line)
			}
		}
		if len(lines) > 200 {
			lines = append(lines[:100], append([]string{"[...]"}, lines[len(lines)-100:]...)...)
		}
		t.Logf("%s, %d lines from %s to %s:\n%s", name, len(lines), from.Format("15:04:05.000"), to.Format("15:04:05.000"), strings.Join(lines, "\n"))
	}
}

// lapsed reports whether n's log says its strict quorum lapsed and it
// put its partitions back to waiting for the current copies (rule 5 of
// ARCHITECTURE.md's "Strict caps under partitions"): a node whose pings
// went unanswered for a lease (1 s), which a CPU starved by other
// processes causes on a cluster younger than a minute (whose members
// all say they may have routed without it). Its partitions wait for a
// copy again, which is not the drain's doing; the test still requires
// the survivors to settle and every count to match.
func lapsed(t *testing.T, n *cluster.Node) bool {
	t.Helper()
	for _, line := range strings.Split(n.Logs(), "\n") {
		if strings.Contains(line, "after a lapse of the quorum") {
			t.Logf("%s: its quorum lapsed during the drain: %s", n.Name, line)
			return true
		}
	}
	return false
}

// TestDrainedNodeExitsAndStaysGone: once "fcapctl drain" returns, the
// drained fcapd exits 0 by itself (it used to stay up forever, /readyz
// 503 "left the cluster"), and a second drain of it says it already left
// and exits 0 (it used to say "no member named n1" and exit 1). A name
// no member ever had still exits 1, naming the members.
func TestDrainedNodeExitsAndStaysGone(t *testing.T) {
	ctl := fcapctl(t)
	nodes := cluster.StartCluster(t, 3, cluster.Options{Replicas: 2})
	drained := nodes[1]
	out, err := exec.Command(ctl, "drain", "--addr", nodes[0].Data, drained.Name).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "drained") {
		t.Fatalf("fcapctl drain %s: %v\n%s\n%s:\n%s", drained.Name, err, out, drained.Name, drained.Logs())
	}
	code, ok := drained.Exited(60 * time.Second)
	if !ok {
		t.Fatalf("%s still runs 60 s after its drain returned:\n%s", drained.Name, drained.Logs())
	}
	if code != 0 {
		t.Errorf("%s exited with status %d after its drain, want 0:\n%s", drained.Name, code, drained.Logs())
	}
	if !strings.Contains(drained.Logs(), "drained: left the cluster, exiting") {
		t.Errorf("%s did not log why it exits:\n%s", drained.Name, drained.Logs())
	}

	out, err = exec.Command(ctl, "drain", "--addr", nodes[0].Data, drained.Name).CombinedOutput()
	if err != nil || !strings.Contains(string(out), drained.Name+" has already left the cluster") {
		t.Errorf("a second fcapctl drain %s: %v, %q; want exit 0 saying it already left", drained.Name, err, out)
	}
	out, err = exec.Command(ctl, "drain", "--addr", nodes[0].Data, "no-such-node").CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), `no member named "no-such-node"`) || !strings.Contains(string(out), nodes[2].Name) {
		t.Errorf("fcapctl drain no-such-node: %v, %q; want exit 1 naming the members", err, out)
	}
}

// beganAt is when what a node's JSON log line reports began: its time,
// less what it says it waited (a claim's "waited": its SyncTimeout, in
// nanoseconds). ok is false for a line that does not parse.
func beganAt(line string) (time.Time, bool) {
	var l struct {
		Time   time.Time `json:"time"`
		Waited int64     `json:"waited"`
	}
	if err := json.Unmarshal([]byte(line), &l); err != nil || l.Time.IsZero() {
		return time.Time{}, false
	}
	return l.Time.Add(-time.Duration(l.Waited)), true
}

// reason is a message known only when it is printed.
type reason struct{ s string }

func (r *reason) String() string { return r.s }

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/node/engine"
	"github.com/fcap-io/fcap/proto"
	"github.com/fcap-io/fcap/test/cluster"
)

// verifyJSON is what "fcapctl verify --json" prints.
type verifyJSON struct {
	Nodes      int
	Viewers    uint64
	LogChecked []string `json:"log_checked"`
	DriftTotal int      `json:"drift_total"`
	Drift      []struct {
		Partition int
		Key       string
		Kind      string
		Digests   map[string]string
	}
	Unreachable []string
}

// runVerify runs a live "fcapctl verify --json" and returns its report
// and exit status.
func runVerify(t *testing.T, addr string) (verifyJSON, int) {
	t.Helper()
	cmd := exec.Command(fcapctl(t), "verify", "--addr", addr, "--settle", "300ms", "--json")
	out, err := cmd.Output()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	var rep verifyJSON
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("fcapctl verify --json printed %q: %v", out, err)
	}
	return rep, code
}

// TestFcapctlVerifyFindsDrift: on a settled cluster with logs, live
// verify finds every copy agreeing; a count merged into one replica only
// shows as drift between that viewer's owners; segments lost from a
// node's log show as drift between its RAM and its log.
func TestFcapctlVerifyFindsDrift(t *testing.T) {
	dataDir := t.TempDir()
	// Anti-entropy off: it would repair the replica tampered with below
	// before verify could see it.
	nodes := cluster.StartCluster(t, 3, cluster.Options{Replicas: 2, DataDir: dataDir, Args: []string{"--anti-entropy=0"}})
	cluster.WaitActive(t, nodes, 3)
	c := testClient(t, seeds(nodes...))
	strict := fcap.Cap{Scope: "campaign", ID: "verify", Limit: 100, Window: 24 * time.Hour, Mode: fcap.Strict}
	const viewers = 40
	for i := range viewers {
		for range 3 {
			vd, err := c.Allow(context.Background(), fmt.Sprintf("verify-%d", i), []fcap.Cap{strict})
			if err != nil || !vd.Allowed {
				t.Fatalf("Allow: %+v %v", vd, err)
			}
		}
	}

	rep, code := runVerify(t, nodes[0].Data)
	if code != 0 || rep.DriftTotal != 0 || rep.Nodes != 3 || len(rep.LogChecked) != 3 || rep.Viewers != 2*viewers {
		t.Fatalf("settled cluster: exit %d, %+v; want exit 0, no drift, 3 nodes and 3 logs checked, %d viewer copies", code, rep, 2*viewers)
	}

	// Writes going on (soft caps: replicated asynchronously) are not drift.
	soft := fcap.Cap{Scope: "campaign", ID: "busy", Limit: fcap.MaxLimit, Window: 24 * time.Hour}
	busy, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; busy.Err() == nil; i++ {
			c.Allow(context.Background(), fmt.Sprintf("busy-%d", i%50), []fcap.Cap{soft})
		}
	}()
	rep, code = runVerify(t, nodes[0].Data)
	stop()
	<-done
	if code != 0 || rep.DriftTotal != 0 {
		t.Fatalf("under write traffic: exit %d, %+v; want exit 0 and no drift", code, rep)
	}

	// A partition the ring does not have: a clear error.
	var vr proto.VerifyResult
	ctx0, cancel0 := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel0()
	if err := client.Call(ctx0, nodes[0].Data, &proto.Verify{Partitions: []uint32{60000}}, &vr); !errors.Is(err, proto.ErrBadRequest) {
		t.Errorf("Verify of partition 60000: %v, want a bad request", err)
	}

	// One impression more on one backup only, as a peer would send it.
	victim := "verify-7"
	r := c.Ring()
	p, owners := r.Lookup(victim)
	backup := r.Member(owners[1])
	e, err := engine.New(engine.DefaultLocalConfig())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Allow(victim, time.Now().UnixMilli(), strict); err != nil {
		t.Fatal(err)
	}
	key := fcap.ViewerKey(victim)
	var res proto.ReplicateResult
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := client.Call(ctx, backup.Addr, &proto.Replicate{From: "tamper", States: e.Export(key, nil)}, &res); err != nil || res.Applied != 1 {
		t.Fatalf("tampering with %s: %+v %v", backup.Name, res, err)
	}
	rep, code = runVerify(t, nodes[0].Data)
	found := false
	for _, d := range rep.Drift {
		if d.Kind == "replicas" && d.Partition == p && d.Key == fmt.Sprintf("%016x", key) {
			found = true
		}
	}
	if code != 1 || rep.DriftTotal != 1 || !found {
		t.Fatalf("one replica tampered with: exit %d, %+v; want exit 1 and viewer %016x of partition %d drifting between replicas", code, rep, key, p)
	}

	// The log of one node loses its segments: its RAM no longer matches.
	var lost *cluster.Node
	for _, n := range nodes {
		if n.Name != backup.Name {
			lost = n
			break
		}
	}
	segs, _ := filepath.Glob(filepath.Join(filepath.Join(dataDir, lost.Name), "wal", "*"))
	if len(segs) == 0 {
		t.Fatalf("%s has no log segments in %s", lost.Name, filepath.Join(dataDir, lost.Name))
	}
	for _, s := range segs {
		os.Remove(s)
	}
	rep, code = runVerify(t, nodes[0].Data)
	logDrift := 0
	for _, d := range rep.Drift {
		if d.Kind == "log" && d.Digests[lost.Name+" log"] == "-" && d.Digests[lost.Name+" ram"] != "-" {
			logDrift++
		}
	}
	held := 0
	for i := range viewers {
		_, owners := r.Lookup(fmt.Sprintf("verify-%d", i))
		for _, o := range owners {
			if r.Member(o).Name == lost.Name {
				held++
			}
		}
	}
	if code != 1 || held == 0 || rep.DriftTotal < held || logDrift == 0 {
		t.Fatalf("log segments removed on %s (holding %d viewers): exit %d, %d drifting, %d listed as missing from its log; want exit 1 and all of them", lost.Name, held, code, rep.DriftTotal, logDrift)
	}
}

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fcap-io/fcap/proto"
	"github.com/fcap-io/fcap/test/cluster"
)

// Gauges after a fault (issue 17): what a node reports about its
// replication is recomputed from the state it describes, so it returns
// to zero once the fault is over, not when the dead node comes back.

// replicationGauges returns a node's replication queue, lag and
// under-replicated partitions from its status.
func replicationGauges(n *cluster.Node) (*proto.Status, bool) {
	st, err := n.Status()
	return st, err == nil
}

// settledGauges waits until every running node of nodes reports an
// empty replication queue, no lag and no under-replicated partition.
func settledGauges(t *testing.T, nodes []*cluster.Node, after string) {
	t.Helper()
	var last []string
	ok := false
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		last = last[:0]
		ok = true
		for _, n := range nodes {
			if !n.Running() {
				continue
			}
			st, up := replicationGauges(n)
			if !up {
				ok = false
				last = append(last, n.Name+": no status")
				continue
			}
			if st.ReplicationQueue != 0 || st.LagMillis != 0 || st.UnderReplicated != 0 {
				ok = false
			}
			last = append(last, fmt.Sprintf("%s: queue %d, lag %d ms, under-replicated %d", n.Name, st.ReplicationQueue, st.LagMillis, st.UnderReplicated))
		}
		if ok {
			return
		}
	}
	t.Errorf("30 s after %s with no traffic, the gauges still report a backlog: %s", after, strings.Join(last, "; "))
}

// TestGaugesResetWhenAPeerDies: a node killed under traffic leaves its
// peers with changes queued for it; once the ring drops it they are
// dropped too (it will get its partitions whole if it returns), so the
// survivors' queue and lag go back to zero without it.
func TestGaugesResetWhenAPeerDies(t *testing.T) {
	tr := startTraffic(t, "gauges", 300, 4)
	nodes := tr.nodes
	tr.started(t, 100)
	nodes[2].Kill()
	live := nodes[:2]
	// Traffic goes on until the survivors' rings have dropped the dead
	// node: changes queued for it meanwhile never reach it.
	cluster.WaitActive(t, live, 2)
	tr.end()
	settledGauges(t, live, "a peer's death")
}

// TestGaugesAfterADrain: a node drained and restarted under traffic;
// once it is back, no node reports a partition under-replicated or
// anything queued.
func TestGaugesAfterADrain(t *testing.T) {
	tr := startTraffic(t, "gauges-drain", 300, 4)
	nodes := tr.nodes
	tr.started(t, 100)
	runFcapctl(t, "drain", "--addr", nodes[0].Data, nodes[1].Name)
	live := []*cluster.Node{nodes[0], nodes[2]}
	cluster.WaitActive(t, live, 2)
	// The drained node comes back, as after a rolling restart.
	nodes[1].Stop(30 * time.Second)
	nodes[1].Restart()
	cluster.WaitActive(t, nodes, 3)
	tr.end()
	settledGauges(t, nodes, "a drain and a restart")
}

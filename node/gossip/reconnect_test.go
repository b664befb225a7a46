package gossip

import (
	"net"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/fcap-io/fcap/ring"
)

// Two sides that declared each other dead find each other again after a
// heal without any seed or reconcile round: memberlist does not probe a
// member it declared dead, and neither side pushes the other its state.
// (In the partition suite's split-kill9, the side that learned last waited
// for its next reconcile round, 6.8 s after the heal.) Here seeds and
// reconciles are out of play (hour-long backoff and interval, gossip to
// the dead off), so only the reconnect loop can bring node-2 back.
func TestFailedMembersAreReachedAgainAfterAHeal(t *testing.T) {
	var cut atomic.Bool
	var isolated atomic.Value // node-2's gossip address
	isolated.Store("")
	nodes := all(3, ring.Active)
	// node-0 joins the other two; node-2, alone during the cut, has no
	// seed to retry (in split-kill9 it was not alone: the restarted node
	// had joined it).
	nodes[0].seeds, nodes[1].seeds, nodes[2].seeds = []int{1, 2}, []int{0}, nil
	for i := range nodes {
		nodes[i].edit = func(c *Config) {
			c.JoinBackoffMin, c.JoinBackoffMax = time.Hour, time.Hour
			c.ReconcileInterval = time.Hour
			c.ReconnectInterval = 200 * time.Millisecond
			c.Memberlist.GossipToTheDeadTime = 0
			c.Memberlist.ProbeInterval, c.Memberlist.ProbeTimeout, c.Memberlist.SuspicionMult = 100*time.Millisecond, 50*time.Millisecond, 2
			inner, err := memberlist.NewNetTransport(&memberlist.NetTransportConfig{
				BindAddrs: []string{"127.0.0.1"},
				BindPort:  c.Memberlist.BindPort,
			})
			if err != nil {
				t.Fatal(err)
			}
			self := net.JoinHostPort("127.0.0.1", strconv.Itoa(inner.GetAutoBindPort()))
			c.Memberlist.Transport = &FaultTransport{Transport: inner, Cut: func(addr string) bool {
				iso := isolated.Load().(string)
				return cut.Load() && (addr == iso || self == iso) && addr != self
			}}
		}
	}
	ms := cluster(t, nodes)
	waitFor(t, "one cluster", func() bool { return agree(ms, "node-0", "node-1", "node-2") })

	isolated.Store(ms[2].GossipAddr())
	cut.Store(true)
	waitFor(t, "node-2 failed on both others, and they on node-2", func() bool {
		return slices.Equal(failedNames(ms[0]), []string{"node-2"}) && slices.Equal(failedNames(ms[1]), []string{"node-2"}) &&
			slices.Equal(slices.Sorted(slices.Values(failedNames(ms[2]))), []string{"node-0", "node-1"})
	})

	cut.Store(false)
	healed := time.Now()
	waitFor(t, "one cluster again, nobody failed", func() bool {
		return agree(ms, "node-0", "node-1", "node-2") &&
			len(failedNames(ms[0])) == 0 && len(failedNames(ms[1])) == 0 && len(failedNames(ms[2])) == 0
	})
	t.Logf("healed in %v", time.Since(healed).Round(time.Millisecond))
}

// The reconnect loop dials only gossip addresses a node recorded itself
// when it found the member failed: a failed member another node pushes
// (push-pull entries are checked for size only) is counted, but its
// address is never dialed, so no member can make every node dial an
// address it names.
func TestReconnectDialsOnlyAddressesSeenHere(t *testing.T) {
	ms := cluster(t, all(1, ring.Active))
	m := ms[0]
	pushed, err := msgpack.Marshal(&pushState{Failed: []FailedMember{{Name: "pushed", Addr: "127.0.0.1:1", GossipAddr: "127.0.0.1:2", Incarnation: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.mergeState(pushed); err != nil {
		t.Fatal(err)
	}
	meta, err := ring.Member{Name: "seen", Addr: "127.0.0.1:3", State: ring.Active, Incarnation: 1}.MarshalMeta()
	if err != nil {
		t.Fatal(err)
	}
	m.lost(&memberlist.Node{Name: "seen", Addr: net.ParseIP("127.0.0.1"), Port: 4, Meta: meta})
	if got := failedNames(m); !slices.Contains(got, "pushed") || !slices.Contains(got, "seen") {
		t.Fatalf("failed members %v, want both the pushed and the seen one", got)
	}
	var dialed []string
	for _, f := range m.reconnectTargets(reconnectFanout) {
		dialed = append(dialed, f.Name+"@"+f.GossipAddr)
	}
	if !slices.Equal(dialed, []string{"seen@127.0.0.1:4"}) {
		t.Fatalf("reconnect targets %v, want only seen@127.0.0.1:4", dialed)
	}
}

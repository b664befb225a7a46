package gossip

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fcap-io/fcap/ring"
	"github.com/hashicorp/memberlist"
)

// converge is how long a test waits for gossip before failing. Tests poll
// and finish as soon as the condition holds; the deadline only bounds a
// broken run.
const converge = 20 * time.Second

var testLogLevel = func() slog.Level {
	if os.Getenv("RING_TEST_DEBUG") != "" {
		return slog.LevelDebug
	}
	return slog.LevelWarn
}()

// testLogger keeps memberlist's and Membership's warnings and errors.
var testLogger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: testLogLevel}))

// waitFor polls cond until it holds, failing the test at the deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(converge)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", converge, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// freePorts returns n distinct loopback ports that were free for both TCP
// and UDP (memberlist binds both on one port).
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	var held []io.Closer
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for len(ports) < n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
		port := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		held = append(held, u)
		ports = append(ports, port)
	}
	return ports
}

// node describes one Membership of a test cluster.
type node struct {
	name  string
	state ring.State
	seeds []int // indexes of the cluster's nodes to list as seeds
	port  int   // gossip port; 0 picks a free one
	edit  func(*Config)
}

// cluster starts the nodes at the same moment, on ports picked for them
// beforehand so each can list the others as seeds, and shuts them down at
// the end of the test. A port taken in the meantime by someone else
// restarts the lot on fresh ports.
func cluster(t *testing.T, nodes []node) []*Membership {
	t.Helper()
	for attempt := 0; ; attempt++ {
		ms, err := startCluster(t, nodes)
		if err == nil {
			t.Cleanup(func() {
				for _, m := range ms {
					if err := m.Shutdown(); err != nil {
						t.Errorf("Shutdown: %v", err)
					}
				}
			})
			return ms
		}
		if attempt == 2 || !strings.Contains(err.Error(), "network transport") {
			t.Fatal(err)
		}
		t.Logf("retrying on fresh ports: %v", err)
	}
}

func startCluster(t *testing.T, nodes []node) ([]*Membership, error) {
	ports := freePorts(t, len(nodes))
	for i, n := range nodes {
		if n.port != 0 {
			ports[i] = n.port
		}
	}
	ms := make([]*Membership, len(nodes))
	errs := make([]error, len(nodes))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, n := range nodes {
		self := ring.Member{
			Name:        n.name,
			Addr:        fmt.Sprintf("127.0.0.1:%d", 20000+i),
			HTTPAddr:    fmt.Sprintf("127.0.0.1:%d", 30000+i),
			State:       n.state,
			Incarnation: time.Now().UnixNano(),
		}
		cfg := DefaultLocalConfig(self)
		cfg.Memberlist.BindPort = ports[i]
		cfg.Logger = testLogger
		for _, s := range n.seeds {
			cfg.Seeds = append(cfg.Seeds, fmt.Sprintf("127.0.0.1:%d", ports[s]))
		}
		if n.edit != nil {
			n.edit(&cfg)
		}
		wg.Go(func() {
			<-start
			ms[i], errs[i] = New(cfg)
		})
	}
	close(start)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, m := range ms {
			if m != nil {
				m.Shutdown()
			}
		}
		return nil, err
	}
	return ms, nil
}

// names returns the names of a ring's members.
func names(r *ring.Ring) []string {
	var ns []string
	for _, m := range r.Members() {
		ns = append(ns, m.Name)
	}
	return ns
}

// agree reports whether every Membership's ring has exactly the named
// members and all share one epoch.
func agree(ms []*Membership, want ...string) bool {
	for _, m := range ms {
		r := m.Ring()
		if !slices.Equal(names(r), want) || r.Epoch() != ms[0].Ring().Epoch() {
			return false
		}
	}
	return true
}

func all(n int, state ring.State) []node {
	nodes := make([]node, n)
	for i := range nodes {
		nodes[i] = node{name: fmt.Sprintf("node-%d", i), state: state}
		for j := range n {
			nodes[i].seeds = append(nodes[i].seeds, j) // ourselves too
		}
	}
	return nodes
}

// Three nodes started at the same moment, each listing all three as seeds,
// form one cluster; SetState and Leave reach the others' rings.
func TestMembershipFormsOneCluster(t *testing.T) {
	var changes atomic.Int64
	var lastEpoch atomic.Uint64
	nodes := all(3, ring.Active)
	nodes[0].edit = func(c *Config) {
		c.OnChange = func(old, new *ring.Ring) {
			if old == nil || new == nil || old.Epoch() == new.Epoch() {
				t.Errorf("OnChange(%v, %v)", old, new)
			}
			changes.Add(1)
			lastEpoch.Store(new.Epoch())
		}
	}
	ms := cluster(t, nodes)
	waitFor(t, "three nodes agree on one ring", func() bool { return agree(ms, "node-0", "node-1", "node-2") })
	if err := ms[0].Ring().Check(); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.NumMembers() != 3 {
			t.Errorf("%s: NumMembers = %d", m.Self().Name, m.NumMembers())
		}
		for _, mem := range m.Ring().Members() {
			if mem.State != ring.Active || !strings.HasPrefix(mem.Addr, "127.0.0.1:2000") {
				t.Errorf("%s sees %+v", m.Self().Name, mem)
			}
		}
	}
	waitFor(t, "OnChange saw the last ring", func() bool { return lastEpoch.Load() == ms[0].Ring().Epoch() })
	if changes.Load() == 0 {
		t.Fatal("OnChange never called")
	}

	// node-2 starts handing off: the others see it Leaving, still owning
	// its partitions until it leaves.
	if err := ms[2].SetState(ring.Leaving); err != nil {
		t.Fatal(err)
	}
	if ms[2].Self().State != ring.Leaving {
		t.Fatalf("Self().State = %v", ms[2].Self().State)
	}
	waitFor(t, "node-2 is ring.Leaving in every ring", func() bool {
		for _, m := range ms {
			i, ok := m.Ring().Find("node-2")
			if !ok || m.Ring().Member(i).State != ring.Leaving {
				return false
			}
		}
		return true
	})
	for _, m := range ms {
		if ps := m.Ring().OwnedBy("node-2", -1); len(ps) == 0 {
			t.Fatalf("%s: ring.Leaving node-2 owns nothing before it left", m.Self().Name)
		}
		if err := m.Ring().Check(); err != nil {
			t.Fatal(err)
		}
	}

	// node-2 leaves: the others drop it. Leave returns once its broadcast
	// has gone out a few gossip rounds, or fails at the timeout: a second
	// is 20 rounds here, but not on a busy race-built machine, and this
	// is no test of gossip's speed.
	if err := ms[2].Leave(converge); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "node-0 and node-1 drop node-2", func() bool { return agree(ms[:2], "node-0", "node-1") })
	if err := ms[2].Leave(time.Second); err != nil {
		t.Fatalf("second Leave: %v", err)
	}
	if err := ms[2].SetState(ring.Active); !errors.Is(err, ErrLeft) {
		t.Fatalf("SetState after Leave: %v, want ErrLeft", err)
	}
	for range 2 {
		if err := ms[2].Shutdown(); err != nil {
			t.Fatalf("Shutdown: %v", err)
		}
	}
	if err := ms[2].Leave(time.Second); !errors.Is(err, ErrShutdown) {
		t.Fatalf("Leave after Shutdown: %v, want ErrShutdown", err)
	}
	if err := ms[2].SetState(ring.Active); !errors.Is(err, ErrShutdown) {
		t.Fatalf("SetState after Shutdown: %v, want ErrShutdown", err)
	}
}

// A Joining node is in every ring but owns nothing until it turns Active.
// The first ring of a node is just itself.
func TestMembershipJoiningNode(t *testing.T) {
	nodes := []node{
		{name: "a", state: ring.Active},
		{name: "b", state: ring.Joining, seeds: []int{0}},
	}
	ms := cluster(t, nodes)
	a, b := ms[0], ms[1]
	waitFor(t, "a and b agree", func() bool { return agree(ms, "a", "b") })
	r := a.Ring()
	if r.ActiveMembers() != 1 || len(r.OwnedBy("b", -1)) != 0 || len(r.OwnedBy("a", 0)) != r.Partitions() {
		t.Fatalf("Joining b owns partitions: %v", r)
	}
	if err := b.SetState(ring.Active); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b is ring.Active and owns partitions in a's ring", func() bool {
		return len(a.Ring().OwnedBy("b", 0)) > 0 && agree(ms, "a", "b")
	})
	if err := a.Ring().Check(); err != nil {
		t.Fatal(err)
	}
	if a.Ring().ActiveMembers() != 2 {
		t.Fatalf("a's ring: %v", a.Ring())
	}
}

func TestMembershipFirstRing(t *testing.T) {
	cfg := DefaultLocalConfig(ring.Member{Name: "solo", Addr: "127.0.0.1:1", State: ring.Active})
	cfg.Logger = testLogger
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Shutdown()
	r := m.Ring()
	if !slices.Equal(names(r), []string{"solo"}) || len(r.OwnedBy("solo", 0)) != r.Partitions() {
		t.Fatalf("first ring %v", r)
	}
	if host, port, err := net.SplitHostPort(m.GossipAddr()); err != nil || host != "127.0.0.1" || port == "0" {
		t.Fatalf("GossipAddr = %q", m.GossipAddr())
	}
	if cfg.Memberlist.BindPort != 0 || cfg.Memberlist.Delegate != nil {
		t.Fatal("New modified the caller's memberlist.Config")
	}
}

// Clusters that formed apart merge: a and b know only each other at
// start, c and d only each other, and only a lists c. a's reconciliation
// finds c is not a member and joins it.
func TestMembershipMergesClustersFormedApart(t *testing.T) {
	ports := freePorts(t, 4)
	seeds := func(i ...int) func(*Config) {
		return func(c *Config) {
			c.ReconcileInterval = 200 * time.Millisecond
			c.Seeds = nil
			for _, i := range i {
				c.Seeds = append(c.Seeds, fmt.Sprintf("127.0.0.1:%d", ports[i]))
			}
		}
	}
	ab := cluster(t, []node{
		{name: "a", state: ring.Active, port: ports[0], edit: seeds(1, 2)}, // c is not up yet
		{name: "b", state: ring.Active, port: ports[1], edit: seeds(0)},
	})
	waitFor(t, "a and b agree", func() bool { return agree(ab, "a", "b") })
	cd := cluster(t, []node{
		{name: "c", state: ring.Active, port: ports[2], edit: seeds(3)},
		{name: "d", state: ring.Active, port: ports[3], edit: seeds(2)},
	})
	waitFor(t, "a, b, c and d agree", func() bool { return agree(append(ab, cd...), "a", "b", "c", "d") })
	if err := ab[0].Ring().Check(); err != nil {
		t.Fatal(err)
	}
}

// A member whose metadata does not decode is left out of the ring, and the
// rest of the ring is built.
func TestMembershipSkipsBadMeta(t *testing.T) {
	ms := cluster(t, []node{{name: "a", state: ring.Active}})
	a := ms[0]
	rogue := memberlist.DefaultLocalConfig()
	rogue.Name = "rogue"
	rogue.BindAddr = "127.0.0.1"
	rogue.BindPort = 0
	rogue.Delegate = badMeta{}
	rogue.LogOutput = io.Discard
	list, err := memberlist.Create(rogue)
	if err != nil {
		t.Fatal(err)
	}
	defer list.Shutdown()
	if _, err := list.Join([]string{a.GossipAddr()}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a knows rogue", func() bool { return a.NumMembers() == 2 })

	// b joins after rogue: the ring that has b was built from a list
	// that had rogue too.
	b := cluster(t, []node{{name: "b", state: ring.Active, edit: func(c *Config) { c.Seeds = []string{a.GossipAddr()} }}})
	waitFor(t, "a and b agree without rogue", func() bool { return agree(append(ms, b...), "a", "b") })
	if a.NumMembers() != 3 {
		t.Fatalf("a knows %d members, want 3", a.NumMembers())
	}
}

// badMeta is a memberlist delegate whose metadata is not fcap's.
type badMeta struct{}

func (badMeta) NodeMeta(int) []byte                 { return []byte{0x92, 0xc1, 0x00} }
func (badMeta) NotifyMsg([]byte)                    {}
func (badMeta) GetBroadcasts(int, int) [][]byte     { return nil }
func (badMeta) LocalState(bool) []byte              { return nil }
func (badMeta) MergeRemoteState(buf []byte, _ bool) {}

func TestMembershipConfigValidate(t *testing.T) {
	self := ring.Member{Name: "n", Addr: "127.0.0.1:1", State: ring.Active}
	if c := DefaultConfig(self); c.Validate() != nil {
		t.Fatal(c.Validate())
	}
	if c := DefaultLocalConfig(self); c.Validate() != nil {
		t.Fatal(c.Validate())
	}
	for _, tc := range []struct {
		name string
		edit func(*Config)
	}{
		{"no memberlist", func(c *Config) { c.Memberlist = nil }},
		{"names differ", func(c *Config) { c.Memberlist.Name = "m" }},
		{"delegate set", func(c *Config) { c.Memberlist.Delegate = badMeta{} }},
		{"empty addr", func(c *Config) { c.Self.Addr = "" }},
		{"empty name", func(c *Config) { c.Self.Name, c.Memberlist.Name = "", "" }},
		{"bad state", func(c *Config) { c.Self.State = 0 }},
		{"meta too long", func(c *Config) { c.Self.HTTPAddr = strings.Repeat("h", 600) }},
		{"empty seed", func(c *Config) { c.Seeds = []string{"a:1", ""} }},
		{"bad ring", func(c *Config) { c.Ring.Partitions = 100 }},
		{"backoff min 0", func(c *Config) { c.JoinBackoffMin = 0 }},
		{"backoff max < min", func(c *Config) { c.JoinBackoffMax = c.JoinBackoffMin / 2 }},
		{"reconcile 0", func(c *Config) { c.ReconcileInterval = 0 }},
		{"update timeout negative", func(c *Config) { c.UpdateTimeout = -time.Second }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultLocalConfig(self)
			tc.edit(&c)
			if err := c.Validate(); !errors.Is(err, ring.ErrConfig) {
				t.Fatalf("Validate = %v, want ring.ErrConfig", err)
			}
			if m, err := New(c); err == nil {
				m.Shutdown()
				t.Fatal("New accepted it")
			}
		})
	}
}

package quorum

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fcap-io/fcap/proto"
	"github.com/fcap-io/fcap/ring"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// patience bounds a poll; tests finish as soon as the condition holds.
const patience = 20 * time.Second

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", patience, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// fakeMembers is a ring and a failed count a test sets.
type fakeMembers struct {
	mu     sync.Mutex
	r      *ring.Ring
	failed int
}

func (f *fakeMembers) Ring() *ring.Ring { f.mu.Lock(); defer f.mu.Unlock(); return f.r }
func (f *fakeMembers) OutsideRing(*ring.Ring) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failed
}

func buildRing(t *testing.T, names ...string) *ring.Ring {
	t.Helper()
	var ms []ring.Member
	for i, n := range names {
		ms = append(ms, ring.Member{Name: n, Addr: fmt.Sprintf("10.0.0.%d:7000", i+1), HTTPAddr: "x:1", State: ring.Active, Incarnation: 1})
	}
	r, err := ring.Build(ring.DefaultConfig(), ms)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// network answers Pings for each address: with the epoch it was given,
// or an error while the address is cut.
type network struct {
	mu     sync.Mutex
	epoch  map[string]uint64 // by address
	cut    map[string]bool
	absent map[string]bool // addresses whose Pongs say Absent
	pings  map[string]int  // answered Pings, by address
	dialed atomic.Int64
}

func newNetwork() *network {
	return &network{epoch: map[string]uint64{}, cut: map[string]bool{}, absent: map[string]bool{}, pings: map[string]int{}}
}

func (n *network) set(addr string, epoch uint64, cut bool) {
	n.mu.Lock()
	n.epoch[addr], n.cut[addr] = epoch, cut
	n.mu.Unlock()
}

func (n *network) answered(addr string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.pings[addr]
}

func (n *network) Dial(ctx context.Context, addr string) (Conn, error) {
	n.dialed.Add(1)
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cut[addr] {
		return nil, errors.New("unreachable")
	}
	return &conn{n: n, addr: addr}, nil
}

type conn struct {
	n    *network
	addr string
}

func (c *conn) Call(ctx context.Context, req, resp proto.Message) error {
	if _, ok := req.(*proto.Ping); !ok {
		return errors.New("not a ping")
	}
	c.n.mu.Lock()
	defer c.n.mu.Unlock()
	if c.n.cut[c.addr] {
		return io.EOF
	}
	c.n.pings[c.addr]++
	resp.(*proto.Pong).Epoch = c.n.epoch[c.addr]
	resp.(*proto.Pong).Absent = c.n.absent[c.addr]
	return nil
}

func (c *conn) Close() error { return nil }

// clock is a monotonic clock a test moves.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time         { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration)    { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }
func newClock() *clock                  { return &clock{t: time.Unix(1000, 0)} }
func quiet() *slog.Logger               { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
func addrOf(r *ring.Ring, i int) string { return r.Members()[i].Addr }

func newTracker(t *testing.T, m Members, n *network, c *clock) *Tracker {
	t.Helper()
	tr := New(Config{Self: "a", Interval: time.Millisecond, Lease: time.Second, Logger: quiet(), Now: c.Now}, m, n)
	t.Cleanup(tr.Close)
	tr.Update()
	return tr
}

// A node holds the quorum while a majority of the member set confirmed
// its epoch within the lease, and loses it when the lease runs out.
func TestQuorumHoldsWithAMajorityAndLapses(t *testing.T) {
	r := buildRing(t, "a", "b", "c")
	m := &fakeMembers{r: r}
	n := newNetwork()
	c := newClock()
	n.set(addrOf(r, 1), r.Epoch(), false)
	n.set(addrOf(r, 2), r.Epoch(), true) // c is cut off: b alone makes 2 of 3
	tr := newTracker(t, m, n, c)
	waitFor(t, "the quorum with b's confirmation", func() bool { return tr.Holds(r.Epoch()) })
	if st := tr.State(); st.Members != 3 || st.Needed != 2 || st.Confirmed != 2 || !st.Holds() {
		t.Errorf("state %+v: want 3 members, 2 needed, 2 confirmed", st)
	}
	if tr.Holds(r.Epoch() + 1) {
		t.Error("holds a quorum for another epoch")
	}

	n.set(addrOf(r, 1), r.Epoch(), true) // now b is cut off too
	before := n.answered(addrOf(r, 1))
	c.Add(time.Second - time.Millisecond)
	if !tr.Holds(r.Epoch()) {
		t.Fatal("lost the quorum before the lease ran out")
	}
	c.Add(2 * time.Millisecond)
	if tr.Holds(r.Epoch()) {
		t.Fatal("still holds the quorum past the lease, cut off from every peer")
	}
	if n.answered(addrOf(r, 1)) != before {
		t.Fatal("a cut peer answered")
	}
	if st := tr.State(); st.Holds() || st.Confirmed != 1 {
		t.Errorf("state %+v after the lease: want only itself confirmed", st)
	}

	n.set(addrOf(r, 2), r.Epoch(), false) // the cut heals for c
	waitFor(t, "the quorum back with c's confirmation", func() bool { return tr.Holds(r.Epoch()) })
}

// Failed members count: a node whose ring holds only itself, with two
// members failed, is a minority of three, never a majority of one.
func TestQuorumCountsFailedMembers(t *testing.T) {
	alone := buildRing(t, "a")
	m := &fakeMembers{r: alone, failed: 2}
	tr := newTracker(t, m, newNetwork(), newClock())
	if tr.Holds(alone.Epoch()) {
		t.Fatal("a node alone with two failed members holds a quorum")
	}
	if st := tr.State(); st.Members != 3 || st.Needed != 2 || st.Confirmed != 1 {
		t.Errorf("state %+v: want 3 members, 2 needed, 1 confirmed", st)
	}
	// The operator forgets both: a member set of one is its own majority.
	m.mu.Lock()
	m.failed = 0
	m.mu.Unlock()
	tr.Update()
	if !tr.Holds(alone.Epoch()) {
		t.Fatal("a node alone, nothing failed, does not hold its quorum")
	}
}

// Peers that answer with another epoch do not count: a majority must
// route by the same ring.
func TestQuorumNeedsTheSameEpoch(t *testing.T) {
	r := buildRing(t, "a", "b", "c")
	n := newNetwork()
	n.set(addrOf(r, 1), r.Epoch()+1, false)
	n.set(addrOf(r, 2), r.Epoch()+2, false)
	tr := newTracker(t, &fakeMembers{r: r}, n, newClock())
	waitFor(t, "several answers from both peers", func() bool {
		return n.answered(addrOf(r, 1)) >= 3 && n.answered(addrOf(r, 2)) >= 3
	})
	if tr.Holds(r.Epoch()) {
		t.Fatal("holds a quorum confirmed only by peers on other rings")
	}
	// b catches up with this node's ring: 2 of 3.
	n.set(addrOf(r, 1), r.Epoch(), false)
	waitFor(t, "the quorum once b routes by the same ring", func() bool { return tr.Holds(r.Epoch()) })
}

// An even split holds no majority on either side: 2 of 4 is not more
// than half.
func TestQuorumEvenSplit(t *testing.T) {
	r := buildRing(t, "a", "b", "c", "d")
	n := newNetwork()
	n.set(addrOf(r, 1), r.Epoch(), false)
	n.set(addrOf(r, 2), r.Epoch(), true)
	n.set(addrOf(r, 3), r.Epoch(), true)
	tr := newTracker(t, &fakeMembers{r: r}, n, newClock())
	waitFor(t, "several answers from b", func() bool { return n.answered(addrOf(r, 1)) >= 3 })
	if tr.Holds(r.Epoch()) {
		t.Fatal("2 of 4 holds a quorum")
	}
	n.set(addrOf(r, 2), r.Epoch(), false)
	waitFor(t, "3 of 4", func() bool { return tr.Holds(r.Epoch()) })
}

// Close stops every pinger (goleak checks) and the quorum is lost.
func TestQuorumClose(t *testing.T) {
	r := buildRing(t, "a", "b", "c")
	n := newNetwork()
	n.set(addrOf(r, 1), r.Epoch(), false)
	n.set(addrOf(r, 2), r.Epoch(), false)
	tr := newTracker(t, &fakeMembers{r: r}, n, newClock())
	waitFor(t, "the quorum", func() bool { return tr.Holds(r.Epoch()) })
	tr.Close()
	tr.Close()
	if tr.Holds(r.Epoch()) {
		t.Fatal("holds a quorum after Close")
	}
}

// A node that confirmed one epoch to a peer confirms no other to anyone
// until that lease ran out, or the peer moved on to another ring; clients
// always get the epoch.
func TestPromisesFenceTheLeaseTheyBack(t *testing.T) {
	const e1, e2 = 11, 22
	p := NewPromises(time.Second)
	t0 := time.Unix(1000, 0)
	if got := p.Answer("a", e1, e1, t0); got != e1 {
		t.Fatalf("first confirmation: %d, want %d", got, e1)
	}
	// This node moves to e2; b asks at e2 while a may still count e1.
	if got := p.Answer("b", e2, e2, t0.Add(500*time.Millisecond)); got != 0 {
		t.Fatalf("confirmed e2 to b while a's lease on e1 stands: %d", got)
	}
	if got := p.Answer("", 0, e2, t0.Add(500*time.Millisecond)); got != e2 {
		t.Fatalf("a client's ping: %d, want %d", got, e2)
	}
	// Past the lease and its margin: e2 is confirmed.
	if got := p.Answer("b", e2, e2, t0.Add(time.Second+DriftMargin(time.Second))); got != e2 {
		t.Fatalf("after a's lease ran out: %d, want %d", got, e2)
	}

	// Again, but a moves on to e2 itself: the promise is released at once.
	p = NewPromises(time.Second)
	p.Answer("a", e1, e1, t0)
	if got := p.Answer("a", e2, e2, t0.Add(time.Millisecond)); got != e2 {
		t.Fatalf("a moved on to e2: %d, want %d", got, e2)
	}
	if got := p.Answer("b", e2, e2, t0.Add(2*time.Millisecond)); got != e2 {
		t.Fatalf("b at e2 after a moved on: %d, want %d", got, e2)
	}
	// A peer on another epoch than this node's gets this node's epoch
	// (which confirms nothing for it) and no promise.
	p = NewPromises(time.Second)
	if got := p.Answer("c", e1, e2, t0); got != e2 {
		t.Fatalf("c at e1, this node at e2: %d, want %d", got, e2)
	}
	if got := p.Answer("d", e2, e2, t0.Add(time.Millisecond)); got != e2 {
		t.Fatalf("a promise was made to c for an epoch it was not confirmed: %d", got)
	}
}

// A node whose quorum lapsed, told by a peer that it routed without it
// meanwhile, reacquires its partitions once, before that peer's
// confirmation restores the quorum. Without a lapse, the same word
// changes nothing.
func TestReacquireAfterALapseOthersRoutedWithout(t *testing.T) {
	r := buildRing(t, "a", "b", "c")
	n := newNetwork()
	c := newClock()
	n.set(addrOf(r, 1), r.Epoch(), false)
	n.set(addrOf(r, 2), r.Epoch(), false)
	n.mu.Lock()
	n.absent[addrOf(r, 1)] = true // b routed without a a moment ago
	n.mu.Unlock()
	var reacquired atomic.Int64
	var tr *Tracker
	heldDuring := atomic.Bool{}
	tr = New(Config{Self: "a", Interval: time.Millisecond, Lease: time.Second, Logger: quiet(), Now: c.Now,
		Reacquire: func() {
			reacquired.Add(1)
			if tr.Holds(r.Epoch()) {
				heldDuring.Store(true)
			}
		}}, &fakeMembers{r: r}, n)
	t.Cleanup(tr.Close)
	tr.Update()
	waitFor(t, "the quorum", func() bool { return tr.Holds(r.Epoch()) })
	waitFor(t, "several answers from b", func() bool { return n.answered(addrOf(r, 1)) >= 5 })
	if got := reacquired.Load(); got != 0 {
		t.Fatalf("reacquired %d times without a lapse", got)
	}

	n.set(addrOf(r, 1), r.Epoch(), true)
	n.set(addrOf(r, 2), r.Epoch(), true)
	c.Add(2 * time.Second) // the lease ran out: a lapse
	if tr.Holds(r.Epoch()) {
		t.Fatal("holds past the lease")
	}
	n.set(addrOf(r, 1), r.Epoch(), false) // b is back, and says it routed without a
	waitFor(t, "the quorum back", func() bool { return tr.Holds(r.Epoch()) })
	if got := reacquired.Load(); got != 1 {
		t.Fatalf("reacquired %d times after one lapse, want 1", got)
	}
	if heldDuring.Load() {
		t.Fatal("the quorum was back before the partitions were reacquired")
	}
	waitFor(t, "more answers from b", func() bool { return n.answered(addrOf(r, 1)) >= 20 })
	if got := reacquired.Load(); got != 1 {
		t.Fatalf("reacquired %d times, want once per lapse", got)
	}
}

// Both peers routed without a node whose quorum lapsed, and both come
// back: the first Pong that says so starts the reacquisition, and the
// other peer's confirmation, which finds no lapse left, must not restore
// the quorum (one confirmation is a majority of three) before the
// partitions are reacquired. The partition suite's one-way run caught a
// strict grant from the cut-off node's stale copy in that window.
func TestNoQuorumWhileReacquiring(t *testing.T) {
	r := buildRing(t, "a", "b", "c")
	n := newNetwork()
	c := newClock()
	n.set(addrOf(r, 1), r.Epoch(), false)
	n.set(addrOf(r, 2), r.Epoch(), false)
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	tr := New(Config{Self: "a", Interval: time.Millisecond, Lease: time.Second, Logger: quiet(), Now: c.Now,
		Reacquire: func() {
			once.Do(func() { close(entered) })
			<-release
		}}, &fakeMembers{r: r}, n)
	t.Cleanup(tr.Close)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	tr.Update()
	waitFor(t, "the quorum", func() bool { return tr.Holds(r.Epoch()) })

	n.set(addrOf(r, 1), r.Epoch(), true)
	n.set(addrOf(r, 2), r.Epoch(), true)
	c.Add(2 * time.Second) // the lease ran out: a lapse
	if tr.Holds(r.Epoch()) {
		t.Fatal("holds past the lease")
	}
	n.mu.Lock()
	n.absent[addrOf(r, 1)], n.absent[addrOf(r, 2)] = true, true
	n.mu.Unlock()
	n.set(addrOf(r, 1), r.Epoch(), false)
	n.set(addrOf(r, 2), r.Epoch(), false)
	<-entered
	// Whichever pinger reacquires, the other keeps confirming meanwhile.
	b, cc := n.answered(addrOf(r, 1)), n.answered(addrOf(r, 2))
	waitFor(t, "the other peer answers during the reacquisition", func() bool {
		return n.answered(addrOf(r, 1)) >= b+3 || n.answered(addrOf(r, 2)) >= cc+3
	})
	if tr.Holds(r.Epoch()) {
		t.Fatal("the quorum was back before the partitions were reacquired")
	}
	close(release)
	waitFor(t, "the quorum back once reacquired", func() bool { return tr.Holds(r.Epoch()) })
}

// A node that formed the cluster alone (a member set of one holds its
// quorum without end) and later lost the majority of the larger set has
// lapsed all the same.
func TestReacquireAfterStartingAlone(t *testing.T) {
	alone := buildRing(t, "a")
	r := buildRing(t, "a", "b", "c")
	m := &fakeMembers{r: alone}
	n := newNetwork()
	c := newClock()
	var reacquired atomic.Int64
	tr := New(Config{Self: "a", Interval: time.Millisecond, Lease: time.Second, Logger: quiet(), Now: c.Now,
		Reacquire: func() { reacquired.Add(1) }}, m, n)
	t.Cleanup(tr.Close)
	tr.Update()
	if !tr.Holds(alone.Epoch()) {
		t.Fatal("alone: no quorum")
	}
	n.set(addrOf(r, 1), r.Epoch(), false)
	n.set(addrOf(r, 2), r.Epoch(), true)
	m.mu.Lock()
	m.r = r
	m.mu.Unlock()
	tr.Update()
	waitFor(t, "the quorum of three", func() bool { return tr.Holds(r.Epoch()) })
	n.set(addrOf(r, 1), r.Epoch(), true)
	c.Add(2 * time.Second)
	n.mu.Lock()
	n.absent[addrOf(r, 1)] = true
	n.mu.Unlock()
	n.set(addrOf(r, 1), r.Epoch(), false)
	waitFor(t, "the quorum back", func() bool { return tr.Holds(r.Epoch()) })
	if got := reacquired.Load(); got != 1 {
		t.Fatalf("reacquired %d times, want 1", got)
	}
}

// A promise to a member that left is released at once.
func TestPromiseReleasedWhenTheMemberLeft(t *testing.T) {
	p := NewPromises(time.Second)
	t0 := time.Unix(1000, 0)
	p.Answer("gone", 11, 11, t0)
	if got := p.Answer("b", 22, 22, t0.Add(time.Millisecond)); got != 0 {
		t.Fatalf("confirmed 22 while the promise to gone stands: %d", got)
	}
	p.Release("gone")
	if got := p.Answer("b", 22, 22, t0.Add(2*time.Millisecond)); got != 22 {
		t.Fatalf("after gone left: %d, want 22", got)
	}
}

// Gained is called each time the quorum forms: the node asks then for the
// copies its claims wait for (they count only when asked under it), not
// at its next pull, up to a second later.
func TestGainedCalledEachTimeTheQuorumForms(t *testing.T) {
	r := buildRing(t, "a", "b", "c")
	m := &fakeMembers{r: r}
	n := newNetwork()
	c := newClock()
	n.set(addrOf(r, 1), r.Epoch(), false)
	n.set(addrOf(r, 2), r.Epoch(), true)
	var gained atomic.Int32
	tr := New(Config{Self: "a", Interval: time.Millisecond, Lease: time.Second, Logger: quiet(), Now: c.Now,
		Gained: func() { gained.Add(1) }}, m, n)
	t.Cleanup(tr.Close)
	tr.Update()
	waitFor(t, "the quorum", func() bool { return tr.Holds(r.Epoch()) })
	waitFor(t, "Gained once", func() bool { return gained.Load() == 1 })
	n.set(addrOf(r, 1), r.Epoch(), true)
	c.Add(2 * time.Second)
	// A pinger's cycle after the clock moved publishes the lapse (each
	// ends with a refresh); b's cycles redial, since it is cut.
	dialed := n.dialed.Load()
	waitFor(t, "the lapse published", func() bool { return n.dialed.Load() > dialed+2 && !tr.Holds(r.Epoch()) })
	if g := gained.Load(); g != 1 {
		t.Fatalf("Gained called %d times while the quorum formed once", g)
	}
	n.set(addrOf(r, 2), r.Epoch(), false)
	waitFor(t, "Gained again when the quorum forms again", func() bool { return gained.Load() >= 2 })
	if g := gained.Load(); g != 2 {
		t.Fatalf("Gained called %d times for two formations", g)
	}
}

package region

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fcap-io/fcap/proto"
	"github.com/fcap-io/fcap/ring"
)

// fakeEngine holds a version per viewer key; its export of a viewer is
// 16 bytes, the key and the version.
type fakeEngine struct {
	mu sync.Mutex
	// guarded by mu
	versions map[uint64]uint64
}

func newFakeEngine() *fakeEngine { return &fakeEngine{versions: map[uint64]uint64{}} }

// write changes the viewer with key and returns its new version.
func (e *fakeEngine) write(key uint64) uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.versions[key]++
	return e.versions[key]
}

func (e *fakeEngine) Export(key uint64, dst []byte) []byte {
	e.mu.Lock()
	defer e.mu.Unlock()
	dst = binary.LittleEndian.AppendUint64(dst, key)
	return binary.LittleEndian.AppendUint64(dst, e.versions[key])
}

func (e *fakeEngine) PartitionKeys(want []bool, fn func(uint64) bool) {
	e.Keys(func(k uint64) bool { return !want[k%uint64(len(want))] || fn(k) })
}

func (e *fakeEngine) Keys(fn func(uint64) bool) {
	e.mu.Lock()
	keys := make([]uint64, 0, len(e.versions))
	for k := range e.versions {
		keys = append(keys, k)
	}
	e.mu.Unlock()
	for _, k := range keys {
		if !fn(k) {
			return
		}
	}
}

func (e *fakeEngine) HighWater() int64 { return 1 }

// fakeKeyHash is the one cap key hash of every fake viewer.
const fakeKeyHash = 0xc0ffee

// fakeDigest is the digest of version v of the viewer with key, as the
// fake engine and the fake region reckon it.
func fakeDigest(key, v uint64) uint64 { return (key*0x9e3779b97f4a7c15 ^ v*0xbf58476d1ce4e5b9) | 1 }

func (e *fakeEngine) LocalDigest(key uint64, now int64, keys func(uint64)) uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	v := e.versions[key]
	if v == 0 {
		return 0
	}
	if keys != nil {
		keys(fakeKeyHash)
	}
	return fakeDigest(key, v)
}

// set makes the viewer with key be at version v without a mark, as a
// copy this node took over from a primary that died before shipping it.
func (e *fakeEngine) set(key, v uint64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.versions[key] = v
}

// allPrimary is Deps.PrimaryPartitions of a node primary of every
// partition of the fake rings (7).
func allPrimary() (int, []int) { return 7, []int{0, 1, 2, 3, 4, 5, 6} }

// fakeRegion is a peer region of nodes in memory: each answers
// TopologyRequest with the region's ring and RegionMerge by keeping the
// newest version of each viewer it owns, refusing the others.
type fakeRegion struct {
	mu sync.Mutex
	// guarded by mu
	ring       *ring.Ring
	stale      *ring.Ring // when set, what TopologyRequest answers (a ring behind)
	held       map[uint64]uint64
	merges     map[uint64]int // states merged per key
	down       bool
	blocking   chan struct{}  // when set, merges wait for it to close
	noDigest   bool           // answers RegionDigest as a node that predates it
	maxDigests int            // when set, answers holding more are truncated
	busy       int            // digests answered Overloaded before the next is answered
	slices     map[uint32]int // RegionDigest calls by their Slices

	dials    atomic.Int64
	blocked  atomic.Int64 // merges that waited for blocking
	refusals atomic.Int64 // states refused: not the node's
}

func newFakeRegion(t *testing.T, names ...string) *fakeRegion {
	r := &fakeRegion{held: map[uint64]uint64{}, merges: map[uint64]int{}, slices: map[uint32]int{}}
	r.ring = buildRing(t, 0, names...)
	return r
}

func buildRing(t *testing.T, salt int, names ...string) *ring.Ring {
	t.Helper()
	var ms []ring.Member
	for _, n := range names {
		ms = append(ms, ring.Member{Name: n, Addr: n + ":7700", State: ring.Active, Incarnation: int64(1 + salt)})
	}
	return buildRingOf(t, 7, ms)
}

// buildRingOf builds a ring of members ms with the given partitions.
func buildRingOf(t *testing.T, partitions int, ms []ring.Member) *ring.Ring {
	t.Helper()
	cfg := ring.DefaultConfig()
	cfg.Partitions = partitions
	r, err := ring.Build(cfg, ms)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (r *fakeRegion) setDown(down bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.down = down
}

// version is the newest version of key the region holds.
func (r *fakeRegion) version(key uint64) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.held[key]
}

func (r *fakeRegion) Dial(ctx context.Context, addr string) (Conn, error) {
	r.dials.Add(1)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.down {
		return nil, fmt.Errorf("cannot reach %s: connection refused", addr)
	}
	return &fakeConn{r: r, addr: addr, closed: make(chan struct{})}, nil
}

type fakeConn struct {
	r         *fakeRegion
	addr      string
	closed    chan struct{}
	closeOnce sync.Once
}

func (c *fakeConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return nil
}

func (c *fakeConn) Call(ctx context.Context, req, resp proto.Message) error {
	r := c.r
	r.mu.Lock()
	block := r.blocking
	r.mu.Unlock()
	if _, merge := req.(*proto.RegionMerge); merge && block != nil {
		// Like rpc.AdminConn, a call ends by an answer or the
		// connection's close, not by ctx.
		r.blocked.Add(1)
		select {
		case <-block:
		case <-c.closed:
			return io.ErrClosedPipe
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.down {
		return io.ErrUnexpectedEOF
	}
	switch m := req.(type) {
	case *proto.TopologyRequest:
		rg := r.ring
		if r.stale != nil {
			rg, r.stale = r.stale, nil
		}
		t := resp.(*proto.Topology)
		*t = proto.Topology{Epoch: rg.Epoch(), Partitions: rg.Partitions(), Replicas: rg.Replicas(), Owners: rg.Table()}
		for _, mb := range rg.Members() {
			t.Members = append(t.Members, proto.Member{Name: mb.Name, Addr: mb.Addr, State: uint8(mb.State), Incarnation: mb.Incarnation})
		}
		return nil
	case *proto.RegionMerge:
		if m.Region != "a" {
			return &proto.Error{Code: proto.CodeBadRequest, Message: "region " + m.Region}
		}
		if len(m.States)%16 != 0 {
			return errors.New("bad states")
		}
		res := resp.(*proto.RegionMergeResult)
		*res = proto.RegionMergeResult{Epoch: r.ring.Epoch()}
		for b := m.States; len(b) > 0; b = b[16:] {
			key, v := binary.LittleEndian.Uint64(b), binary.LittleEndian.Uint64(b[8:])
			_, owners := r.ring.LookupKey(key)
			if r.ring.Member(owners[0]).Addr != c.addr {
				res.Refused = append(res.Refused, key)
				r.refusals.Add(1)
				continue
			}
			r.held[key] = max(r.held[key], v)
			r.merges[key]++
			res.Applied++
		}
		return nil
	case *proto.RegionDigest:
		return r.digest(c, m, resp.(*proto.RegionDigestResult))
	}
	return fmt.Errorf("unexpected %T", req)
}

// digest answers a RegionDigest as a node of the region does: the
// digests of the viewers of the slice it holds, when it is the
// partition's primary. Called with r.mu held.
func (r *fakeRegion) digest(c *fakeConn, m *proto.RegionDigest, res *proto.RegionDigestResult) error {
	switch {
	case r.noDigest:
		return &proto.Error{Code: proto.CodeUnsupported, Message: "unknown message type region_digest"}
	case r.busy > 0:
		r.busy--
		return &proto.Error{Code: proto.CodeOverloaded, Message: "a region digest is already running on this node"}
	case m.Origin != "a":
		return &proto.Error{Code: proto.CodeBadRequest, Message: "region " + m.Origin}
	case int(m.Partitions) != r.ring.Partitions():
		return &proto.Error{Code: proto.CodeBadRequest, Message: "partition count"}
	}
	owner, ok := r.ring.Owner(int(m.Partition))
	if !ok || owner.Addr != c.addr {
		return &proto.Error{Code: proto.CodeNotOwner, Epoch: r.ring.Epoch()}
	}
	r.slices[m.Slices]++
	*res = proto.RegionDigestResult{Epoch: r.ring.Epoch()}
	for k, v := range r.held {
		if !m.InSlice(k) || !m.HasKey(fakeKeyHash) {
			continue
		}
		if r.maxDigests > 0 && len(res.Digests) == r.maxDigests {
			res.Truncated = true
			break
		}
		res.Digests = append(res.Digests, proto.ViewerDigest{Key: k, Sum: fakeDigest(k, v)})
	}
	return nil
}

// hold makes the region hold version v of the viewer with key, as if
// it had merged it.
func (r *fakeRegion) hold(key, v uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.held[key] = v
}

// merged is how many times the region merged the viewer with key.
func (r *fakeRegion) merged(key uint64) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.merges[key]
}

var quiet = slog.New(slog.DiscardHandler)

// testConfig is a link config of region "a" to peer "b" with fast timings.
func testConfig() Config {
	c := DefaultConfig()
	c.Name = "a"
	c.Peers = []Peer{{Name: "b", Seeds: []string{"seed-b:7700"}}}
	c.BatchInterval = 5 * time.Millisecond
	c.BatchViewers = 16
	c.QueueViewers = 64
	c.RetryMin, c.RetryMax = time.Millisecond, 20*time.Millisecond
	c.Timeout = 5 * time.Second
	c.CatchUpRate = 100000
	return c
}

// startLinks starts the links of cfg over eng and the fake region, all
// primary, and closes them when the test ends.
func startLinks(t *testing.T, cfg Config, eng *fakeEngine, peer *fakeRegion) *Links {
	t.Helper()
	ls, err := New(cfg, Deps{Engine: eng, Dialer: peer, Primary: func(uint64) bool { return true },
		PrimaryPartitions: allPrimary, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	ls.Start()
	t.Cleanup(ls.Close)
	return ls
}

// eventually polls cond until it holds, failing the test after a
// generous deadline.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 30s: %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// missing lists the keys whose newest version the region does not hold.
func missing(eng *fakeEngine, peer *fakeRegion) []uint64 {
	eng.mu.Lock()
	want := make(map[uint64]uint64, len(eng.versions))
	for k, v := range eng.versions {
		want[k] = v
	}
	eng.mu.Unlock()
	var out []uint64
	for k, v := range want {
		if peer.version(k) != v {
			out = append(out, k)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

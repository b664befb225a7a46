package ring

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cespare/xxhash/v2"

	"github.com/fcap-io/fcap"
)

// members returns n members named prefix0.. in state s.
func members(prefix string, n int, s State) []Member {
	ms := make([]Member, n)
	for i := range ms {
		name := fmt.Sprintf("%s%d", prefix, i)
		ms[i] = Member{Name: name, Addr: name + ":7070", HTTPAddr: name + ":8080", State: s, Incarnation: int64(1000 + i)}
	}
	return ms
}

// mustBuild builds a ring or fails the test.
func mustBuild(t testing.TB, cfg Config, ms []Member) *Ring {
	t.Helper()
	r, err := Build(cfg, ms)
	if err != nil {
		t.Fatalf("Build(%d members): %v", len(ms), err)
	}
	return r
}

// checkRing fails the test when r breaks an invariant (Ring.Check).
func checkRing(t testing.TB, r *Ring) {
	t.Helper()
	if err := r.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestBuildMemberCounts(t *testing.T) {
	cfg := DefaultConfig()
	counts := []int{0, 100}
	for n := 1; n <= 64; n++ {
		counts = append(counts, n)
	}
	for _, n := range counts {
		r := mustBuild(t, cfg, members("node-", n, Active))
		checkRing(t, r)
		if n == 0 {
			continue
		}
		// No member is primary of more partitions than the load
		// bound allows. (Some member may be primary of none: with 271
		// partitions that happens from about 45 members on.)
		primaries := make(map[uint16]int)
		for p := range r.Partitions() {
			primaries[r.Owners(p)[0]]++
		}
		bound := int(math.Ceil(roomyLoad(cfg.Partitions, n, cfg.Load) * float64(cfg.Partitions/n)))
		for i, c := range primaries {
			if c > bound {
				t.Errorf("%d members: %q is primary of %d partitions, bound %d", n, r.Member(i).Name, c, bound)
			}
		}
		if n <= 32 && len(primaries) != n {
			t.Errorf("%d members: only %d are primaries", n, len(primaries))
		}
	}
}

func TestBuildZeroOwners(t *testing.T) {
	// Joining members own nothing yet.
	ms := members("j", 3, Joining)
	for _, ms := range [][]Member{nil, {}, ms} {
		r := mustBuild(t, DefaultConfig(), ms)
		checkRing(t, r)
		for p := range r.Partitions() {
			if _, ok := r.Owner(p); ok {
				t.Fatalf("partition %d has an owner with no owning member", p)
			}
		}
		if p, o := r.Lookup("viewer"); len(o) != 0 || p != PartitionOf(fcap.ViewerKey("viewer"), r.Partitions()) {
			t.Fatalf("Lookup = %d, %v", p, o)
		}
	}
}

// TestLeavingStillOwns: a Leaving member keeps its partitions until it
// leaves the gossip pool, so it can hand them over while serving.
func TestLeavingStillOwns(t *testing.T) {
	ms := members("m", 3, Active)
	before := mustBuild(t, DefaultConfig(), ms)
	ms[1].State = Leaving
	after := mustBuild(t, DefaultConfig(), ms)
	if MovedPrimaries(before, after) != 0 {
		t.Fatal("a member turning Leaving moved partitions")
	}
	if before.Epoch() == after.Epoch() {
		t.Fatal("the state change did not change the epoch")
	}
}

func TestBuildMixedStates(t *testing.T) {
	states := []State{Active, Joining, Active, Leaving, Active}
	for n := 0; n <= 40; n++ {
		ms := members("m", n, Active)
		for i := range ms {
			ms[i].State = states[i%len(states)]
		}
		cfg := DefaultConfig()
		cfg.Replicas = []int{1, 2, 3, 8}[n%4]
		checkRing(t, mustBuild(t, cfg, ms))
	}
}

// Build must not panic, whatever the counts: small prime partition
// counts with up to one member more than partitions, a load bound of 1
// (which consistent alone would panic on), two points per member.
func TestBuildNeverPanics(t *testing.T) {
	type shape struct{ partitions, vn int }
	var shapes []shape
	for _, p := range []int{2, 3, 5, 7, 13, 31} {
		shapes = append(shapes, shape{p, 2}, shape{p, 3}, shape{p, 40})
	}
	for _, sh := range shapes {
		for _, load := range []float64{1, 1.01, 1.25, 2, MaxLoad} {
			cfg := Config{Partitions: sh.partitions, Replicas: 3, VirtualNodes: sh.vn, Load: load}
			for n := 0; n <= sh.partitions+1; n++ {
				buildOrRefuse(t, cfg, n)
			}
		}
	}
	for _, load := range []float64{1, 1.25} {
		cfg := Config{Partitions: 271, Replicas: 2, VirtualNodes: 2, Load: load}
		for _, n := range []int{1, 2, 3, 64, 90, 91, 135, 136, 270, 271, 272} {
			buildOrRefuse(t, cfg, n)
		}
	}
}

// buildOrRefuse builds a ring of n Active members, which must work if
// there are no more members than partitions and be refused otherwise.
func buildOrRefuse(t *testing.T, cfg Config, n int) {
	t.Helper()
	r, err := Build(cfg, members("n", n, Active))
	if n > cfg.Partitions {
		if !errors.Is(err, ErrTooManyMembers) {
			t.Fatalf("%d members, %d partitions: err = %v, want ErrTooManyMembers", n, cfg.Partitions, err)
		}
		return
	}
	if err != nil {
		t.Fatalf("%+v, %d members: %v", cfg, n, err)
	}
	checkRing(t, r)
}

// The same members in any order give the same ring. Names like node-1
// and node-11 would share virtual node names in consistent without the
// point suffix, making the ring depend on insertion order.
func TestBuildDeterministic(t *testing.T) {
	ms := members("node-", 25, Active)
	ms[3].State = Joining
	ms[7].State = Leaving
	want := mustBuild(t, DefaultConfig(), ms)
	rng := rand.New(rand.NewPCG(1, 2))
	for range 8 {
		shuffled := slices.Clone(ms)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		got := mustBuild(t, DefaultConfig(), shuffled)
		if got.Epoch() != want.Epoch() || !slices.Equal(got.Table(), want.Table()) || !slices.Equal(got.Members(), want.Members()) {
			t.Fatal("same members in another order gave another ring")
		}
	}
	// Build copies its input.
	ms[0].Addr = "changed:1"
	if want.Members()[0].Addr == "changed:1" {
		t.Fatal("ring shares the caller's member slice")
	}
}

func TestBuildErrors(t *testing.T) {
	ok := members("n", 3, Active)
	bad := func(f func([]Member) []Member) []Member { return f(slices.Clone(ok)) }
	for _, tc := range []struct {
		name    string
		cfg     func(*Config)
		members []Member
		want    error
	}{
		{"empty name", nil, bad(func(m []Member) []Member { m[1].Name = ""; return m }), ErrMember},
		{"duplicate name", nil, bad(func(m []Member) []Member { m[2].Name = m[0].Name; return m }), ErrMember},
		{"state 0", nil, bad(func(m []Member) []Member { m[1].State = 0; return m }), ErrMember},
		{"state 4", nil, bad(func(m []Member) []Member { m[1].State = 4; return m }), ErrMember},
		{"partitions not prime", func(c *Config) { c.Partitions = 270 }, ok, ErrConfig},
		{"partitions 1", func(c *Config) { c.Partitions = 1 }, ok, ErrConfig},
		{"partitions too many", func(c *Config) { c.Partitions = 65537 }, ok, ErrConfig},
		{"replicas 0", func(c *Config) { c.Replicas = 0 }, ok, ErrConfig},
		{"replicas 9", func(c *Config) { c.Replicas = 9 }, ok, ErrConfig},
		{"virtual nodes 1", func(c *Config) { c.VirtualNodes = 1 }, ok, ErrConfig},
		{"load 0.9", func(c *Config) { c.Load = 0.9 }, ok, ErrConfig},
		{"more active than partitions", func(c *Config) { c.Partitions = 2 }, ok, ErrTooManyMembers},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			if _, err := Build(cfg, tc.members); !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	c := DefaultConfig()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []int{2, 3, 5, 7, 271, 1021, 65521} {
		c.Partitions = p
		if err := c.Validate(); err != nil {
			t.Errorf("Partitions %d: %v", p, err)
		}
	}
	for _, p := range []int{-7, 0, 1, 4, 9, 91, 272, 65536} {
		c.Partitions = p
		if err := c.Validate(); err == nil {
			t.Errorf("Partitions %d accepted", p)
		}
	}
}

func TestPartitionOf(t *testing.T) {
	if PartitionOf(545, 271) != 3 || PartitionOf(5, 0) != 0 || PartitionOf(5, -1) != 0 {
		t.Error("PartitionOf")
	}
}

func TestLookup(t *testing.T) {
	r := mustBuild(t, DefaultConfig(), members("node-", 5, Active))
	for i := range 1000 {
		v := fmt.Sprintf("viewer-%d", i)
		p, owners := r.Lookup(v)
		if p != int(xxhash.Sum64String(v)%271) {
			t.Fatalf("Lookup(%q) partition %d, want fcap.ViewerKey %% 271", v, p)
		}
		if !slices.Equal(owners, r.Owners(p)) || len(owners) != 2 {
			t.Fatalf("Lookup(%q) owners %v, Owners(%d) = %v", v, owners, p, r.Owners(p))
		}
		if p2, o2 := r.LookupKey(fcap.ViewerKey(v)); p2 != p || !slices.Equal(o2, owners) {
			t.Fatalf("LookupKey differs from Lookup")
		}
	}
	// A caller appending to the owners cannot overwrite the table.
	_, owners := r.Lookup("x")
	if cap(owners) != len(owners) {
		t.Fatalf("owners has spare capacity %d > %d", cap(owners), len(owners))
	}
}

func TestAccessorsOutOfRange(t *testing.T) {
	r := mustBuild(t, DefaultConfig(), members("node-", 3, Active))
	for _, p := range []int{-1, r.Partitions(), 1 << 40} {
		if o := r.Owners(p); o != nil {
			t.Errorf("Owners(%d) = %v", p, o)
		}
		if _, ok := r.Owner(p); ok {
			t.Errorf("Owner(%d) found", p)
		}
		if k := r.Rank(p, "node-0"); k != -1 {
			t.Errorf("Rank(%d) = %d", p, k)
		}
	}
	if m := r.Member(NoOwner); m != (Member{}) {
		t.Errorf("Member(NoOwner) = %v", m)
	}
	if _, ok := r.Find("node-9"); ok {
		t.Error("Find found an absent member")
	}
	if i, ok := r.Find("node-2"); !ok || r.Member(i).Name != "node-2" {
		t.Error("Find missed a member")
	}
	if k := r.Rank(0, "nobody"); k != -1 {
		t.Errorf("Rank of a non-member = %d", k)
	}
	primaries := r.OwnedBy("node-1", 0)
	all := r.OwnedBy("node-1", -1)
	if len(primaries) == 0 || len(all) <= len(primaries) {
		t.Errorf("OwnedBy: %d primaries, %d in all", len(primaries), len(all))
	}
	for _, p := range primaries {
		if r.Rank(p, "node-1") != 0 {
			t.Errorf("OwnedBy(node-1, 0) gave partition %d where it is not primary", p)
		}
	}
}

func TestNoAllocations(t *testing.T) {
	r := mustBuild(t, DefaultConfig(), members("node-", 16, Active))
	viewers := make([]string, 64)
	for i := range viewers {
		viewers[i] = fmt.Sprintf("viewer-%d", i)
	}
	i := 0
	for name, f := range map[string]func(){
		"Lookup": func() { r.Lookup(viewers[i%len(viewers)]); i++ },
		"Owners": func() { r.Owners(i % 271); i++ },
		"Owner":  func() { r.Owner(i % 271); i++ },
		"Rank":   func() { r.Rank(i%271, "node-7"); i++ },
		"Find":   func() { r.Find("node-12") },
		"Member": func() { r.Member(3) },
	} {
		if n := testing.AllocsPerRun(1000, f); n != 0 {
			t.Errorf("%s allocates %.1f times per call", name, n)
		}
	}
}

func TestMovedPrimariesOfIdenticalRings(t *testing.T) {
	a := mustBuild(t, DefaultConfig(), members("n", 4, Active))
	b := mustBuild(t, DefaultConfig(), members("n", 4, Active))
	if MovedPrimaries(a, b) != 0 || MovedOwners(a, b) != 0 {
		t.Fatal("identical rings moved partitions")
	}
	empty := mustBuild(t, DefaultConfig(), nil)
	if MovedPrimaries(a, empty) != 271 || MovedPrimaries(empty, empty) != 0 {
		t.Fatal("moving to or from an empty ring")
	}
	cfg := DefaultConfig()
	cfg.Partitions = 7
	if MovedPrimaries(a, mustBuild(t, cfg, members("n", 4, Active))) != 271 {
		t.Fatal("rings of different partition counts")
	}
}

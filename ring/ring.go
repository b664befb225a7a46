// Package ring places fcap's viewers on nodes: which node owns a viewer's
// counters, and which back them up.
//
// A viewer id hashes to a 64-bit key (fcap.ViewerKey, the key the cap
// engine stores it under), and the key to one of a fixed prime number of partitions
// (key % Partitions). A Ring maps each partition to its R owners, primary
// first, computed once per membership change with consistent hashing with
// bounded loads (buraksezer/consistent) over the Active members' stable
// names. Routing a request is then a hash, a modulo and a slice: no lock,
// no allocation.
//
// A Ring is an immutable snapshot. A node's gossip.Membership (package
// node/gossip) keeps the current one: it follows the cluster through
// hashicorp/memberlist gossip, builds a new Ring on every change and swaps
// it in whole. A client, which does not gossip, rebuilds the ring a node
// sent it with FromTable; the ring package links no gossip code.
//
// Every ring has an epoch, a hash of its content (see Ring.Epoch). Nodes
// put it on every response so a client notices when its ring is stale.
//
// Of fcap the package imports only the vocabulary (package fcap), for
// ViewerKey.
package ring

import (
	"fmt"
	"slices"
	"sort"

	"github.com/fcap-io/fcap"
)

// NoOwner marks an empty place in an owners table: a partition with fewer
// owners than Replicas because fewer members are Active.
const NoOwner = 0xFFFF

// MaxMembers is the most members a ring holds, Active or not: owners are
// uint16 indexes into the members, and NoOwner is not an index.
const MaxMembers = NoOwner

// Ring is an immutable snapshot of ownership: safe for concurrent use,
// never modified after Build or FromTable.
type Ring struct {
	epoch      uint64
	partitions int
	replicas   int
	owners     int      // owners of every partition: min(replicas, Active members)
	active     int      // Active members
	members    []Member // sorted by Name
	table      []uint16 // partitions*replicas, partition-major; NoOwner past owners
}

// Epoch identifies the ring's content: a 64-bit hash, never 0, of the
// config, every member (Name, Addr, HTTPAddr, State, Incarnation, in name
// order) and the owners table. Two nodes with the same membership view
// compute the same epoch, and any change changes it; it is not ordered, so
// compare epochs for equality only. A ring from FromTable has the epoch it
// was given.
func (r *Ring) Epoch() uint64 { return r.epoch }

// Partitions returns the partition count.
func (r *Ring) Partitions() int { return r.partitions }

// Replicas returns R, the places per partition in the table.
func (r *Ring) Replicas() int { return r.replicas }

// Members returns every member given, any state, sorted by Name. Callers
// must not modify it.
func (r *Ring) Members() []Member { return r.members }

// Table returns the owners table as FromTable takes it: Partitions *
// Replicas indexes into Members(), partition-major, primary first,
// NoOwner in the places no Active member fills. Callers must not modify
// it.
func (r *Ring) Table() []uint16 { return r.table }

// ActiveMembers returns the number of members that own partitions
// (Active, and Leaving ones until they leave).
func (r *Ring) ActiveMembers() int { return r.active }

// Owners returns the indexes into Members() of partition p's owners,
// primary first; its length is min(Replicas, ActiveMembers) for every
// partition, and 0 for a p out of range. It does not allocate; callers
// must not modify it.
func (r *Ring) Owners(p int) []uint16 {
	if uint(p) >= uint(r.partitions) {
		return nil
	}
	o := p * r.replicas
	return r.table[o : o+r.owners : o+r.owners]
}

// Owner returns partition p's primary owner, false if it has none (no
// Active member, or p out of range).
func (r *Ring) Owner(p int) (Member, bool) {
	o := r.Owners(p)
	if len(o) == 0 {
		return Member{}, false
	}
	return r.members[o[0]], true
}

// Rank returns 0 if the named member is partition p's primary, 1.. for
// its backups in order, and -1 if it does not own p.
func (r *Ring) Rank(p int, name string) int {
	i, ok := r.Find(name)
	if !ok {
		return -1
	}
	for rank, o := range r.Owners(p) {
		if o == i {
			return rank
		}
	}
	return -1
}

// Lookup routes a viewer: its partition, fcap.ViewerKey(viewer) % Partitions,
// and that partition's owner indexes as Owners returns them. A hash, a
// modulo and a slice: no lock, no allocation, no sort.
func (r *Ring) Lookup(viewer string) (partition int, owners []uint16) {
	p := PartitionOf(fcap.ViewerKey(viewer), r.partitions)
	return p, r.Owners(p)
}

// LookupKey is Lookup for a viewer key the caller already holds.
func (r *Ring) LookupKey(key uint64) (partition int, owners []uint16) {
	p := PartitionOf(key, r.partitions)
	return p, r.Owners(p)
}

// Member returns Members()[i], or the zero Member if i is out of range
// (NoOwner, say).
func (r *Ring) Member(i uint16) Member {
	if int(i) >= len(r.members) {
		return Member{}
	}
	return r.members[i]
}

// Find returns the index of the named member, false if absent. It does
// not allocate.
func (r *Ring) Find(name string) (uint16, bool) {
	i := sort.Search(len(r.members), func(i int) bool { return r.members[i].Name >= name })
	if i < len(r.members) && r.members[i].Name == name {
		return uint16(i), true
	}
	return 0, false
}

// OwnedBy returns, in increasing order, the partitions the named member
// owns at the given rank (0 for primary, 1.. for backups), or at any rank
// if rank is negative. It allocates; it is for handoff and tools, not for
// routing.
func (r *Ring) OwnedBy(name string, rank int) []int {
	i, ok := r.Find(name)
	if !ok {
		return nil
	}
	var ps []int
	for p := range r.partitions {
		for k, o := range r.Owners(p) {
			if o == i && (rank < 0 || rank == k) {
				ps = append(ps, p)
				break
			}
		}
	}
	return ps
}

// String describes the ring for logs.
func (r *Ring) String() string {
	return fmt.Sprintf("ring{epoch=%016x partitions=%d replicas=%d members=%d active=%d}",
		r.epoch, r.partitions, r.replicas, len(r.members), r.active)
}

// MovedPrimaries counts the partitions whose primary owner (by name)
// differs between two rings of the same partition count; a partition
// without an owner in both has not moved. Rings of different partition
// counts share no partition, so every partition of the larger has moved.
func MovedPrimaries(a, b *Ring) int {
	if a.partitions != b.partitions {
		return max(a.partitions, b.partitions)
	}
	moved := 0
	for p := range a.partitions {
		ma, oka := a.Owner(p)
		mb, okb := b.Owner(p)
		if oka != okb || ma.Name != mb.Name {
			moved++
		}
	}
	return moved
}

// MovedOwners counts the partitions whose set of owners (by name, in any
// order) differs between two rings of the same partition count: the
// partitions some member must pull state for. Rings of different
// partition counts count as MovedPrimaries does.
func MovedOwners(a, b *Ring) int {
	if a.partitions != b.partitions {
		return max(a.partitions, b.partitions)
	}
	moved := 0
	for p := range a.partitions {
		if !sameOwners(a, a.Owners(p), b, b.Owners(p)) {
			moved++
		}
	}
	return moved
}

// sameOwners reports whether two owner lists name the same members.
func sameOwners(a *Ring, oa []uint16, b *Ring, ob []uint16) bool {
	if len(oa) != len(ob) {
		return false
	}
next:
	for _, x := range oa {
		for _, y := range ob {
			if a.members[x].Name == b.members[y].Name {
				continue next
			}
		}
		return false
	}
	return true
}

// Check verifies what every ring must hold: members sorted, every
// partition owned by min(R, active) distinct owning members, each owner's
// rank consistent, the rest of the table NoOwner, and a non-zero epoch.
// Build and FromTable only make rings that pass; tests of the packages
// that keep rings (membership, the node) use it to say so.
func (r *Ring) Check() error {
	active := 0
	for i, m := range r.Members() {
		if i > 0 && r.Members()[i-1].Name >= m.Name {
			return fmt.Errorf("members not sorted: %q then %q", r.Members()[i-1].Name, m.Name)
		}
		if m.State.Owns() {
			active++
		}
	}
	if r.ActiveMembers() != active {
		return fmt.Errorf("ActiveMembers = %d, want %d", r.ActiveMembers(), active)
	}
	if r.Epoch() == 0 {
		return fmt.Errorf("epoch 0")
	}
	want := min(r.Replicas(), active)
	if len(r.Table()) != r.Partitions()*r.Replicas() {
		return fmt.Errorf("table has %d places, want %d", len(r.Table()), r.Partitions()*r.Replicas())
	}
	for p := range r.Partitions() {
		owners := r.Owners(p)
		if len(owners) != want {
			return fmt.Errorf("partition %d has %d owners, want %d", p, len(owners), want)
		}
		for k, o := range owners {
			if m := r.Member(o); !m.State.Owns() {
				return fmt.Errorf("partition %d owner %d is %q, %v", p, k, m.Name, m.State)
			}
			if slices.Contains(owners[:k], o) {
				return fmt.Errorf("partition %d has owner %d twice: %v", p, o, owners)
			}
			if got := r.Rank(p, r.Member(o).Name); got != k {
				return fmt.Errorf("Rank(%d, %q) = %d, want %d", p, r.Member(o).Name, got, k)
			}
		}
		for _, o := range r.Table()[p*r.Replicas()+want : (p+1)*r.Replicas()] {
			if o != NoOwner {
				return fmt.Errorf("partition %d: owner %d past the %d owners", p, o, want)
			}
		}
		m, ok := r.Owner(p)
		if ok != (want > 0) || ok && m.Name != r.Member(owners[0]).Name {
			return fmt.Errorf("Owner(%d) = %v, %v", p, m, ok)
		}
	}
	return nil
}

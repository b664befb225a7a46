package ring

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/buraksezer/consistent"
)

// point is a member as consistent sees it. Its String is the member's
// name plus pointSuffix: consistent names virtual node i of a member
// fmt.Sprintf("%s%d", name, i), and without the suffix "node-1" point 10
// and "node-11" point 0 would both be "node-110", one overwriting the
// other on the circle. With it, the last '#' splits a point name into the
// member name and the number, so no two points share a name.
type point struct {
	key string // name + pointSuffix
}

// String is the point's name on consistent's circle.
func (p point) String() string { return p.key }

// pointSuffix ends every point name; see point.
const pointSuffix = "#"

// Build computes the ring for a membership: the owners of every partition,
// computed once here so that routing never sorts or locks.
//
// Members may come in any order and in any state; only owning members
// (State.Owns: Active, and Leaving until they leave) own partitions. The same members, in any order, give the same ring (and
// epoch) on every node. Zero Active members is valid: a ring where every
// partition has no owner.
//
// Each partition's primary is its owner in consistent's bounded-load
// placement over the Active members' names (VirtualNodes points each, load
// bound Load). Its backups are the members that follow the primary in
// consistent's order of name hashes (GetClosestNForPartition): every
// partition of a primary has the same backups. A ring does not remember
// its predecessor: when a member goes, consistent places its partitions
// afresh, and their new primary is often not their old backup (of a dead
// member's partitions, about 2 in 5 in a 3-node cluster, 1 in 5 in a
// 5-node one). The old owners still hold the state; compare Owners in the
// old and new rings to know who must pull what.
//
// Build refuses a config that does not validate, a member with an empty
// or duplicate name or unknown state, more than MaxMembers members, and
// more Active members than partitions. It never panics: it raises the load
// bound when consistent's would leave no room for every partition.
func Build(cfg Config, members []Member) (*Ring, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if len(members) > MaxMembers {
		return nil, fmt.Errorf("%w: %d members, at most %d", ErrTooManyMembers, len(members), MaxMembers)
	}
	ms := slices.Clone(members)
	slices.SortFunc(ms, func(a, b Member) int { return strings.Compare(a.Name, b.Name) })
	var active []uint16
	for i, m := range ms {
		if err := m.Validate(); err != nil {
			return nil, err
		}
		if i > 0 && ms[i-1].Name == m.Name {
			return nil, fmt.Errorf("%w: duplicate name %q", ErrMember, m.Name)
		}
		if m.State.Owns() {
			active = append(active, uint16(i))
		}
	}
	if len(active) > cfg.Partitions {
		return nil, fmt.Errorf("%w: %d Active members for %d partitions; configure more partitions",
			ErrTooManyMembers, len(active), cfg.Partitions)
	}
	r := &Ring{
		partitions: cfg.Partitions,
		replicas:   cfg.Replicas,
		owners:     min(cfg.Replicas, len(active)),
		active:     len(active),
		members:    ms,
		table:      make([]uint16, cfg.Partitions*cfg.Replicas),
	}
	for i := range r.table {
		r.table[i] = NoOwner
	}
	if len(active) > 0 {
		if err := place(cfg, ms, active, r.owners, r.table); err != nil {
			return nil, err
		}
	}
	r.epoch = computeEpoch(cfg.Partitions, cfg.Replicas, cfg.VirtualNodes, cfg.Load, ms, r.table)
	return r, nil
}

// place fills table with the owners of every partition: n owners each,
// indexes into ms, drawn from the Active members active (in name order,
// at most cfg.Partitions of them, at least one).
func place(cfg Config, ms []Member, active []uint16, n int, table []uint16) (err error) {
	// consistent panics rather than returning errors. The checks here
	// and in Build leave it nothing to panic about; should one remain
	// (64-bit hash collisions of every point of a member, say), a ring
	// that cannot be built must not take the node down.
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("ring: consistent: %v", v)
		}
	}()
	index := make(map[string]uint16, len(active))
	points := make([]consistent.Member, len(active))
	for i, a := range active {
		p := point{key: ms[a].Name + pointSuffix}
		points[i] = p
		index[p.key] = a
	}
	c := consistent.New(points, consistent.Config{
		Hasher:            xxhasher{},
		PartitionCount:    cfg.Partitions,
		ReplicationFactor: cfg.VirtualNodes,
		Load:              roomyLoad(cfg.Partitions, len(active), cfg.Load),
	})
	seen := make([]bool, len(ms))
	for p := range cfg.Partitions {
		owners := table[p*cfg.Replicas : p*cfg.Replicas+n]
		primary := c.GetPartitionOwner(p)
		if primary == nil {
			return fmt.Errorf("ring: consistent placed no owner for partition %d", p)
		}
		closest, err := c.GetClosestNForPartition(p, n)
		if err != nil {
			return fmt.Errorf("ring: backups of partition %d: %w", p, err)
		}
		// The primary comes first in closest; take it from the
		// partition table anyway and skip repeats, so the owners are
		// distinct whatever consistent returns.
		k := 0
		add := func(i uint16) {
			if k < n && !seen[i] {
				seen[i] = true
				owners[k] = i
				k++
			}
		}
		first, ok := index[primary.String()]
		if !ok {
			return fmt.Errorf("ring: consistent placed partition %d on unknown member %q", p, primary.String())
		}
		add(first)
		for _, m := range closest {
			if i, ok := index[m.String()]; ok {
				add(i)
			}
		}
		// Only a hash collision between two names leaves places empty:
		// fill them with the next Active members in name order.
		for _, a := range active {
			add(a)
		}
		for _, i := range owners {
			seen[i] = false
		}
	}
	return nil
}

// roomyLoad returns the load bound for consistent with n members and p
// partitions: load, unless consistent's bound of
// ceil(floor(p/n) * load) partitions per member leaves some partition
// without room (consistent panics then), in which case the smallest
// bound that leaves room, ceil(p/n) per member. It needs 1 <= n <= p.
func roomyLoad(p, n int, load float64) float64 {
	q := p / n
	need := (p + n - 1) / n
	if int(math.Ceil(float64(q)*load)) >= need {
		return load
	}
	return float64(need) / float64(q)
}

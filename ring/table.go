package ring

import (
	"fmt"
	"slices"
)

// FromTable rebuilds a ring from what a node sent (Epoch, Partitions,
// Replicas, Members and Table of its ring), without consistent: a client
// routes with the node's table, not one of its own.
//
// It validates everything and returns an error wrapping ErrTable for bad
// input: a zero epoch; a partition count that is not a prime in
// [2, MaxPartitions]; replicas outside [1, MaxReplicas]; more than
// MaxMembers members, or more Active members than partitions; a member
// with an empty name or unknown state; members not sorted by name, or a
// name given twice; an owners table whose length is not
// partitions*replicas; and a partition whose first min(replicas, Active
// members) places are not distinct Active members' indexes, or whose
// other places are not NoOwner. It copies members and owners.
func FromTable(epoch uint64, partitions, replicas int, members []Member, owners []uint16) (*Ring, error) {
	r, err := fromTable(epoch, partitions, replicas, members, owners)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrTable, err)
	}
	return r, nil
}

func fromTable(epoch uint64, partitions, replicas int, members []Member, owners []uint16) (*Ring, error) {
	if epoch == 0 {
		return nil, fmt.Errorf("epoch 0 means unknown")
	}
	if err := validateShape(partitions, replicas); err != nil {
		return nil, err
	}
	if len(members) > MaxMembers {
		return nil, fmt.Errorf("%d members, at most %d", len(members), MaxMembers)
	}
	active := 0
	for i, m := range members {
		if err := m.Validate(); err != nil {
			return nil, err
		}
		if i > 0 && members[i-1].Name >= m.Name {
			return nil, fmt.Errorf("members not sorted by name, or a name given twice: %q then %q", members[i-1].Name, m.Name)
		}
		if m.State.Owns() {
			active++
		}
	}
	if active > partitions {
		return nil, fmt.Errorf("%d Active members for %d partitions", active, partitions)
	}
	if len(owners) != partitions*replicas {
		return nil, fmt.Errorf("%d owners for %d partitions of %d replicas", len(owners), partitions, replicas)
	}
	n := min(replicas, active)
	for p := range partitions {
		places := owners[p*replicas : (p+1)*replicas]
		for k, o := range places {
			switch {
			case k >= n:
				if o != NoOwner {
					return nil, fmt.Errorf("partition %d place %d: owner %d where only %d Active members leave it empty", p, k, o, active)
				}
			case int(o) >= len(members):
				return nil, fmt.Errorf("partition %d place %d: owner %d out of range [0, %d)", p, k, o, len(members))
			case !members[o].State.Owns():
				return nil, fmt.Errorf("partition %d place %d: owner %q is %v", p, k, members[o].Name, members[o].State)
			case slices.Contains(places[:k], o):
				return nil, fmt.Errorf("partition %d place %d: owner %q twice", p, k, members[o].Name)
			}
		}
	}
	return &Ring{
		epoch:      epoch,
		partitions: partitions,
		replicas:   replicas,
		owners:     n,
		active:     active,
		members:    slices.Clone(members),
		table:      slices.Clone(owners),
	}, nil
}

package ring

import (
	"errors"
	"fmt"
	"slices"
	"testing"
)

func TestFromTableRoundTrip(t *testing.T) {
	for _, n := range []int{0, 1, 2, 5, 33} {
		ms := members("node-", n, Active)
		if n > 2 {
			ms[1].State = Joining
		}
		r := mustBuild(t, DefaultConfig(), ms)
		c, err := FromTable(r.Epoch(), r.Partitions(), r.Replicas(), r.Members(), r.Table())
		if err != nil {
			t.Fatalf("%d members: %v", n, err)
		}
		checkRing(t, c)
		if c.Epoch() != r.Epoch() || !slices.Equal(c.Table(), r.Table()) || !slices.Equal(c.Members(), r.Members()) {
			t.Fatalf("%d members: FromTable ring differs", n)
		}
		for i := range 2000 {
			v := fmt.Sprintf("viewer-%d", i)
			p1, o1 := r.Lookup(v)
			p2, o2 := c.Lookup(v)
			if p1 != p2 || !slices.Equal(o1, o2) || (len(o1) > 0 && r.Member(o1[0]) != c.Member(o2[0])) {
				t.Fatalf("%d members: Lookup(%q) differs: %d %v vs %d %v", n, v, p1, o1, p2, o2)
			}
		}
	}
}

func TestFromTableCopies(t *testing.T) {
	r := mustBuild(t, DefaultConfig(), members("node-", 3, Active))
	ms, table := slices.Clone(r.Members()), slices.Clone(r.Table())
	c, err := FromTable(r.Epoch(), r.Partitions(), r.Replicas(), ms, table)
	if err != nil {
		t.Fatal(err)
	}
	ms[0].Addr, table[0] = "changed:1", table[1]
	if c.Members()[0].Addr == "changed:1" || c.Table()[0] == table[0] {
		t.Fatal("FromTable ring shares the caller's slices")
	}
}

func TestFromTableRejects(t *testing.T) {
	r := mustBuild(t, DefaultConfig(), append(members("a", 4, Active), members("j", 1, Joining)...))
	joining, _ := r.Find("j0")
	type input struct {
		epoch                uint64
		partitions, replicas int
		members              []Member
		owners               []uint16
	}
	good := func() input {
		return input{r.Epoch(), r.Partitions(), r.Replicas(), slices.Clone(r.Members()), slices.Clone(r.Table())}
	}
	for _, tc := range []struct {
		name string
		edit func(*input)
	}{
		{"epoch 0", func(in *input) { in.epoch = 0 }},
		{"partitions not prime", func(in *input) { in.partitions = 270 }},
		{"partitions 0", func(in *input) { in.partitions = 0 }},
		{"negative partitions", func(in *input) { in.partitions = -271 }},
		{"replicas 0", func(in *input) { in.replicas = 0 }},
		{"replicas too many", func(in *input) { in.replicas = 9 }},
		{"replicas differ from table", func(in *input) { in.replicas = 1 }},
		{"table short", func(in *input) { in.owners = in.owners[:len(in.owners)-1] }},
		{"table long", func(in *input) { in.owners = append(in.owners, NoOwner) }},
		{"table nil", func(in *input) { in.owners = nil }},
		{"owner out of range", func(in *input) { in.owners[7] = uint16(len(in.members)) }},
		{"owner missing", func(in *input) { in.owners[6] = NoOwner }},
		{"owner twice", func(in *input) { in.owners[9] = in.owners[8] }},
		{"owner not active", func(in *input) { in.owners[4] = joining }},
		{"members unsorted", func(in *input) { in.members[0], in.members[1] = in.members[1], in.members[0] }},
		{"member twice", func(in *input) { in.members[1].Name = in.members[0].Name }},
		{"member without name", func(in *input) { in.members[0].Name = "" }},
		{"member unknown state", func(in *input) { in.members[2].State = 9 }},
		{"fewer owners than active members allow", func(in *input) {
			in.members = in.members[:2] // a0, a1: 2 Active, so 2 owners needed
		}},
		{"owner where none may be", func(in *input) {
			in.members = in.members[:1] // a0 alone: one owner per partition
			for p := range in.partitions {
				in.owners[p*2], in.owners[p*2+1] = 0, 0
			}
		}},
		{"members but no members", func(in *input) { in.members = nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := good()
			tc.edit(&in)
			if _, err := FromTable(in.epoch, in.partitions, in.replicas, in.members, in.owners); !errors.Is(err, ErrTable) {
				t.Fatalf("err = %v, want ErrTable", err)
			}
		})
	}
	in := good()
	if _, err := FromTable(in.epoch, in.partitions, in.replicas, in.members, in.owners); err != nil {
		t.Fatalf("the unedited input is refused: %v", err)
	}
}

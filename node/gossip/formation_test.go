package gossip

import (
	"fmt"
	"strings"
	"testing"

	"github.com/fcap-io/fcap/ring"
)

// TestJoinFailuresAreKept: a node whose seed answers nothing says which
// seed failed and why, until one answers.
func TestJoinFailuresAreKept(t *testing.T) {
	dead := freePorts(t, 1)[0] // held by freePorts only while it runs
	typo := fmt.Sprintf("127.0.0.1:%d", dead)
	ms := cluster(t, []node{{name: "alone", state: ring.Joining, edit: func(c *Config) { c.Seeds = []string{typo} }}})
	waitFor(t, "a recorded join failure", func() bool {
		st := ms[0].JoinStatus()
		return !st.Joined && len(st.Failures) == 1 && st.Failures[0].Seed == typo && st.Failures[0].Err != ""
	})
	if s := ms[0].JoinStatus().Summary(); !strings.Contains(s, typo) || !strings.HasPrefix(s, "not joined") {
		t.Errorf("summary %q does not name the seed %s", s, typo)
	}
}

// TestJoinedNodeHasNoJoinError: once a seed answered, the status is
// clean.
func TestJoinedNodeHasNoJoinError(t *testing.T) {
	ms := cluster(t, []node{{name: "a", state: ring.Active}, {name: "b", state: ring.Joining, seeds: []int{0}}})
	// Joined (b counts a member besides itself) turns true inside the
	// join, before the join loop clears that seed's earlier failure: the
	// two nodes start at once, and b's first attempt may find a not yet
	// listening. The status is clean once the join returned.
	waitFor(t, "b joined, its status clean", func() bool {
		st := ms[1].JoinStatus()
		return st.Joined && st.Summary() == "" && len(st.Failures) == 0
	})
	if st := ms[0].JoinStatus(); st.Seeds != 0 || st.Summary() != "" {
		t.Errorf("seedless node reports %+v", st)
	}
}

// TestNameTakenWhileJoining: a joining node whose name a live member
// already has is told so; the member that holds the name is not.
func TestNameTakenWhileJoining(t *testing.T) {
	ms := cluster(t, []node{{name: "twin", state: ring.Active}})
	second := cluster(t, []node{{name: "twin", state: ring.Joining, edit: func(c *Config) { c.Seeds = []string{ms[0].GossipAddr()} }}})
	var taken *ErrNameTaken
	waitFor(t, "the name conflict", func() bool {
		select {
		case taken = <-second[0].NameTaken():
			return true
		default:
			return false
		}
	})
	if taken.Name != "twin" || taken.Addr != ms[0].GossipAddr() || !strings.Contains(taken.Error(), "taken by a live member at "+ms[0].GossipAddr()) {
		t.Errorf("conflict %+v: %v", taken, taken)
	}
	select {
	case c := <-ms[0].NameTaken():
		t.Errorf("the active holder of the name was told to stop: %v", c)
	default:
	}
}

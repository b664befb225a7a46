package main

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/fcap-io/fcap/proto"
)

// statusAdmin answers status requests with a Status per address; an
// address it does not know refuses.
type statusAdmin map[string]*proto.Status

func (a statusAdmin) Call(_ context.Context, addr string, req, resp proto.Message) error {
	st, ok := a[addr]
	if _, isStatus := req.(*proto.StatusRequest); !ok || !isStatus {
		return errors.New("connection refused")
	}
	*resp.(*proto.Status) = *st
	return nil
}

// TestDrainOfANonMemberSaysWhy: a drain of a name that is no ring member
// says whether it already left (exit 0), was forgotten (exit 0), failed
// (exit 1), or is unknown (exit 1, naming the members); a member that
// does not answer is passed over for the next.
func TestDrainOfANonMemberSaysWhy(t *testing.T) {
	topo := &proto.Topology{Members: []proto.Member{{Name: "n1", Addr: "a1"}, {Name: "n3", Addr: "a3"}}}
	admin := statusAdmin{"a3": {Name: "n3",
		Departed: []proto.DepartedMember{{Name: "n2", AtMillis: 1_700_000_000_000}, {Name: "n4", AtMillis: 1_600_000_000_000, Forgotten: true}},
		Failed:   []proto.FailedMember{{Name: "n5", Addr: "a5", SinceMillis: 1_700_000_000_000}}}}
	for _, c := range []struct {
		name string
		code int
		says string
	}{
		{"n2", exitOK, "n2 has already left the cluster (at 2023-11-14T22:13:20Z, by n3's account): nothing to drain"},
		{"n4", exitOK, "n4 is already gone: it failed and was forgotten at 2020-09-13T12:26:40Z"},
		{"n5", exitError, "n5 (a5) failed at 2023-11-14T22:13:20Z (it vanished without a drain): it cannot hand anything over"},
		{"n9", exitError, `no member named "n9" in the cluster (members: n1, n3)`},
	} {
		msg, code := notAMember(context.Background(), admin, topo, c.name)
		if code != c.code || !strings.Contains(msg, c.says) {
			t.Errorf("drain %s: %q, exit %d; want exit %d saying %q", c.name, msg, code, c.code, c.says)
		}
	}
	// No member answers: all it can say is that the name is no member.
	if msg, code := notAMember(context.Background(), statusAdmin{}, topo, "n2"); code != exitError || !strings.Contains(msg, `no member named "n2"`) {
		t.Errorf("no member answering: %q, exit %d", msg, code)
	}
}

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/fcap-io/fcap/proto"
)

// TestRegionRetireUsage: region needs the retire subcommand and one
// valid region name; nothing is sent otherwise (exit 2).
func TestRegionRetireUsage(t *testing.T) {
	for _, args := range [][]string{
		{"region"}, {"region", "frob", "c"}, {"region", "retire"}, {"region", "retire", "c", "d"},
		{"region", "retire", "Not_A_Region"}, {"region", "retire", "--bogus", "c"},
	} {
		var out, errb bytes.Buffer
		if code := run(args, &out, &errb); code != exitUsage {
			t.Errorf("%q: exit %d, want %d (stderr %q)", args, code, exitUsage, errb.String())
		}
		if !strings.Contains(errb.String(), "region retire") && !strings.Contains(errb.String(), "region name") {
			t.Errorf("%q: stderr %q does not say how to use it", args, errb.String())
		}
	}
	var out bytes.Buffer
	run([]string{"help"}, &out, &out)
	if !strings.Contains(out.String(), "region") {
		t.Errorf("help does not list region:\n%s", out.String())
	}
}

// retireAdmin answers RetireRegion per address: an error, or a result.
type retireAdmin struct {
	errs   map[string]error
	at     int64
	forced map[string]bool // the Force each address was sent
}

func (a *retireAdmin) Call(_ context.Context, addr string, req, resp proto.Message) error {
	m := req.(*proto.RetireRegion)
	a.forced[addr] = m.Force
	if err := a.errs[addr]; err != nil {
		return err
	}
	*resp.(*proto.RetireRegionResult) = proto.RetireRegionResult{AtMillis: a.at, New: true}
	return nil
}

// TestRetireOnMembers: the first member that answers decides: its
// refusal is the command's (exit 1), its retire is sent on to the
// others forced, and one that does not answer then is only mentioned
// (gossip brings it the news); no member answering is an error.
func TestRetireOnMembers(t *testing.T) {
	topo := &proto.Topology{Members: []proto.Member{{Name: "n1", Addr: "a1"}, {Name: "n2", Addr: "a2"}, {Name: "n3", Addr: "a3"}}}
	refused := fmt.Errorf("%w: region: the peer region is reachable from this node", proto.ErrBadRequest)
	down := errors.New("connection refused")

	a := &retireAdmin{errs: map[string]error{"a1": down, "a2": refused}, forced: map[string]bool{}}
	if msg, code := retireOnMembers(context.Background(), a, topo, "c", false); code != exitError || !strings.Contains(msg, "n2 refused") || !strings.Contains(msg, "reachable") {
		t.Errorf("a refusal: %q exit %d", msg, code)
	}
	if _, sent := a.forced["a3"]; sent {
		t.Error("after a refusal the retire went on to another member")
	}

	a = &retireAdmin{errs: map[string]error{"a1": down, "a3": down}, at: 1_700_000_000_000, forced: map[string]bool{}}
	msg, code := retireOnMembers(context.Background(), a, topo, "c", false)
	if code != exitOK || !strings.Contains(msg, "region c retired since 2023-11-14T22:13:20Z (by n2's clock)") || !strings.Contains(msg, "n3: connection refused") {
		t.Errorf("a retire: %q exit %d", msg, code)
	}
	if a.forced["a2"] || !a.forced["a3"] {
		t.Errorf("force sent: %v; want the deciding member unforced, the rest forced", a.forced)
	}

	a = &retireAdmin{errs: map[string]error{"a1": down, "a2": down, "a3": down}, forced: map[string]bool{}}
	if msg, code := retireOnMembers(context.Background(), a, topo, "c", true); code != exitError || !strings.Contains(msg, "no member answered") {
		t.Errorf("none answering: %q exit %d", msg, code)
	}
}

// TestStatusShowsARetiredRegion: a retired peer region is shown retired
// since its time, and is no warning.
func TestStatusShowsARetiredRegion(t *testing.T) {
	out := statusOut{Epoch: epochString(1), Partitions: 271, Replicas: 1, Members: []statusMember{
		{Name: "a", Addr: "10.0.0.1:7700", State: "active", Reachable: true, Primaries: 271, Regions: []statusRegion{
			{Name: "ap", RetiredSince: "2023-11-14T22:13:20Z"},
		}},
	}}
	out.judge()
	if len(out.Warnings) != 0 {
		t.Errorf("a retired region warned: %q", out.Warnings)
	}
	var b bytes.Buffer
	printStatus(&b, &out)
	if !strings.Contains(b.String(), "RETIRED since 2023-11-14T22:13:20Z") {
		t.Errorf("status does not show ap retired:\n%s", b.String())
	}
}

package statuspage

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/fcap-io/fcap/proto"
	"github.com/fcap-io/fcap/ring"
)

// minority is a node that lost its majority: two members failed.
type minority struct{ fakeNode }

func (m *minority) Status() *proto.Status {
	return &proto.Status{Name: "recent", Authority: false, QuorumMembers: 3, QuorumConfirmed: 1, Claimed: 7,
		Failed: []proto.FailedMember{{Name: "gone-1", Addr: "10.0.0.2:7700", SinceMillis: time.Now().Add(-time.Minute).UnixMilli()}}}
}

// A failed member stays on the page, marked failed, with the way out;
// a member without a majority says so in the strict column.
func TestStatusPageShowsFailedMembersAndAuthority(t *testing.T) {
	r, err := ring.Build(ring.DefaultConfig(), []ring.Member{{Name: "recent", Addr: "127.0.0.1:1", State: ring.Active}})
	if err != nil {
		t.Fatal(err)
	}
	src := &minority{fakeNode{ring: r}}
	p := New(src, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	var page strings.Builder
	if err := pageTemplate.Execute(&page, p.data(context.Background())); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"gone-1", "10.0.0.2:7700", "FAILED 1m", "fcapctl forget gone-1", "NO 1/3", "7 claimed"} {
		if !strings.Contains(page.String(), want) {
			t.Errorf("the page does not say %q", want)
		}
	}
}

// linked is a node with two peer regions, one out of reach.
type linked struct{ fakeNode }

func (l *linked) Status() *proto.Status {
	return &proto.Status{Name: "recent", Authority: true, QuorumMembers: 1, QuorumConfirmed: 1,
		Regions: []proto.RegionStatus{{Name: "eu-west", Reachable: true, LagMillis: 40, Queue: 3},
			{Name: "ap-south", Reachable: false, LagMillis: 95_000, Queue: 1200}}}
}

// A node with peer regions draws the regions panel: each link, up or
// down, its lag (marked past 30 s) and queue. A node of one region draws
// none.
func TestStatusPageShowsPeerRegions(t *testing.T) {
	r, err := ring.Build(ring.DefaultConfig(), []ring.Member{{Name: "recent", Addr: "127.0.0.1:1", State: ring.Active}})
	if err != nil {
		t.Fatal(err)
	}
	render := func(src Source) string {
		p := New(src, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
		var page strings.Builder
		if err := pageTemplate.Execute(&page, p.data(context.Background())); err != nil {
			t.Fatal(err)
		}
		return page.String()
	}
	page := render(&linked{fakeNode{ring: r}})
	for _, want := range []string{"Peer regions", "eu-west", "40ms", "ap-south", "DOWN", `<td class="bad">1m35s</td>`, "1200"} {
		if !strings.Contains(page, want) {
			t.Errorf("the regions panel does not say %q", want)
		}
	}
	if strings.Contains(render(&minority{fakeNode{ring: r}}), "Peer regions") {
		t.Error("a node without peer regions draws the regions panel")
	}
}

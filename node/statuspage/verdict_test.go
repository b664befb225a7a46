package statuspage

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/fcap-io/fcap/proto"
	"github.com/fcap-io/fcap/ring"
)

// fakeCluster is n1's view of a three-member cluster: n1 answers its own
// status, the others through statusOf, by address.
type fakeCluster struct {
	ring     *ring.Ring
	statuses map[string]*proto.Status // by address; none: unreachable
}

func (c *fakeCluster) Name() string          { return "n1" }
func (c *fakeCluster) Ring() *ring.Ring      { return c.ring }
func (c *fakeCluster) Counters() Counters    { return Counters{} }
func (c *fakeCluster) Status() *proto.Status { return c.statuses["10.0.0.1:7700"] }

func (c *fakeCluster) statusOf(_ context.Context, addr string) (*proto.Status, error) {
	if st, ok := c.statuses[addr]; ok {
		return st, nil
	}
	return nil, errors.New("dial tcp " + addr + ": connection refused")
}

// healthyStatus is a member serving well: 1 GiB of its 4 GiB, no errors.
func healthyStatus(name, version string, uptime time.Duration, p99 time.Duration) *proto.Status {
	return &proto.Status{Name: name, State: 2, Primaries: 90, Backups: 90, Authority: true, QuorumMembers: 3, QuorumConfirmed: 3,
		Bytes: 1 << 30, MemoryLimit: 4 << 30, Version: version, UptimeMillis: uint64(uptime.Milliseconds()),
		RecentMillis: 60_000, RecentRequests: 1200, P99Nanos: uint64(p99.Nanoseconds())}
}

// renderCluster renders n1's page of a cluster of n1, n2 and n3 (whose
// statuses are given by name; nil: unreachable).
func renderCluster(t *testing.T, statuses map[string]*proto.Status) string {
	t.Helper()
	r, err := ring.Build(ring.DefaultConfig(), []ring.Member{
		{Name: "n1", Addr: "10.0.0.1:7700", State: ring.Active},
		{Name: "n2", Addr: "10.0.0.2:7700", State: ring.Active},
		{Name: "n3", Addr: "10.0.0.3:7700", State: ring.Active},
	})
	if err != nil {
		t.Fatal(err)
	}
	c := &fakeCluster{ring: r, statuses: map[string]*proto.Status{}}
	for _, m := range r.Members() {
		if st := statuses[m.Name]; st != nil {
			c.statuses[m.Addr] = st
		}
	}
	p := New(c, c.statusOf, slog.New(slog.NewTextHandler(io.Discard, nil)))
	var page strings.Builder
	if err := pageTemplate.Execute(&page, p.data(context.Background())); err != nil {
		t.Fatal(err)
	}
	return page.String()
}

// row returns the members table's row of the member name.
func row(t *testing.T, page, name string) string {
	t.Helper()
	_, table, _ := strings.Cut(page, `<table id="members">`)
	for _, r := range strings.Split(table, "<tr>") {
		if strings.Contains(r, `</span>`+name) {
			return r
		}
	}
	t.Fatalf("no row for %s in\n%s", name, page)
	return ""
}

// verdict returns the page's verdict line.
func verdict(t *testing.T, page string) string {
	t.Helper()
	_, rest, ok := strings.Cut(page, `<div id="verdict"`)
	if !ok {
		t.Fatalf("no verdict in\n%s", page)
	}
	line, _, _ := strings.Cut(rest, "</div>")
	return line
}

// TestStatusPageHealthyCluster: each member's row names its p99, errors,
// memory of its limit, version and uptime, and the verdict says healthy.
func TestStatusPageHealthyCluster(t *testing.T) {
	page := renderCluster(t, map[string]*proto.Status{
		"n1": healthyStatus("n1", "v1.2.0", 3*time.Hour+12*time.Minute, 50*time.Microsecond),
		"n2": healthyStatus("n2", "v1.2.1", 42*time.Second, 100*time.Microsecond),
		"n3": healthyStatus("n3", "v1.2.0", 49*time.Hour, 250*time.Microsecond),
	})
	if got, want := verdict(t, page), ` class="verdict ok">healthy`; got != want {
		t.Errorf("verdict %q, want %q", got, want)
	}
	for name, want := range map[string][]string{
		"n1": {">v1.2.0<", ">3h12m<", ">≤ 50µs<", ">0 of 1200<", ">1.0 GiB of 4.0 GiB, 25%<"},
		"n2": {">v1.2.1<", ">42s<", ">≤ 100µs<", ">0 of 1200<", ">1.0 GiB of 4.0 GiB, 25%<"},
		"n3": {">v1.2.0<", ">2d01h<", ">≤ 250µs<", ">0 of 1200<", ">1.0 GiB of 4.0 GiB, 25%<"},
	} {
		r := row(t, page, name)
		for _, w := range want {
			if !strings.Contains(r, w) {
				t.Errorf("%s's row does not say %q:\n%s", name, w, r)
			}
		}
		if strings.Contains(r, `class="bad"`) {
			t.Errorf("%s's row flags something in a healthy cluster:\n%s", name, r)
		}
	}
	for _, header := range []string{">version<", ">uptime<", ">memory of limit<", ">p99, 1 min<", ">errors, 1 min<"} {
		if !strings.Contains(page, header) {
			t.Errorf("the members table has no column %q", header)
		}
	}
}

// TestStatusPageDegradedCluster: what is wrong shows in the members'
// rows, in red, and in the verdict, most serious first.
func TestStatusPageDegradedCluster(t *testing.T) {
	n1 := healthyStatus("n1", "v1.2.0", time.Hour, 5*time.Millisecond)
	n1.Syncing = 3
	n1.RecentErrors = 60 // 5% of 1200
	n1.Bytes = 5 << 30   // over its 4 GiB
	n1.Failed = []proto.FailedMember{{Name: "n4", Addr: "10.0.0.4:7700", SinceMillis: time.Now().Add(-time.Minute).UnixMilli()}}
	n3 := healthyStatus("n3", "v1.2.0", time.Hour, 5*time.Millisecond)
	n3.P99Over = true
	n3.Authority, n3.QuorumConfirmed = false, 1
	page := renderCluster(t, map[string]*proto.Status{"n1": n1, "n3": n3}) // n2 does not answer

	want := ` class="verdict degraded">degraded: n2 unreachable; n4 failed; 3 partitions syncing; strict caps refused on n3 (no majority); ` +
		`5.0% errors on n1; p99 over 1ms on n1, n3; n1 over its memory limit (new counters refused)`
	if got := verdict(t, page); got != want {
		t.Errorf("verdict\n%q, want\n%q", got, want)
	}
	for name, want := range map[string][]string{
		"n1": {`class="bad">≤ 5ms<`, `class="bad">60 of 1200 (5.0%)<`, `class="bad">5.0 GiB of 4.0 GiB, 125%<`, ">v1.2.0<", ">1h00m<"},
		"n2": {`unreachable: dial tcp 10.0.0.2:7700: connection refused`},
		"n3": {`class="bad">&gt; 5ms<`, `class="bad">NO 1/3<`, ">0 of 1200<"},
		"n4": {"FAILED 1m"},
	} {
		r := row(t, page, name)
		for _, w := range want {
			if !strings.Contains(r, w) {
				t.Errorf("%s's row does not say %q:\n%s", name, w, r)
			}
		}
	}
}

// TestVerdictRules: each rule alone degrades the verdict with its words;
// figures under the thresholds do not.
func TestVerdictRules(t *testing.T) {
	ok := func() pageMember {
		return pageMember{Name: "n1", Reachable: true}
	}
	for _, tc := range []struct {
		name     string
		replicas int
		member   func(*pageMember)
		want     string
	}{
		{"healthy", 1, func(*pageMember) {}, "healthy"},
		{"unreachable", 1, func(m *pageMember) { m.Reachable = false }, "degraded: n1 unreachable"},
		{"failed", 1, func(m *pageMember) { m.Reachable, m.Failed = false, true }, "degraded: n1 failed"},
		{"joined none", 1, func(m *pageMember) { m.JoinError = "not joined: 10.0.0.9:7946: connection refused" }, "degraded: n1 joined no cluster"},
		{"fewer members than replicas", 2, func(*pageMember) {}, "degraded: 1 member for R=2: partitions have 1 copy"},
		{"syncing", 1, func(m *pageMember) { m.Syncing = 1 }, "degraded: 1 partition syncing"},
		{"under-replicated", 1, func(m *pageMember) { m.UnderRepl = 4 }, "degraded: 4 partitions under-replicated"},
		{"no majority", 1, func(m *pageMember) { m.NoStrict = true }, "degraded: strict caps refused on n1 (no majority)"},
		{"claimed", 1, func(m *pageMember) { m.Claimed = 2 }, "degraded: 2 partitions claimed without a holder's copy"},
		{"errors", 1, func(m *pageMember) {
			m.fill("n1", &proto.Status{Version: "v1", RecentMillis: 60_000, RecentRequests: 100, RecentErrors: 2, P99Nanos: 1000})
		}, "degraded: 2.0% errors on n1"},
		{"errors at the threshold", 1, func(m *pageMember) {
			m.fill("n1", &proto.Status{Version: "v1", RecentMillis: 60_000, RecentRequests: 100, RecentErrors: 1, P99Nanos: 1000})
		}, "healthy"},
		{"p99 at the threshold", 1, func(m *pageMember) {
			m.fill("n1", &proto.Status{Version: "v1", RecentMillis: 60_000, RecentRequests: 100, P99Nanos: uint64(p99Limit)})
		}, "healthy"},
		{"p99 past the threshold", 1, func(m *pageMember) {
			m.fill("n1", &proto.Status{Version: "v1", RecentMillis: 60_000, RecentRequests: 100, P99Nanos: uint64(5 * time.Millisecond)})
		}, "degraded: p99 over 1ms on n1"},
		{"memory near the limit", 1, func(m *pageMember) {
			m.fill("n1", &proto.Status{Version: "v1", Bytes: 93, MemoryLimit: 100})
		}, "degraded: n1 memory at 93% of its limit"},
		{"memory under the warning", 1, func(m *pageMember) {
			m.fill("n1", &proto.Status{Version: "v1", Bytes: 89, MemoryLimit: 100})
		}, "healthy"},
		{"no memory limit", 1, func(m *pageMember) {
			m.fill("n1", &proto.Status{Version: "v1", Bytes: 1 << 40})
		}, "healthy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := ok()
			tc.member(&m)
			d := &pageData{Replicas: tc.replicas, RingMembers: 1, Members: []pageMember{m}}
			d.judge()
			if d.Verdict != tc.want || d.Healthy != (tc.want == "healthy") {
				t.Errorf("verdict %q (healthy %v), want %q", d.Verdict, d.Healthy, tc.want)
			}
		})
	}
}

// TestServingFigures: what a member's row says of its status, an older
// node's included.
func TestServingFigures(t *testing.T) {
	for _, tc := range []struct {
		name string
		st   proto.Status
		want serving
	}{
		{"older node", proto.Status{Bytes: 2048},
			serving{Version: "-", Uptime: "-", Memory: "2.0 KiB", P99: "-", Errors: "-", Window: "no figures"}},
		{"sampler not started", proto.Status{Version: "devel", UptimeMillis: 500, Bytes: 2048},
			serving{Version: "devel", Uptime: "0s", Memory: "2.0 KiB, no limit", P99: "-", Errors: "-", Window: "no figures"}},
		{"no requests", proto.Status{Version: "devel", UptimeMillis: 65_000, RecentMillis: 65_000, MemoryLimit: 1 << 20},
			serving{Version: "devel", Uptime: "1m05s", Memory: "0 B of 1.0 MiB, 0%", P99: "-", Errors: "0 of 0", Window: "last 1m05s"}},
		{"a few errors", proto.Status{Version: "v1", UptimeMillis: 7_200_000, RecentMillis: 60_000, RecentRequests: 400, RecentErrors: 1, P99Nanos: 2500, MemoryLimit: 1 << 20},
			serving{Version: "v1", Uptime: "2h00m", Memory: "0 B of 1.0 MiB, 0%", P99: "≤ 2.5µs", Errors: "1 of 400 (0.25%)", ErrorShare: "0.25%", Window: "last 1m00s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got serving
			got.fill("n1", &tc.st)
			if got != tc.want {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

package node_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/node/buildinfo"
	"github.com/fcap-io/fcap/proto/rpc"
)

// TestStatusPage renders / on one node of two and checks it shows both
// members with their figures, draws every partition, and needs nothing
// from outside the node.
func TestStatusPage(t *testing.T) {
	nodes := settledCluster(t, "node", 2)
	t.Cleanup(http.DefaultClient.CloseIdleConnections)
	get := func() string {
		resp, err := http.Get("http://" + nodes[0].HTTPAddr() + "/")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
			t.Fatalf("GET /: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		return string(b)
	}
	page := get()
	for _, nd := range nodes {
		if !strings.Contains(page, nd.Name()) {
			t.Errorf("the page does not name member %s", nd.Name())
		}
	}
	if got, want := strings.Count(page, "<path "), nodes[0].Ring().Partitions(); got != want {
		t.Errorf("the ring picture has %d arcs, want one per partition (%d)", got, want)
	}
	if strings.Contains(page, "unreachable") {
		t.Errorf("a live member is shown unreachable")
	}
	// Both members' partitions, as their own status reports them.
	re := regexp.MustCompile(`<td>(\d+)</td><td>(\d+)</td>`)
	primaries := 0
	for _, m := range re.FindAllStringSubmatch(page, -1) {
		var p int
		for _, c := range m[1] {
			p = p*10 + int(c-'0')
		}
		primaries += p
	}
	if primaries != nodes[0].Ring().Partitions() {
		t.Errorf("members' primaries add up to %d, want %d", primaries, nodes[0].Ring().Partitions())
	}
	// Self-contained: no scripts, no external assets.
	if strings.Contains(page, "<script") || regexp.MustCompile(`(src|href)="https?://`).MatchString(page) {
		t.Errorf("the page loads something from elsewhere")
	}
	// A second load has request rates (the first has only totals).
	if page = get(); !regexp.MustCompile(`<td>\d+/s</td>`).MatchString(page) {
		t.Errorf("the second load shows no request rate")
	}
	resp, err := http.Get("http://" + nodes[0].HTTPAddr() + "/nope")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /nope: %d, want 404", resp.StatusCode)
	}
}

// TestStatusPageExplainsItself: the ring has a legend (each member's
// primaries, adding up to every partition), the fail-over chart a time
// axis, and the footer every endpoint the HTTP address serves. The page
// used to list 5 of 8 endpoints and leave the ring's colors unexplained.
func TestStatusPageExplainsItself(t *testing.T) {
	nodes := settledCluster(t, "node", 2)
	t.Cleanup(http.DefaultClient.CloseIdleConnections)
	page := httpGet(t, "http://"+nodes[0].HTTPAddr()+"/")

	legend := regexp.MustCompile(`(?s)<div id="legend">(.*?)</small>`).FindStringSubmatch(page)
	if legend == nil {
		t.Fatal("the ring has no legend")
	}
	total := 0
	for _, nd := range nodes {
		m := regexp.MustCompile(regexp.QuoteMeta(nd.Name()) + `: (\d+) primaries`).FindStringSubmatch(legend[1])
		if m == nil {
			t.Errorf("the legend does not name %s", nd.Name())
			continue
		}
		n, _ := strconv.Atoi(m[1])
		total += n
	}
	if total != nodes[0].Ring().Partitions() {
		t.Errorf("the legend's primaries add up to %d, want %d", total, nodes[0].Ring().Partitions())
	}

	recent := regexp.MustCompile(`(?s)<div class="card" id="recent">(.*?)</div>`).FindStringSubmatch(page)
	if recent == nil || !strings.Contains(recent[1], `class="axis"`) || !strings.Contains(recent[1], ">now</text>") || !strings.Contains(recent[1], ">-10m</text>") {
		t.Errorf("the fail-over chart has no time axis from -10m to now")
	}

	footer := regexp.MustCompile(`(?s)<div class="sub" id="endpoints">(.*?)</div>`).FindStringSubmatch(page)
	if footer == nil {
		t.Fatal("no endpoint list")
	}
	// Every route the node registers, and every path of the JSON API's
	// contract (docs/openapi.yaml, proved against a live node).
	var routes []string
	src, err := os.ReadFile("http.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`Handle(?:Func)?\("(?:[A-Z]+ )?(/[a-z0-9/_]*)(?:\{\$\})?"`).FindAllStringSubmatch(string(src), -1) {
		if !strings.HasPrefix(m[1], "/debug/pprof/") || m[1] == "/debug/pprof/" {
			routes = append(routes, m[1])
		}
	}
	spec, err := os.ReadFile("../docs/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`(?m)^  (/v1/[a-z_]+):`).FindAllStringSubmatch(string(spec), -1) {
		routes = append(routes, m[1])
	}
	if len(routes) < 12 {
		t.Fatalf("found only %d routes: %v", len(routes), routes)
	}
	for _, r := range routes {
		if r == "/v1/" { // the JSON API's prefix, listed route by route
			continue
		}
		if !strings.Contains(footer[1], r+"<") && !strings.Contains(footer[1], r+" (") {
			t.Errorf("the footer does not list %s", r)
		}
	}
}

// TestStatusPageNamesOnlyExportedMetrics: a metric the page names must
// exist (the committed screenshot once named one that did not), either
// on the node's /metrics or in the client's registry.
func TestStatusPageNamesOnlyExportedMetrics(t *testing.T) {
	nodes := settledCluster(t, "node", 1)
	t.Cleanup(http.DefaultClient.CloseIdleConnections)
	have := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^# TYPE (fcap_[a-z_]+) `).FindAllStringSubmatch(httpGet(t, "http://"+nodes[0].HTTPAddr()+"/metrics"), -1) {
		have[m[1]] = true
	}
	reg := prometheus.NewRegistry()
	cfg := client.DefaultConfig(nodes[0].DataAddr())
	cfg.Registerer = reg
	c, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		have[f.GetName()] = true
	}
	page := httpGet(t, "http://"+nodes[0].HTTPAddr()+"/")
	named := regexp.MustCompile(`\bfcap_[a-z_]+`).FindAllString(page, -1)
	src, err := os.ReadFile("statuspage/statuspage.go")
	if err != nil {
		t.Fatal(err)
	}
	named = append(named, regexp.MustCompile(`\bfcap_[a-z_]+`).FindAllString(string(src), -1)...)
	if len(named) == 0 {
		t.Fatal("the page names no metric: nothing checked")
	}
	for _, m := range named {
		if base := regexp.MustCompile(`_(bucket|sum|count)$`).ReplaceAllString(m, ""); !have[base] {
			t.Errorf("the status page names %s, which neither the node nor the client exports", m)
		}
	}
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", url, resp.StatusCode)
	}
	return string(b)
}

// TestStatusReportsServingFigures: each node's Status carries its build,
// uptime, memory limit and the ad servers' requests it answered
// recently, with their p99; the status page shows each member's build
// under a verdict.
func TestStatusReportsServingFigures(t *testing.T) {
	nodes := settledCluster(t, "node", 2)
	t.Cleanup(http.DefaultClient.CloseIdleConnections)
	c := newClient(t, nodes)
	ctx := context.Background()
	const calls = 20
	for i := range calls {
		if _, err := c.Resolve(ctx, fmt.Sprintf("device-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	version := buildinfo.Get().Version
	deadline := time.Now().Add(30 * time.Second)
	for {
		var answered uint64
		for _, nd := range nodes {
			st, err := rpc.NodeStatus(ctx, nd.DataAddr())
			if err != nil {
				t.Fatal(err)
			}
			if st.Version != version || st.UptimeMillis == 0 || st.MemoryLimit != uint64(nd.Engine().Stats().MemoryLimit) || st.MemoryLimit == 0 {
				t.Fatalf("%s: version %q, uptime %dms, memory limit %d; want %q, some uptime, %d", nd.Name(), st.Version, st.UptimeMillis, st.MemoryLimit, version, nd.Engine().Stats().MemoryLimit)
			}
			if st.RecentRequests > 0 && (st.RecentMillis == 0 || st.P99Nanos == 0) {
				t.Fatalf("%s: %d recent requests over %dms with p99 %dns", nd.Name(), st.RecentRequests, st.RecentMillis, st.P99Nanos)
			}
			answered += st.RecentRequests
		}
		if answered >= calls {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the nodes report %d recent requests, want at least %d", answered, calls)
		}
		time.Sleep(10 * time.Millisecond)
	}
	page := httpGet(t, "http://"+nodes[0].HTTPAddr()+"/")
	if !strings.Contains(page, `<div id="verdict"`) {
		t.Error("the page has no verdict")
	}
	if got := strings.Count(page, ">"+version+"<"); got != len(nodes) {
		t.Errorf("the page shows version %s %d times, want once per member", version, got)
	}
}

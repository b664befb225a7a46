// Package regions runs several fcap regions on one machine for tests: R
// regions of N real fcapd processes each on 127.0.0.1 (ephemeral ports),
// each region its own gossip pool and ring, and the region links between
// every pair of regions through a wanproxy, so a test can give the WAN
// latency, jitter, a bandwidth cap, loss or a cut, per direction and per
// pair of regions. See README.md in this folder.
//
// The proxies: for each directed pair of regions (from, to) and each node
// of to, one proxy whose upstream is that node's data-plane address; the
// nodes of from get those proxies as the seeds of their --peer-region to,
// and every Topology answer crossing them names the proxies instead of
// to's nodes (topology.go says why). A proxy's Forward direction carries
// from's requests, its Reverse direction to's answers.
package regions

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/proto"
	"github.com/fcap-io/fcap/test/cluster"
	"github.com/fcap-io/fcap/test/wanproxy"
)

// Config says what Start starts.
type Config struct {
	// Regions names the regions, each 1-32 of [a-z0-9-]. Default a, b, c.
	Regions []string
	// Nodes is how many fcapd each region runs. Default 3.
	Nodes int
	// Replicas is each node's --replicas. 0: fcapd's default.
	Replicas int
	// Link is what every proxy does, both directions, from the start.
	// Default: the zero Link (bytes pass as they come).
	Link wanproxy.Link
	// Linked gives each node --region and a --peer-region per other
	// region, whose seeds are the proxies to that region's nodes. Without
	// it the regions are clusters that know nothing of each other and
	// the proxies carry only what a test sends through them. Needs an
	// fcapd with those flags: call RequireRegionFlags first.
	Linked bool
	// Args are more fcapd flags for every node.
	Args []string
	// DataDir, when set, gives each node DataDir/<region>/<node>.
	DataDir string
}

// Bed is a running multi-region test bed. Its processes and proxies go
// when the test ends, pass or fail.
type Bed struct {
	Regions []*Region

	t     testing.TB
	links map[pair]*link
}

// link is the WAN from one region to another.
type link struct {
	proxies []*wanproxy.Proxy // the i-th in front of the i-th node of pair.to
	addrs   addrMap           // pair.to's data-plane addresses -> proxies
}

// Region is one region's cluster.
type Region struct {
	Name  string
	Nodes []*cluster.Node
}

// pair is a directed pair of regions: from dials to.
type pair struct{ from, to string }

var regionName = regexp.MustCompile(`^[a-z0-9-]{1,32}$`)

// Start starts every region and waits until each is formed: every node
// counts the region's N nodes active and is ready. The regions start one
// after another; a proxy to a region not started yet holds the
// connections made to it until the region is up.
func Start(t testing.TB, cfg Config) *Bed {
	t.Helper()
	if len(cfg.Regions) == 0 {
		cfg.Regions = []string{"a", "b", "c"}
	}
	if cfg.Nodes == 0 {
		cfg.Nodes = 3
	}
	if err := cfg.validate(); err != nil {
		t.Fatal(err)
	}
	b := &Bed{t: t, links: map[pair]*link{}}
	for _, from := range cfg.Regions {
		for _, to := range cfg.Regions {
			if from == to {
				continue
			}
			l := &link{}
			b.links[pair{from, to}] = l
			for range cfg.Nodes {
				p, err := wanproxy.New("")
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { p.Close() })
				if err := p.SetBoth(cfg.Link); err != nil {
					t.Fatal(err)
				}
				if err := p.Rewrite(wanproxy.Reverse, func(r io.Reader) io.Reader { return newTopologyRewriter(r, &l.addrs) }); err != nil {
					t.Fatal(err)
				}
				l.proxies = append(l.proxies, p)
			}
		}
	}
	for _, name := range cfg.Regions {
		o := cluster.Options{
			Replicas: cfg.Replicas,
			Prefix:   name,
			Args:     slices.Clone(cfg.Args),
		}
		if cfg.DataDir != "" {
			o.DataDir = filepath.Join(cfg.DataDir, name)
		}
		if cfg.Linked {
			o.Args = append(o.Args, b.regionFlags(name, cfg.Regions)...)
		}
		r := &Region{Name: name, Nodes: cluster.StartCluster(t, cfg.Nodes, o)}
		b.Regions = append(b.Regions, r)
		b.pointProxies(r)
	}
	t.Cleanup(b.logOnFailure)
	return b
}

// logOnFailure writes, when the test failed, each node's last log lines
// about its region links.
func (b *Bed) logOnFailure() {
	if !b.t.Failed() {
		return
	}
	for _, r := range b.Regions {
		for _, n := range r.Nodes {
			var lines []string
			for _, l := range strings.Split(n.Logs(), "\n") {
				if strings.Contains(l, "region") {
					lines = append(lines, l)
				}
			}
			b.t.Logf("%s: %d log lines about regions, the last 20:\n%s", n.Name, len(lines),
				strings.Join(lines[max(0, len(lines)-20):], "\n"))
		}
	}
}

func (c Config) validate() error {
	seen := map[string]bool{}
	for _, r := range c.Regions {
		if !regionName.MatchString(r) {
			return fmt.Errorf("regions: region name %q: want 1-32 of [a-z0-9-]", r)
		}
		if seen[r] {
			return fmt.Errorf("regions: region %q named twice", r)
		}
		seen[r] = true
	}
	if c.Nodes < 1 {
		return fmt.Errorf("regions: %d nodes per region", c.Nodes)
	}
	return c.Link.Validate()
}

// regionFlags returns the region flags of a node of region name:
// --region name and, per other region, --peer-region other=<the proxies
// from name to other's nodes>.
func (b *Bed) regionFlags(name string, all []string) []string {
	args := []string{"--region", name}
	for _, other := range all {
		if other == name {
			continue
		}
		var seeds []string
		for _, p := range b.links[pair{name, other}].proxies {
			seeds = append(seeds, p.Addr())
		}
		args = append(args, "--peer-region", other+"="+strings.Join(seeds, ","))
	}
	return args
}

// pointProxies points every proxy to r's nodes at their current
// data-plane addresses, and the topology rewriting with them.
func (b *Bed) pointProxies(r *Region) {
	for pr, l := range b.links {
		if pr.to != r.Name {
			continue
		}
		for i, p := range l.proxies {
			p.SetUpstream(r.Nodes[i].Data)
			l.addrs.set(r.Nodes[i].Data, p.Addr())
		}
	}
}

// Region returns the region named name; it fails the test when there is
// none.
func (b *Bed) Region(name string) *Region {
	b.t.Helper()
	for _, r := range b.Regions {
		if r.Name == name {
			return r
		}
	}
	b.t.Fatalf("no region %q", name)
	return nil
}

// Proxies returns the proxies region from dials region to through, the
// i-th in front of to's i-th node.
func (b *Bed) Proxies(from, to string) []*wanproxy.Proxy {
	b.t.Helper()
	l, ok := b.links[pair{from, to}]
	if !ok {
		b.t.Fatalf("no link from region %q to %q", from, to)
	}
	return l.proxies
}

// SetLink sets what the WAN does to bytes travelling from region from to
// region to: the requests from's nodes send to's (Forward on from->to's
// proxies) and the answers to's nodes send back to from's requests
// (Reverse on to->from's proxies).
func (b *Bed) SetLink(from, to string, l wanproxy.Link) {
	b.t.Helper()
	for _, p := range b.Proxies(from, to) {
		if err := p.Set(wanproxy.Forward, l); err != nil {
			b.t.Fatal(err)
		}
	}
	for _, p := range b.Proxies(to, from) {
		if err := p.Set(wanproxy.Reverse, l); err != nil {
			b.t.Fatal(err)
		}
	}
}

// SetAllLinks sets every direction of every pair to l.
func (b *Bed) SetAllLinks(l wanproxy.Link) {
	b.t.Helper()
	for _, k := range b.links {
		for _, p := range k.proxies {
			if err := p.SetBoth(l); err != nil {
				b.t.Fatal(err)
			}
		}
	}
}

// Cut cuts the WAN between regions a and b, both ways: nothing crosses,
// and nobody is told (see wanproxy.Proxy.Cut).
func (b *Bed) Cut(x, y string) { b.each(x, y, (*wanproxy.Proxy).Cut) }

// Heal ends a cut between regions x and y.
func (b *Bed) Heal(x, y string) { b.each(x, y, (*wanproxy.Proxy).Heal) }

// Isolate cuts region name from every other region.
func (b *Bed) Isolate(name string) {
	for _, r := range b.Regions {
		if r.Name != name {
			b.Cut(name, r.Name)
		}
	}
}

// HealAll ends every cut.
func (b *Bed) HealAll() {
	for _, l := range b.links {
		for _, p := range l.proxies {
			p.Heal()
		}
	}
}

func (b *Bed) each(x, y string, f func(*wanproxy.Proxy)) {
	b.t.Helper()
	for _, pr := range []pair{{x, y}, {y, x}} {
		for _, p := range b.Proxies(pr.from, pr.to) {
			f(p)
		}
	}
}

// Carried returns the bytes the WAN has carried from region from to
// region to (requests from's nodes sent plus answers to's nodes sent to
// the other's requests, in that direction only).
func (b *Bed) Carried(from, to string) int64 {
	b.t.Helper()
	var n int64
	for _, p := range b.Proxies(from, to) {
		n += p.Forwarded(wanproxy.Forward)
	}
	for _, p := range b.Proxies(to, from) {
		n += p.Forwarded(wanproxy.Reverse)
	}
	return n
}

// Restart kills node i of region name and starts it again; the proxies
// in front of it follow it to its new data-plane port.
func (b *Bed) Restart(name string, i int) {
	b.t.Helper()
	r := b.Region(name)
	r.Nodes[i].Restart()
	b.pointProxies(r)
}

// Seeds returns the data-plane addresses of the region's running nodes.
func (r *Region) Seeds() []string { return cluster.Seeds(r.Nodes...) }

// Client returns a client of region name (its seeds that region's
// nodes), with deadlines of seconds (cluster.ClientConfig), closed when
// the test ends.
func (b *Bed) Client(t testing.TB, name string, mutate ...func(*client.Config)) *client.Client {
	t.Helper()
	return cluster.NewClient(t, b.Region(name).Seeds(), mutate...)
}

// Status asks node i of region to for its status through the proxy
// region from dials it by: a way to see that the proxy leads there.
func (b *Bed) Status(from, to string, i int) (string, uint64, error) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := client.NodeStatus(ctx, b.Proxies(from, to)[i].Addr())
	if err != nil {
		return "", 0, err
	}
	return st.Name, st.Members, nil
}

// Topology asks node i of region to for its ring through the proxy
// region from dials it by, as a region link does: the member addresses
// name the proxies.
func (b *Bed) Topology(from, to string, i int) (*proto.Topology, error) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var t proto.Topology
	if err := (&client.Admin{}).Call(ctx, b.Proxies(from, to)[i].Addr(), &proto.TopologyRequest{}, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// RegionFlags are the fcapd flags a linked bed needs.
var RegionFlags = []string{"region", "peer-region"}

// RequireRegionFlags fails the test when fcapd (built for this test
// binary) does not list every flag of RegionFlags in its --help: the
// region link is gone from this tree.
func RequireRegionFlags(t testing.TB) {
	t.Helper()
	if missing := MissingFlags(t); len(missing) > 0 {
		t.Fatalf("fcapd lacks the flag(s) --%s: the region link is gone from this tree; this test needs it",
			strings.Join(missing, ", --"))
	}
}

// MissingFlags returns the flags of RegionFlags fcapd's --help does not
// list.
func MissingFlags(t testing.TB) []string {
	t.Helper()
	out, err := exec.Command(cluster.Binary(t), "--help").CombinedOutput()
	if err != nil && len(out) == 0 {
		t.Fatalf("fcapd --help: %v", err)
	}
	var missing []string
	for _, f := range RegionFlags {
		if !regexp.MustCompile(`(?m)^\s+--?` + regexp.QuoteMeta(f) + `(\s|$)`).Match(out) {
			missing = append(missing, f)
		}
	}
	return missing
}

// envDuration reads a duration from the environment, def when unset; a
// value that does not parse fails the test.
func envDuration(t testing.TB, name string, def time.Duration) time.Duration {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		t.Fatalf("%s=%q: want a duration such as 3s", name, v)
	}
	return d
}

package gossip

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/fcap-io/fcap/ring"
)

// A peer region retired through one node reaches the others with
// push-pull; each applies it (OnRetireRegion) and records its own time,
// and a name a node does not take is not recorded there.
func TestRetiredRegionsSpread(t *testing.T) {
	var mu sync.Mutex
	applied := map[string][]string{} // by node: the names OnRetireRegion was called with
	onRetire := func(node string, at int64) func(*Config) {
		return func(c *Config) {
			c.OnRetireRegion = func(name string) (int64, bool) {
				mu.Lock()
				defer mu.Unlock()
				applied[node] = append(applied[node], name)
				return at, name == "c"
			}
		}
	}
	nodes := all(3, ring.Active)
	for i := range nodes {
		nodes[i].edit = onRetire(nodes[i].name, int64(1000+i))
	}
	ms := cluster(t, nodes)
	waitFor(t, "one cluster", func() bool { return agree(ms, "node-0", "node-1", "node-2") })
	if !ms[0].RetireRegion("zz", 8) || !ms[0].RetireRegion("c", 7) || ms[0].RetireRegion("c", 9) {
		t.Fatal("RetireRegion: want new, new, then known")
	}
	for i, m := range ms[1:] {
		want := []RetiredRegion{{Name: "c", At: int64(1001 + i)}}
		waitFor(t, fmt.Sprintf("the retire to reach node-%d", i+1), func() bool { return slices.Equal(m.RetiredRegions(), want) })
	}
	if got := ms[0].RetiredRegions(); !slices.Equal(got, []RetiredRegion{{Name: "c", At: 7}, {Name: "zz", At: 8}}) {
		t.Errorf("node-0 retired %v", got)
	}
	mu.Lock()
	if slices.Contains(applied["node-0"], "c") {
		t.Errorf("node-0, which retired c itself, applied it again from gossip: %v", applied["node-0"])
	}
	mu.Unlock()

}

package ring

import (
	"slices"
	"testing"
)

func TestEpoch(t *testing.T) {
	base := members("node-", 4, Active)
	base[3].State = Joining
	r0 := mustBuild(t, DefaultConfig(), base)
	rev := slices.Clone(base)
	slices.Reverse(rev)
	if mustBuild(t, DefaultConfig(), rev).Epoch() != r0.Epoch() {
		t.Fatal("same members in another order: another epoch")
	}
	seen := map[uint64]string{r0.Epoch(): "base"}
	check := func(what string, cfg Config, ms []Member) {
		t.Helper()
		e := mustBuild(t, cfg, ms).Epoch()
		if e == 0 {
			t.Fatalf("%s: epoch 0", what)
		}
		if prev, ok := seen[e]; ok {
			t.Fatalf("%s: same epoch as %s", what, prev)
		}
		seen[e] = what
	}
	edits := map[string]func(*Member){
		"Name":        func(m *Member) { m.Name += "x" },
		"Addr":        func(m *Member) { m.Addr += "1" },
		"HTTPAddr":    func(m *Member) { m.HTTPAddr += "1" },
		"State":       func(m *Member) { m.State = Leaving },
		"Incarnation": func(m *Member) { m.Incarnation++ },
	}
	for field, edit := range edits {
		for i := range base {
			ms := slices.Clone(base)
			edit(&ms[i])
			check(field+" of member "+ms[i].Name, DefaultConfig(), ms)
		}
	}
	// Moving bytes between adjacent strings must change the epoch too.
	ms := slices.Clone(base)
	ms[0].Addr, ms[0].HTTPAddr = ms[0].Addr+ms[0].HTTPAddr[:1], ms[0].HTTPAddr[1:]
	check("bytes moved from HTTPAddr to Addr", DefaultConfig(), ms)
	check("a member fewer", DefaultConfig(), base[:3])
	check("a member more", DefaultConfig(), append(slices.Clone(base), Member{Name: "node-9", Addr: "a:1", State: Leaving}))
	check("no members", DefaultConfig(), nil)
	for what, edit := range map[string]func(*Config){
		"Partitions":   func(c *Config) { c.Partitions = 269 },
		"Replicas":     func(c *Config) { c.Replicas = 3 },
		"VirtualNodes": func(c *Config) { c.VirtualNodes++ },
		"Load":         func(c *Config) { c.Load = 1.5 },
	} {
		cfg := DefaultConfig()
		edit(&cfg)
		check(what, cfg, base)
	}
}

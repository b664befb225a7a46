package gossip

import (
	"slices"
	"strings"
)

// Retired peer regions (ARCHITECTURE.md, "Strict caps: escrow",
// "Reclaim"). An operator retires a peer region lost for good through
// one node (fcapctl region retire); the news spreads to the others with
// push-pull, as a forget's tombstone does, so that every node of the
// region stops counting on it: a node that learns it applies it
// (Config.OnRetireRegion) as of its own clock, never the sender's, so
// no node takes it as older than it is. Entries are never dropped: a
// retired region stays retired until the region's configuration drops
// it (and a restart without a data dir forgets it: the operator retires
// it again).

// RetiredRegion is a peer region an operator retired.
type RetiredRegion struct {
	// Name is the region's name.
	Name string `msgpack:"n"`
	// At is when this node retired it (its clock, Unix ms).
	At int64 `msgpack:"a"`
}

// maxRetired bounds the retired regions a push-pull may carry (a node
// has at most 64 peer regions).
const maxRetired = 64

// RetireRegion records that the peer region name was retired as of at,
// after the node applied it; a region already recorded keeps its
// first time. It reports whether name was new here.
func (m *Membership) RetireRegion(name string, at int64) bool {
	m.viewMu.Lock()
	defer m.viewMu.Unlock()
	if _, ok := m.retired[name]; ok || len(m.retired) >= maxRetired {
		return false
	}
	m.retired[name] = RetiredRegion{Name: name, At: at}
	return true
}

// RetiredRegions returns the retired peer regions, by name.
func (m *Membership) RetiredRegions() []RetiredRegion {
	m.viewMu.Lock()
	out := make([]RetiredRegion, 0, len(m.retired))
	for _, r := range m.retired {
		out = append(out, r)
	}
	m.viewMu.Unlock()
	slices.SortFunc(out, func(a, b RetiredRegion) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// mergeRetired applies the retired regions a push-pull brought that
// this node has not retired: the node applies each (OnRetireRegion, not
// under viewMu) and this node records it with its own time.
func (m *Membership) mergeRetired(rs []RetiredRegion) {
	if m.cfg.OnRetireRegion == nil {
		return
	}
	for _, r := range rs {
		if r.Name == "" || len(r.Name) > maxNameLen {
			continue
		}
		m.viewMu.Lock()
		_, known := m.retired[r.Name]
		m.viewMu.Unlock()
		if known {
			continue
		}
		at, ok := m.cfg.OnRetireRegion(r.Name)
		if !ok {
			continue
		}
		if m.RetireRegion(r.Name, at) {
			m.log.Warn("peer region retired by an operator through another node", "region", r.Name, "at_ms", at)
		}
	}
}

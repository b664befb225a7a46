package engine

import (
	"sync"
	"sync/atomic"

	"github.com/fcap-io/fcap"
)

// MaxNames bounds how many counter names an engine remembers: a counter
// is known by the hash of its cap (fcap.KeyHash), and the name lets an
// operator's inspection (fcapctl keys) say which cap it counts without
// being given the caps. Caps are few beside viewers (campaigns,
// creatives, advertisers), so the bound is rarely reached; past it,
// further names are not remembered and those counters show as hashes.
const MaxNames = 1 << 16

// names remembers scope:id for the hashes of counters this engine
// created. Reads are lock-free (sync.Map's read path); a name is stored
// once, when its first counter is created.
type names struct {
	m sync.Map // uint64 -> string
	n atomic.Int64
}

// note remembers c's name under kh, unless known or the table is full.
func (t *names) note(kh uint64, c *fcap.Cap) {
	if _, ok := t.m.Load(kh); ok || t.n.Load() >= MaxNames {
		return
	}
	if _, loaded := t.m.LoadOrStore(kh, c.Scope+":"+c.ID); !loaded {
		t.n.Add(1)
	}
}

// CounterName returns "scope:id" of the cap whose counters hash to kh,
// if this engine created one (since it started) and remembered it.
func (e *Engine) CounterName(kh uint64) (string, bool) {
	v, ok := e.names.m.Load(kh)
	if !ok {
		return "", false
	}
	return v.(string), true
}

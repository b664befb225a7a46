// Package grants remembers the strict grants a node answered, so a client
// that gave up before the answer reached it can give the grant back
// (proto.Undo). Each grant is remembered under a random id, for TTL at
// most and MaxGrants at most (oldest first forgotten), and can be taken
// back once, by its viewer only.
package grants

import (
	"math/rand/v2"
	"sync"
	"time"

	"github.com/fcap-io/fcap"
)

const (
	// TTL is how long a strict grant can be undone: far longer
	// than a late answer takes to arrive and its Undo to follow, short
	// enough that the memory stays small.
	TTL = 10 * time.Second
	// MaxGrants bounds the memory: past it, the oldest grants are
	// forgotten first (they can no longer be undone).
	MaxGrants = 1 << 16
)

// Grant is one strict grant that can be undone.
type Grant struct {
	Viewer string
	Tag    uint64     // the engine's tag of its impression (engine.Write.Grant)
	Now    int64      // the grant's time
	Caps   []fcap.Cap // the caps it counted on
	at     time.Time  // when it was answered
}

// Memory holds the strict grants that can be undone. The zero value
// is ready to use.
type Memory struct {
	mu    sync.Mutex
	byID  map[uint64]Grant
	order []uint64 // ids oldest first; may hold ids already taken
}

// Put remembers a strict grant (the caller's own copies of viewer and
// caps, the engine's tag of its impression) and returns its id, never 0.
// The id is the client's to send back, apart from the tag, which never
// leaves the node.
func (g *Memory) Put(viewer string, tag uint64, now int64, caps []fcap.Cap) uint64 {
	at := time.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.byID == nil {
		g.byID = make(map[uint64]Grant)
	}
	g.expireLocked(at)
	var id uint64
	for id == 0 || g.has(id) {
		id = rand.Uint64()
	}
	g.byID[id] = Grant{Viewer: viewer, Tag: tag, Now: now, Caps: caps, at: at}
	g.order = append(g.order, id)
	return id
}

func (g *Memory) has(id uint64) bool { _, ok := g.byID[id]; return ok }

// expireLocked forgets grants older than TTL, and the oldest
// ones past MaxGrants.
func (g *Memory) expireLocked(now time.Time) {
	drop := 0
	for drop < len(g.order) {
		id := g.order[drop]
		e, ok := g.byID[id]
		if ok && len(g.byID) < MaxGrants && now.Sub(e.at) < TTL {
			break
		}
		delete(g.byID, id)
		drop++
	}
	if drop > 0 {
		g.order = append(g.order[:0], g.order[drop:]...)
	}
}

// Take removes and returns the grant id names, if it is viewer's.
func (g *Memory) Take(viewer string, id uint64) (Grant, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	e, ok := g.byID[id]
	if !ok || e.Viewer != viewer || time.Since(e.at) >= TTL {
		return Grant{}, false
	}
	delete(g.byID, id) // its id stays in order until it is the oldest
	return e, true
}

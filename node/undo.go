package node

import (
	"math/rand/v2"
	"sync"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/node/metrics"
	"github.com/fcap-io/fcap/proto"
)

// Undo. A strict grant the node answered in time can still reach the
// client after it gave up (a starved client, a slow kernel queue): the
// client failed closed and showed nothing, yet the slot is used. The
// node remembers each strict Allow grant it answers, under a random id
// it returns in AllowResult.Grant, for grantMemoryTTL; the client sends
// the id back in an Undo, and the node takes the grant back exactly as
// it takes back one it could not answer in time (revoke: engine.Revoke,
// logged and replicated). The id names the grant, so an Undo never takes
// back another caller's impression: each grant is taken back at most
// once, and an Undo for an id the node does not hold (soft, unknown,
// already undone, forgotten, another viewer's) changes nothing.
//
// The memory is this node's only: an Undo that reaches a new owner after
// the ring changed finds nothing and changes nothing (the grant stands,
// as before Undo existed).

const (
	// grantMemoryTTL is how long a strict grant can be undone: far longer
	// than a late answer takes to arrive and its Undo to follow, short
	// enough that the memory stays small.
	grantMemoryTTL = 10 * time.Second
	// grantMemoryMax bounds the memory: past it, the oldest grants are
	// forgotten first (they can no longer be undone).
	grantMemoryMax = 1 << 16
)

// grantEntry is one strict grant that can be undone.
type grantEntry struct {
	viewer string
	now    int64
	caps   []fcap.Cap
	at     time.Time // when it was answered
}

// grantMemory holds the strict grants that can be undone. The zero value
// is ready to use.
type grantMemory struct {
	mu    sync.Mutex
	byID  map[uint64]grantEntry
	order []uint64 // ids oldest first; may hold ids already taken
}

// put remembers a strict grant (the caller's own copies of viewer and
// caps) and returns its id, never 0.
func (g *grantMemory) put(viewer string, now int64, caps []fcap.Cap) uint64 {
	at := time.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.byID == nil {
		g.byID = make(map[uint64]grantEntry)
	}
	g.expireLocked(at)
	var id uint64
	for id == 0 || g.has(id) {
		id = rand.Uint64()
	}
	g.byID[id] = grantEntry{viewer: viewer, now: now, caps: caps, at: at}
	g.order = append(g.order, id)
	return id
}

func (g *grantMemory) has(id uint64) bool { _, ok := g.byID[id]; return ok }

// expireLocked forgets grants older than grantMemoryTTL, and the oldest
// ones past grantMemoryMax.
func (g *grantMemory) expireLocked(now time.Time) {
	drop := 0
	for drop < len(g.order) {
		id := g.order[drop]
		e, ok := g.byID[id]
		if ok && len(g.byID) < grantMemoryMax && now.Sub(e.at) < grantMemoryTTL {
			break
		}
		delete(g.byID, id)
		drop++
	}
	if drop > 0 {
		g.order = append(g.order[:0], g.order[drop:]...)
	}
}

// take removes and returns the grant id names, if it is viewer's.
func (g *grantMemory) take(viewer string, id uint64) (grantEntry, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	e, ok := g.byID[id]
	if !ok || e.viewer != viewer || time.Since(e.at) >= grantMemoryTTL {
		return grantEntry{}, false
	}
	delete(g.byID, id) // its id stays in order until it is the oldest
	return e, true
}

// undo answers an Undo: the grant it names is taken back if this node
// still holds it, else nothing changes.
func (h *handler) undo(out []byte, v *view, hdr proto.Header, body []byte) ([]byte, metrics.Op, metrics.Outcome) {
	var m proto.Undo
	epoch := v.ring.Epoch()
	if err := proto.Decode(body, &m); err != nil {
		return h.failErr(out, hdr, err, epoch, metrics.OpUndo)
	}
	if err := h.n.engine.ValidateViewer(m.Viewer); err != nil {
		return h.failErr(out, hdr, err, epoch, metrics.OpUndo)
	}
	wr := &h.wr
	if code := h.begin(wr, m.Viewer, false, nil); code != 0 {
		return h.refuse(out, hdr, code, epoch, metrics.OpUndo)
	}
	g, ok := h.n.grants.take(m.Viewer, m.Grant)
	if ok {
		if _, err := h.n.engine.RevokeWrite(&wr.eng, g.viewer, g.now, g.caps); err != nil {
			h.n.log.Error("undo a strict grant", "err", err) // it was granted with these: a bug
		}
	}
	seq := h.commit(wr)
	res := "unknown"
	if ok {
		res = "undone"
	}
	h.n.metrics.Undos.WithLabelValues(res).Inc()
	if seq == 0 {
		return h.reply(out, hdr.ID, &proto.UndoResult{Epoch: epoch, Undone: ok}, metrics.OpUndo)
	}
	return h.later(out, h.start, func(out []byte) ([]byte, metrics.Op, metrics.Outcome) {
		h.n.waitLogged(seq)
		return h.reply(out, hdr.ID, &proto.UndoResult{Epoch: epoch, Undone: ok}, metrics.OpUndo)
	})
}

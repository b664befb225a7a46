package client

import (
	"context"
	"errors"
	"time"

	"github.com/fcap-io/fcap/proto"
)

// Giving back late strict grants. A strict Allow or Reserve whose answer
// arrives after its call gave up (the caller failed closed and showed no
// ad) still uses a slot on the owner when it granted: the node judged it
// in time, and the answer was late on its way (a starved client, a slow
// kernel queue). The connection's reader hands such a grant to one
// goroutine here, which gives it back: an Allow with proto.Undo (naming
// the grant by the id the node returned), a Reserve with proto.Release.
// Both are idempotent on the owner. The queue is bounded, every attempt
// has its own short deadline, and attempts are bounded: a grant that
// cannot be given back stands, as before, and is counted.

const (
	// undoQueue bounds the grants waiting to be given back.
	undoQueue = 1024
	// undoTimeout is how long one give-back attempt waits for its answer.
	undoTimeout = 250 * time.Millisecond
	// undoAttempts bounds the attempts per grant.
	undoAttempts = 3
	// maxAbandoned bounds, per connection, the strict calls that gave up
	// and whose answer has not come yet.
	maxAbandoned = 4096
)

// undoResults are the values of fcap_client_undos_total's result label.
var undoResults = []string{"returned", "gone", "failed", "dropped"}

// GiveBack is one late strict grant the client tried to give back to
// its owner (Config.OnGiveBack).
type GiveBack struct {
	Viewer string
	// Result is "returned" (the slot is free again), "gone" (the owner
	// held nothing to take back) or "failed" (no answer within the
	// attempts: the grant stands).
	Result string
	// Start and End bound the attempts: a returned grant was taken back
	// at some moment between them.
	Start, End time.Time
}

// giveBack is one late strict grant to give back to the viewer's owner:
// an Allow's grant id, or a Reserve's reservation id.
type giveBack struct {
	viewer      string
	grant       uint64
	reservation uint64
}

// strictViewer is the viewer of m when a grant of m would use a strict
// slot (an Allow or Reserve naming a strict cap), else "".
func strictViewer(m proto.Message) string {
	switch m := m.(type) {
	case *proto.Allow:
		if anyStrict(m.Caps) {
			return m.Viewer
		}
	case *proto.Reserve:
		if anyStrict(m.Caps) {
			return m.Viewer
		}
	}
	return ""
}

// giveBack queues g without blocking the connection's reader; a full
// queue drops it (counted).
func (c *Client) giveBack(g giveBack) {
	select {
	case c.undos <- g:
	default:
		c.m.undos.WithLabelValues("dropped").Inc()
	}
}

// undoLoop gives back queued grants, one at a time, until the client
// closes.
func (c *Client) undoLoop() {
	for {
		select {
		case g := <-c.undos:
			start := time.Now()
			res := c.undo(g)
			c.m.undos.WithLabelValues(res).Inc()
			if f := c.cfg.OnGiveBack; f != nil {
				f(GiveBack{Viewer: g.viewer, Result: res, Start: start, End: time.Now()})
			}
		case <-c.stop:
			return
		}
	}
}

// undo gives one grant back and says how it went (undoResults).
func (c *Client) undo(g giveBack) string {
	for attempt := 0; attempt < undoAttempts; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), undoTimeout)
		deadline, _ := ctx.Deadline()
		var (
			cl  *call
			err error
		)
		if g.grant != 0 {
			cl, err = c.owned(ctx, g.viewer, &proto.Undo{Viewer: g.viewer, Grant: g.grant}, proto.TypeUndoResult, deadline)
		} else {
			cl, err = c.owned(ctx, g.viewer, &proto.Release{Viewer: g.viewer, ID: g.reservation}, proto.TypeReleaseResult, deadline)
		}
		cancel()
		switch {
		case err == nil:
			undone := g.grant == 0 || cl.undo.Undone
			putCall(cl)
			if undone {
				return "returned"
			}
			return "gone"
		case errors.Is(err, ErrUnknownReservation), errors.Is(err, proto.ErrBadRequest):
			return "gone" // nothing to give back, and asking again changes nothing
		case errors.Is(err, ErrClosed):
			return "failed"
		}
		select {
		case <-c.stop:
			return "failed"
		default:
		}
	}
	return "failed"
}

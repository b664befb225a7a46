package engine

import "github.com/fcap-io/fcap"

// Writes and their journal.
//
// A node logs the state a write leaves a viewer in (node/wal), and
// replicates that viewer to its backups. The *Write variants of the
// write operations (AllowWrite, RecordWrite, ReserveWrite, ReleaseWrite,
// RevokeWrite) say which viewer they changed, so the caller does not
// hash the viewer id again, and append its new state to a Journal under
// the viewer's stripe lock: the same lock the write took, once. One
// viewer's states reach the journal in the order its writes happened, so
// replaying the journal leaves each viewer as its last write did.
//
// Every append to a journal happens under a stripe lock (LogState too):
// a journal's own lock is always taken inside a stripe's, never around
// one.

// Journal receives the state writes leave viewers in (a write-ahead
// log).
type Journal interface {
	// Append appends one record holding st and returns the record's
	// sequence number, 0 when it keeps none. It must not call into the
	// engine, nor keep st past the call.
	Append(st State) uint64
}

// State is a viewer's state as a Journal receives it, valid during
// Journal.Append only.
type State interface {
	// AppendTo appends the state to dst, in the form Import takes, and
	// returns it with the time from which the state no longer matters
	// (as ExportUntil).
	AppendTo(dst []byte) ([]byte, int64)
}

// Write carries a write's journal in and what the write changed out.
// Reset it (or use a new one) before each write.
type Write struct {
	// Journal, if not nil, receives the changed viewer's state.
	Journal Journal

	// Grant, if not 0, tags an Allow's impression: the viewer remembers
	// it as an impression id (until the impression ages out of the
	// longest cap), so RevokeGrantWrite can take the impression back
	// out of every copy, not only this one (revoke.go).
	Grant uint64

	// ShareSpent (with Config.Shares) says the write was refused by a strict cap whose
	// region share is spent while its limit is not: a peer region may
	// lend this one a unit.
	ShareSpent bool

	// Changed says the write changed a viewer; Key is that viewer's key
	// (fcap.ViewerKey of its id), Seq the journal's sequence number of its
	// new state (0 without a journal, or when the journal kept none).
	Changed bool
	Key     uint64
	Seq     uint64

	e      *Engine
	v      *viewer    // the changed viewer, while fill runs
	judged []fcap.Cap // scratch: the caps with their shares as limits
}

// wrote records that the write changed the viewer with key h, and logs
// its state. The caller holds s.mu.
func (w *Write) wrote(e *Engine, s *stripe, h uint64) {
	w.Changed, w.Key = true, h
	if w.Journal == nil {
		return
	}
	w.e, w.v = e, s.lookup(h)
	w.Seq = w.Journal.Append(w)
	w.e, w.v = nil, nil
}

// AppendTo is State: the changed viewer's state, while the journal
// appends it (a *Write passes itself, which allocates nothing).
func (w *Write) AppendTo(dst []byte) ([]byte, int64) { return w.e.exportUntil(dst, w.Key, w.v) }

// LogState appends the current state of the viewer with the given key to
// j under its stripe lock, for a change made without a *Write operation
// (a merge from a peer, an identity change). It returns the record's
// sequence number.
func (e *Engine) LogState(j Journal, key uint64) uint64 {
	s := e.stripeOf(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	w := Write{Journal: j}
	w.wrote(e, s, key)
	return w.Seq
}

package gossip

import (
	"context"
	"log"
	"log/slog"
	"strings"

	"github.com/hashicorp/memberlist"
)

// hooks is memberlist's Delegate and EventDelegate for a Membership. Its
// methods run on memberlist's goroutines, the events with memberlist's
// node lock held: they copy what they need under a mutex held only for
// the copy, hand off without blocking, and never call back into
// memberlist.
type hooks struct{ m *Membership }

// NodeMeta returns our encoded metadata. Validate and SetState ensure it
// fits memberlist's limit; should it not, no metadata is better than
// memberlist's panic (other nodes then skip us).
func (h hooks) NodeMeta(limit int) []byte {
	h.m.selfMu.Lock()
	meta := h.m.meta
	h.m.selfMu.Unlock()
	if len(meta) > limit {
		return nil
	}
	return meta
}

// NotifyMsg ignores user messages: fcap sends none over gossip.
func (hooks) NotifyMsg([]byte) {}

// GetBroadcasts has nothing to broadcast.
func (hooks) GetBroadcasts(overhead, limit int) [][]byte { return nil }

// LocalState pushes the failed members and tombstones (failed.go).
func (h hooks) LocalState(join bool) []byte { return h.m.localState() }

// MergeRemoteState takes in another node's failed members and
// tombstones; what does not decode is logged and ignored.
func (h hooks) MergeRemoteState(buf []byte, join bool) {
	if err := h.m.mergeState(buf); err != nil {
		h.m.log.Warn("gossip: ignoring a peer's member state", "err", err)
	}
}

// NotifyJoin records the node and asks for a new ring.
func (h hooks) NotifyJoin(n *memberlist.Node) { h.m.observe(n) }

// NotifyLeave drops the node from the ring: failed if it died, gone if
// it left.
func (h hooks) NotifyLeave(n *memberlist.Node) { h.m.lost(n) }

// NotifyUpdate records the node's new metadata and asks for a new ring.
func (h hooks) NotifyUpdate(n *memberlist.Node) { h.m.observe(n) }

// newStdLogger returns a *log.Logger for memberlist that writes to l,
// at the level memberlist's "[DEBUG]", "[INFO]", "[WARN]" and "[ERR]"
// prefixes name.
func newStdLogger(l *slog.Logger) *log.Logger {
	return log.New(logWriter{l.With("component", "memberlist")}, "", 0)
}

// logWriter turns memberlist's log lines into slog records.
type logWriter struct{ l *slog.Logger }

var logLevels = []struct {
	prefix string
	level  slog.Level
}{
	{"[DEBUG]", slog.LevelDebug},
	{"[INFO]", slog.LevelInfo},
	{"[WARN]", slog.LevelWarn},
	{"[ERR]", slog.LevelError},
	{"[ERROR]", slog.LevelError},
}

func (w logWriter) Write(p []byte) (int, error) {
	msg := strings.TrimSpace(string(p))
	level := slog.LevelInfo
	for _, l := range logLevels {
		if rest, ok := strings.CutPrefix(msg, l.prefix); ok {
			msg, level = strings.TrimSpace(rest), l.level
			break
		}
	}
	ctx := context.Background()
	if w.l.Enabled(ctx, level) {
		w.l.Log(ctx, level, strings.TrimPrefix(msg, "memberlist: "))
	}
	return len(p), nil
}

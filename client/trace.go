package client

import (
	"context"
	"sync/atomic"
	"time"
)

// CallTrace is where one call's time went on its way through the
// client, for finding the tail of an ad server's checks: whether the
// request waited to be written (behind other callers' frames on the
// connection, or for the process to schedule the write), was on the wire
// and at the node, or waited after its answer came for the caller to be
// scheduled again. Pass one with WithCallTrace; Check, CheckInto,
// CheckPreparedInto and Allow fill it in when they return an answer from
// a node. A call the failure policy answered leaves it zero, as does a
// call whose context carries none.
//
// The times are those of the request that answered: the owner's, or
// the backup's when a hedge won (Backup). Written may be zero, or later
// than Read, when the answer came back before the writer had noted its
// write's end (a loaded process), and Writing zero too when the caller
// ran again before the writer noted anything: the answer is still good.
type CallTrace struct {
	Queued  time.Time // the request, encoded, reached its connection
	Writing time.Time // the write carrying it began: after a yield to gather other callers' frames, or behind writes ahead of it
	Written time.Time // that write returned
	Read    time.Time // the connection's reader took the answer off the socket (network and node since Written)
	Resumed time.Time // the caller ran again with the answer decoded (its scheduling since Read)
	Node    string    // the node that answered
	Backup  bool      // a backup answered: a hedge won, or the owner failed
}

type traceKey struct{}

// tracing is set once any context carries a CallTrace: until then the
// calls' path notes no times (a branch on one load per call).
var tracing atomic.Bool

// WithCallTrace returns a context that makes the fcap call it is given
// to fill in t. A CallTrace is for one call at a time.
func WithCallTrace(ctx context.Context, t *CallTrace) context.Context {
	tracing.Store(true)
	return context.WithValue(ctx, traceKey{}, t)
}

func traceOf(ctx context.Context) *CallTrace {
	if !tracing.Load() {
		return nil
	}
	t, _ := ctx.Value(traceKey{}).(*CallTrace)
	return t
}

// callStamps are a call's times on its way (monotonic, see monoNow),
// noted while tracing. The writer and the reader note them, possibly
// while the caller reads them, hence atomics; tag names the request they
// are for (traceTags), as a pooled call may carry another request by the
// time a write that carried the last one ends.
type callStamps struct {
	queued, writing, written, read atomic.Int64
	tag                            atomic.Uint64
}

// traceTags numbers the requests sent while tracing.
var traceTags atomic.Uint64

// start begins the stamps of a request queued at now and returns its tag.
func (s *callStamps) start(now int64) uint64 {
	tag := traceTags.Add(1)
	s.tag.Store(tag)
	s.queued.Store(now)
	s.writing.Store(0)
	s.written.Store(0)
	s.read.Store(0)
	return tag
}

// tracedFrame is a traced call whose frame waits in a connection's
// queue, to be stamped when a write carries it.
type tracedFrame struct {
	cl  *call
	tag uint64
}

// stampWrite notes a write's start and end on the traced calls it
// carried.
func stampWrite(frames []tracedFrame, began, ended int64) {
	for _, f := range frames {
		if f.cl.stamps.tag.Load() == f.tag {
			f.cl.stamps.writing.Store(began)
			f.cl.stamps.written.Store(ended)
		}
	}
}

// monoTime is the time.Time of a monotonic stamp; zero for none.
func monoTime(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return clockBase.Add(time.Duration(ns))
}

// fillTrace fills ctx's CallTrace, if any, from the call that answered.
func fillTrace(ctx context.Context, cl *call, backup bool) {
	t := traceOf(ctx)
	if t == nil || !cl.traced {
		return
	}
	s := &cl.stamps
	*t = CallTrace{
		Queued:  monoTime(s.queued.Load()),
		Writing: monoTime(s.writing.Load()),
		Written: monoTime(s.written.Load()),
		Read:    monoTime(s.read.Load()),
		Resumed: time.Now(),
		Backup:  backup,
	}
	if cl.conn != nil {
		t.Node = cl.conn.p.addr
	}
}

package client

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/fcap-io/fcap/proto"
)

// call is one request in flight. The reader goroutine decodes the
// response into the call's own storage (never the caller's), then signals
// done; a caller that gave up first leaves the call to the garbage
// collector instead of the pool, so a late response can never write into
// memory someone reuses.
type call struct {
	id   uint64
	conn *conn
	want proto.Type
	done chan struct{} // capacity 1
	sent int64         // when the request was queued (monotonic, see monoNow)
	// traced: the request was sent while tracing (trace.go), and stamps
	// are its times.
	traced bool
	stamps callStamps
	// strictViewer is the viewer of a strict Allow or Reserve: a grant
	// that arrives after the call gave up is given back to it (undo.go).
	strictViewer string

	// Written by deliver or failWith before done is signalled.
	err      error
	check    proto.CheckResult
	allow    proto.AllowResult
	reserve  proto.ReserveResult
	release  proto.ReleaseResult
	record   proto.RecordResult
	topology proto.Topology
	pong     proto.Pong
	link     proto.LinkResult
	unlink   proto.UnlinkResult
	resolve  proto.ResolveResult
	undo     proto.UndoResult
	erase    proto.EraseResult
	void     proto.VoidResult
}

var callPool = sync.Pool{New: func() any { return &call{done: make(chan struct{}, 1)} }}

func getCall(want proto.Type) *call {
	cl := callPool.Get().(*call)
	cl.want, cl.err, cl.conn, cl.strictViewer, cl.traced = want, nil, nil, "", false
	return cl
}

func putCall(cl *call) { callPool.Put(cl) }

// results are where a call keeps the answer of each type it may want;
// the proto table says how to read its epoch and detach it (proto.Own).
var results = [256]func(cl *call) proto.Message{
	proto.TypeCheckResult:   func(cl *call) proto.Message { return &cl.check },
	proto.TypeAllowResult:   func(cl *call) proto.Message { return &cl.allow },
	proto.TypeReserveResult: func(cl *call) proto.Message { return &cl.reserve },
	proto.TypeReleaseResult: func(cl *call) proto.Message { return &cl.release },
	proto.TypeRecordResult:  func(cl *call) proto.Message { return &cl.record },
	proto.TypeTopology:      func(cl *call) proto.Message { return &cl.topology },
	proto.TypePong:          func(cl *call) proto.Message { return &cl.pong },
	proto.TypeLinkResult:    func(cl *call) proto.Message { return &cl.link },
	proto.TypeUnlinkResult:  func(cl *call) proto.Message { return &cl.unlink },
	proto.TypeResolveResult: func(cl *call) proto.Message { return &cl.resolve },
	proto.TypeUndoResult:    func(cl *call) proto.Message { return &cl.undo },
	proto.TypeEraseResult:   func(cl *call) proto.Message { return &cl.erase },
	proto.TypeVoidResult:    func(cl *call) proto.Message { return &cl.void },
}

// deliver decodes a response. Strings are copied out of the body, which
// the reader reuses.
func (cl *call) deliver(hdr proto.Header, body []byte) {
	var err error
	switch {
	case hdr.Type == proto.TypeError:
		e := &proto.Error{}
		if err = proto.Decode(body, e); err == nil {
			proto.Own(e)
			err = e
		}
	case hdr.Type != cl.want:
		err = fmt.Errorf("%w: %s answered with %s", ErrProtocol, cl.want, hdr.Type)
	case results[hdr.Type] == nil:
		err = fmt.Errorf("%w: unexpected %s", ErrProtocol, hdr.Type)
	default:
		m := results[hdr.Type](cl)
		if err = proto.Decode(body, m); err == nil {
			proto.Own(m)
		}
	}
	cl.err = err
	cl.done <- struct{}{}
}

func (cl *call) failWith(err error) {
	cl.err = err
	cl.done <- struct{}{}
}

// roundTrip sends m on a connection of p and waits for the response until
// the deadline or ctx. On success the caller reads the call's result and
// then puts the call back with putCall.
//
// With no live connection to p it fails at once (a down node must not eat
// the call's budget) unless dialWait, or p's first dial is still running,
// when it waits for the connection until the deadline: a member the
// client just learned of has none yet.
func (c *Client) roundTrip(ctx context.Context, p *peer, m proto.Message, want proto.Type, deadline time.Time, dialWait bool) (*call, error) {
	cn := p.pick()
	if cn == nil && (dialWait || p.firstDial()) {
		wctx, cancel := context.WithDeadline(ctx, deadline)
		cn, _ = p.waitConn(wctx)
		cancel()
	}
	if cn == nil {
		return nil, fmt.Errorf("%w: %s", errNoConn, p.addr)
	}
	return c.roundTripOn(ctx, cn, m, want, deadline)
}

func (c *Client) roundTripOn(ctx context.Context, cn *conn, m proto.Message, want proto.Type, deadline time.Time) (*call, error) {
	if !time.Now().Before(deadline) {
		// No budget left: sending now would only cut the connection
		// short (its write deadline has passed).
		return nil, fmt.Errorf("%w (%s)", errTimeout, cn.p.addr)
	}
	setBudget(m, time.Until(deadline))
	cl := getCall(want)
	cl.strictViewer = strictViewer(m)
	if err := cn.send(cl, m, deadline); err != nil {
		putCall(cl)
		return nil, err
	}
	t := getTimer(time.Until(deadline))
	defer putTimer(t)
	select {
	case <-cl.done:
	case <-t.C:
		sent := cl.sent // read before abandon may pool the call
		if cl.conn.forget(cl) {
			putCall(cl)
			cn.noAnswer(sent)
			return nil, fmt.Errorf("%w (%s)", errTimeout, cn.p.addr)
		}
		// The reader took the answer as the timer fired and is handing it
		// over: take it. Throwing it away would decide by policy a call
		// the cluster already answered, and counted if it granted.
		<-cl.done
	case <-ctx.Done():
		return nil, c.abandon(cl, ctx.Err())
	}
	if cl.err != nil {
		err := cl.err
		putCall(cl)
		return nil, err
	}
	return cl, nil
}

// setBudget tells the node, in the requests that carry one, how long the
// client will wait for the answer from now (proto.Allow.Budget): the node
// does not start a request it cannot answer in time, and takes back a
// strict grant whose answer would come too late, so the slot is not
// used by a grant the caller never saw. Set on every attempt, just
// before the request is encoded, so a retry carries what is left.
func setBudget(m proto.Message, left time.Duration) {
	switch m := m.(type) {
	case *proto.Allow:
		m.Budget = left
	case *proto.Reserve:
		m.Budget = left
	case *proto.Check:
		m.Budget = left
	}
}

// abandon gives up on a call, pooling it only when no response can still
// arrive for it.
func (c *Client) abandon(cl *call, err error) error {
	if cl.conn.forget(cl) {
		putCall(cl)
	}
	return err
}

var timerPool sync.Pool

func getTimer(d time.Duration) *time.Timer {
	if t, ok := timerPool.Get().(*time.Timer); ok {
		t.Reset(d)
		return t
	}
	return time.NewTimer(d)
}

func putTimer(t *time.Timer) {
	t.Stop() // since Go 1.23 a stopped timer's channel holds no stale value
	timerPool.Put(t)
}

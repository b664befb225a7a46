package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fcap-io/fcap/proto"
)

// Hedged reads ("The Tail at Scale"). A soft check's request to the
// viewer's owner stays in flight until the call's deadline; when the owner
// has not answered after the hedge delay (learnt from that owner's recent
// latencies), a second request goes to a backup owner, and the first good
// answer wins. The hedge budget bounds the extra requests, so a sick
// cluster is not sent twice its load.
const (
	// hedgeSamples is how many of a peer's recent latencies the hedge
	// delay is learnt from; hedgeLearnt is how many it needs first.
	hedgeSamples = 256
	hedgeLearnt  = 64
	// hedgeEvery: the delay is recomputed after this many new samples.
	hedgeEvery = 16
	// hedgeMin and hedgeMax bound the learnt delay; a call also hedges
	// by half its budget at the latest, so the backup has the other half.
	hedgeMin = 200 * time.Microsecond
	hedgeMax = 50 * time.Millisecond
	// defaultHedgeBudget is Config.HedgeBudget's default.
	defaultHedgeBudget = 0.05
	// hedgeBurst is how many hedges the budget saves up at most (in
	// thousandths): a quiet period does not buy a burst that doubles the
	// load when the cluster turns sick.
	hedgeBurst = 10 * 1000
)

// latencies keeps a peer's recent answer latencies and the hedge delay
// learnt from them: their 99th percentile, bounded. Not the 95th: that
// would hedge 5% of the checks in steady state and spend the whole
// budget on ordinary noise, leaving none for an owner that turns slow.
type latencies struct {
	delay atomic.Int64 // nanoseconds; 0 until learnt

	mu sync.Mutex
	// The fields below are guarded by mu.
	ring  [hedgeSamples]int64
	n     int // samples held, up to hedgeSamples
	next  int // where the next sample goes
	fresh int // samples since the delay was computed
}

// add records one latency and returns the new delay when it was
// recomputed (0 otherwise).
func (l *latencies) add(d time.Duration) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ring[l.next] = int64(d)
	l.next = (l.next + 1) % hedgeSamples
	l.n = min(l.n+1, hedgeSamples)
	l.fresh++
	if l.n < hedgeLearnt || l.fresh < hedgeEvery {
		return 0
	}
	l.fresh = 0
	var sorted [hedgeSamples]int64
	s := sorted[:l.n]
	copy(s, l.ring[:l.n])
	slices.Sort(s)
	p99 := time.Duration(s[(len(s)*99)/100])
	p99 = min(max(p99, hedgeMin), hedgeMax)
	l.delay.Store(int64(p99))
	return p99
}

// noteLatency records how long p took to answer (or at least took).
func (c *Client) noteLatency(p *peer, d time.Duration) {
	if learnt := p.lat.add(d); learnt > 0 {
		c.m.hedgeDelay.Set(learnt.Seconds())
	}
}

// hedgeDelay is how long a call waits for p before asking a backup: the
// learnt delay, or a quarter of the budget until one is learnt, and at
// most half the budget, so the backup has the other half.
func (c *Client) hedgeDelay(p *peer, budget time.Duration) time.Duration {
	d := time.Duration(p.lat.delay.Load())
	if d == 0 {
		d = max(budget/4, hedgeMin)
	}
	return min(d, budget/2)
}

// hedgeShare resolves Config.HedgeBudget to thousandths of a hedge per
// eligible call: 0 is the default, below 0 never hedges, above 1 is 1.
func hedgeShare(cfg Config) int64 {
	switch b := cfg.HedgeBudget; {
	case b == 0:
		return int64(defaultHedgeBudget * 1000)
	case b < 0:
		return 0
	case b > 1:
		return 1000
	default:
		return max(int64(b*1000), 1)
	}
}

// earnHedge credits the budget for one call that could hedge.
func (c *Client) earnHedge() {
	if c.hedgeShare == 0 {
		return
	}
	for {
		v := c.hedgeTokens.Load()
		if v >= hedgeBurst || c.hedgeTokens.CompareAndSwap(v, min(v+c.hedgeShare, hedgeBurst)) {
			return
		}
	}
}

// spendHedge takes one hedge from the budget, if it holds one.
func (c *Client) spendHedge() bool {
	for {
		v := c.hedgeTokens.Load()
		if v < 1000 {
			return false
		}
		if c.hedgeTokens.CompareAndSwap(v, v-1000) {
			return true
		}
	}
}

// hedgedCheck asks the viewer's owner for a soft check and, if the owner
// is slow, a backup owner too (see the top of this file). stale reports
// that the backup's answer won. With no backup the owner has the whole
// deadline; an owner that fails (unreachable, an error) sends the check
// to a backup at once, outside the hedge budget, as a failover.
func (c *Client) hedgedCheck(ctx context.Context, viewer string, req *proto.Check, deadline time.Time) (cl *call, stale bool, err error) {
	t, owners := c.route(viewer)
	if len(owners) < 2 || t.peers[owners[0]] == nil {
		return c.ownerOnly(ctx, viewer, req, deadline)
	}
	owner := t.peers[owners[0]]
	var backup *peer
	for _, o := range owners[1:] {
		if p := t.peers[o]; p != nil && p.pick() != nil {
			backup = p
			break
		}
	}
	if backup == nil || (owner.pick() == nil && owner.firstDial()) {
		// Nobody to hedge with, or an owner the client just learned of
		// (its first dial is running): the owner keeps the whole
		// deadline.
		return c.ownerOnly(ctx, viewer, req, deadline)
	}
	c.earnHedge()
	first, err := c.start(owner, req, proto.TypeCheckResult, deadline)
	if err != nil {
		return c.checkFailover(ctx, viewer, req, err, deadline)
	}
	sentAt := time.Now()
	budget := time.Until(deadline)
	tm := getTimer(c.hedgeDelay(owner, budget))
	defer putTimer(tm)
	select {
	case <-first.done:
		return c.ownerAnswered(ctx, viewer, req, owner, first, sentAt, deadline)
	case <-ctx.Done():
		return nil, false, c.abandon(first, ctx.Err())
	case <-tm.C:
	}
	var second *call
	hedged := false
	if c.spendHedge() {
		req.Backup = true
		if second, err = c.start(backup, req, proto.TypeCheckResult, deadline); err == nil {
			c.m.hedgesSent.Inc()
			hedged = true
		}
	}
	if second == nil {
		// No hedge: the owner keeps the deadline, but one that has sent
		// nothing at all on that connection by three fifths of the
		// budget, nor for as long before the request went out, is taken
		// for stalled (paused, black-holed) rather than slow, and a
		// backup is asked: a failover on evidence, outside the budget.
		// A slow owner still answering on the connection is waited for.
		silent := budget * 3 / 5
		tm.Reset(time.Until(sentAt.Add(silent))) // it fired: its channel is drained
		select {
		case <-first.done:
			return c.ownerAnswered(ctx, viewer, req, owner, first, sentAt, deadline)
		case <-ctx.Done():
			return nil, false, c.abandon(first, ctx.Err())
		case <-tm.C:
		}
		if first.conn.lastRead.Load() < first.sent-int64(silent) {
			req.Backup = true
			second, _ = c.start(backup, req, proto.TypeCheckResult, deadline)
		}
	}
	if second == nil {
		tm.Reset(time.Until(deadline))
		select {
		case <-first.done:
			return c.ownerAnswered(ctx, viewer, req, owner, first, sentAt, deadline)
		case <-ctx.Done():
			return nil, false, c.abandon(first, ctx.Err())
		case <-tm.C:
			return c.giveUp(first, owner, sentAt)
		}
	}
	tm.Reset(time.Until(deadline))
	return c.race(ctx, owner, backup, first, second, hedged, sentAt, tm)
}

// race waits for the first good answer of the owner's call and the
// backup's, until tm (set to the deadline) fires.
func (c *Client) race(ctx context.Context, owner, backup *peer, first, second *call, hedged bool, sentAt time.Time, tm *time.Timer) (*call, bool, error) {
	var err error
	for first != nil || second != nil {
		var a, b <-chan struct{}
		if first != nil {
			a = first.done
		}
		if second != nil {
			b = second.done
		}
		select {
		case <-a:
			c.noteLatency(owner, time.Since(sentAt))
			if first.err == nil {
				if second != nil {
					if hedged {
						c.m.hedgesCancelled.Inc()
					}
					c.abandon(second, nil)
				}
				c.noteEpoch(first.check.Epoch, owner)
				return first, false, nil
			}
			err = first.err
			putCall(first)
			first = nil
		case <-b:
			if second.err == nil {
				if first != nil {
					// The owner's latency is at least this long.
					c.noteLatency(owner, time.Since(sentAt))
					c.abandon(first, nil)
				}
				if hedged {
					c.m.hedgesWon.Inc()
				}
				// A backup that answers with a newer epoch may own the
				// viewer now (the owner died and the ring moved on).
				c.noteEpoch(second.check.Epoch, backup)
				return second, true, nil
			}
			err = second.err
			putCall(second)
			second = nil
		case <-ctx.Done():
			for _, cl := range []*call{first, second} {
				if cl != nil {
					c.abandon(cl, nil)
				}
			}
			return nil, false, ctx.Err()
		case <-tm.C:
			if second != nil {
				c.abandon(second, nil)
			}
			if first != nil {
				return c.giveUp(first, owner, sentAt)
			}
			return nil, false, fmt.Errorf("%w (%s)", errTimeout, backup.addr)
		}
	}
	return nil, false, err
}

// ownerOnly waits for the owner until the deadline, then, if it failed
// before then (unreachable, an error), asks a backup.
func (c *Client) ownerOnly(ctx context.Context, viewer string, req *proto.Check, deadline time.Time) (*call, bool, error) {
	cl, err := c.owned(ctx, viewer, req, proto.TypeCheckResult, deadline)
	if err == nil || errors.Is(err, errTimeout) {
		return cl, false, err
	}
	return c.checkFailover(ctx, viewer, req, err, deadline)
}

// ownerAnswered takes the owner's answer before any hedge was sent.
func (c *Client) ownerAnswered(ctx context.Context, viewer string, req *proto.Check, owner *peer, cl *call, sentAt time.Time, deadline time.Time) (*call, bool, error) {
	c.noteLatency(owner, time.Since(sentAt))
	if cl.err == nil {
		c.noteEpoch(cl.check.Epoch, owner)
		return cl, false, nil
	}
	err := cl.err
	putCall(cl)
	if errors.Is(err, proto.ErrNotOwner) {
		// Our topology is stale: refresh it and ask the new owner.
		c.refreshAfter(ctx, c.topo.Load(), owner.addr, deadline)
		req.Backup = false
		cl, err = c.owned(ctx, viewer, req, proto.TypeCheckResult, deadline)
		return cl, false, err
	}
	return c.checkFailover(ctx, viewer, req, err, deadline)
}

// checkFailover asks a backup owner once the owner failed with err.
func (c *Client) checkFailover(ctx context.Context, viewer string, req *proto.Check, err error, deadline time.Time) (*call, bool, error) {
	if errors.Is(err, proto.ErrBadRequest) {
		return nil, false, err
	}
	req.Backup = true
	cl, err := c.fromBackup(ctx, viewer, req, proto.TypeCheckResult, deadline)
	return cl, err == nil, err
}

// giveUp ends the wait for the owner at the deadline, taking an answer
// the reader is handing over as the timer fired.
func (c *Client) giveUp(cl *call, owner *peer, sentAt time.Time) (*call, bool, error) {
	sent := cl.sent
	if cl.conn.forget(cl) {
		cn := cl.conn
		putCall(cl)
		cn.noAnswer(sent)
		c.noteLatency(owner, time.Since(sentAt))
		return nil, false, fmt.Errorf("%w (%s)", errTimeout, owner.addr)
	}
	<-cl.done
	if cl.err != nil {
		err := cl.err
		putCall(cl)
		return nil, false, err
	}
	return cl, false, nil
}

// start sends m on a live connection of p without waiting for the answer.
func (c *Client) start(p *peer, m proto.Message, want proto.Type, deadline time.Time) (*call, error) {
	cn := p.pick()
	if cn == nil {
		return nil, fmt.Errorf("%w: %s", errNoConn, p.addr)
	}
	if !time.Now().Before(deadline) {
		return nil, fmt.Errorf("%w (%s)", errTimeout, p.addr)
	}
	setBudget(m, time.Until(deadline))
	cl := getCall(want)
	if err := cn.send(cl, m, deadline); err != nil {
		putCall(cl)
		return nil, err
	}
	return cl, nil
}

// Package conns keeps the places of a node's data-plane connections.
//
// MaxConns bounds them all; of those, at most MaxPending may be held by
// connections that have not authenticated. A new connection that finds
// either bound reached with unauthenticated connections waiting takes the
// place of the oldest of them, which is told it is overloaded and closed:
// connections that open and say nothing (a flood, a scan, half-open
// sockets) cannot keep a new client out, only make it race their arrival
// rate, and authenticated connections are never displaced.
package conns

import (
	"container/list"
	"context"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Conn is one connection's place.
type Conn struct {
	net.Conn
	// elem is the connection's place in Places.pending while it has not
	// authenticated, nil once it has or lost its place; guarded by
	// Places.mu.
	elem *list.Element
	// lost is set when a newer connection took the connection's place;
	// its reader, woken by a past read deadline, says so and closes.
	lost atomic.Bool
	// first holds the connection's first bytes (ReadFirst, Give), of
	// which Read has given the first given.
	first       []byte
	held, given int
}

// Lost reports whether a newer connection took this one's place.
func (c *Conn) Lost() bool { return c.lost.Load() }

// Metrics are the gauges and counter Places keeps up to date.
type Metrics struct {
	Open    prometheus.Gauge   // places held, authenticated or not
	Pending prometheus.Gauge   // places held by connections that have not authenticated
	Evicted prometheus.Counter // connections that lost their place to a newer one
}

// Places holds the open data-plane connections.
type Places struct {
	max, maxPending int
	metrics         Metrics

	mu sync.Mutex
	// The fields below are guarded by mu.
	draining bool
	// all holds the open connections, evicted ones included until they
	// close.
	all map[net.Conn]*Conn
	// pending holds the connections that have not authenticated, oldest
	// first (*Conn); authed counts those that have. Together they are the
	// places taken under max.
	pending *list.List
	authed  int
}

// New returns the places of at most maxConns connections, at most maxPending
// of them unauthenticated (0: a quarter of max).
func New(maxConns, maxPending int, m Metrics) *Places {
	if maxPending <= 0 {
		maxPending = max(1, maxConns/4)
	}
	return &Places{max: maxConns, maxPending: maxPending, metrics: m, all: map[net.Conn]*Conn{}, pending: list.New()}
}

// Track gives a new connection a place, as unauthenticated, taking the
// oldest unauthenticated connection's if needed; it returns nil when the
// node is draining or every place is held by an authenticated
// connection.
func (p *Places) Track(c net.Conn) *Conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.draining {
		return nil
	}
	for p.pending.Len() > 0 && (p.pending.Len() >= p.maxPending || p.authed+p.pending.Len() >= p.max) {
		p.evictOldestLocked()
	}
	if p.authed+p.pending.Len() >= p.max {
		return nil
	}
	st := &Conn{Conn: c}
	st.elem = p.pending.PushBack(st)
	p.all[c] = st
	p.countLocked()
	return st
}

// evictOldestLocked takes the place of the oldest unauthenticated
// connection and wakes its reader, which tells it why and closes it.
func (p *Places) evictOldestLocked() {
	st := p.pending.Remove(p.pending.Front()).(*Conn)
	st.elem = nil
	st.lost.Store(true)
	st.SetReadDeadline(time.Now())
	p.metrics.Evicted.Inc()
}

// Promote moves an authenticated connection out of the pending ones. It
// reports false if the connection lost its place before.
func (p *Places) Promote(st *Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if st.elem == nil {
		return false
	}
	p.pending.Remove(st.elem)
	st.elem = nil
	p.authed++
	p.countLocked()
	return true
}

// Untrack gives up a connection's place and closes it.
func (p *Places) Untrack(st *Conn) {
	p.mu.Lock()
	delete(p.all, st.Conn)
	switch {
	case st.elem != nil:
		p.pending.Remove(st.elem)
		st.elem = nil
	case !st.lost.Load():
		p.authed--
	}
	p.countLocked()
	p.mu.Unlock()
	st.Close()
}

func (p *Places) countLocked() {
	p.metrics.Open.Set(float64(p.authed + p.pending.Len()))
	p.metrics.Pending.Set(float64(p.pending.Len()))
}

// Drain gives no new place from now on, wakes every blocked read
// (buffered requests are still answered), and waits until every
// connection has closed or ctx is done. A reader re-arming its idle
// deadline checks the node's draining flag after doing so, and this sets
// deadlines after the caller set it, so no read sleeps through a drain.
func (p *Places) Drain(ctx context.Context) {
	p.mu.Lock()
	p.draining = true
	for c := range p.all {
		c.SetReadDeadline(time.Now())
	}
	p.mu.Unlock()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for p.Open() > 0 {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// Open counts the open connections.
func (p *Places) Open() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.all)
}

// CloseAll closes every open connection.
func (p *Places) CloseAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.all {
		c.Close()
	}
}

package node

import (
	"container/list"
	"net"
	"sync/atomic"
	"time"

	"github.com/fcap-io/fcap/proto"
)

// The places of data-plane connections. MaxConns bounds them all; of
// those, at most MaxPendingConns may be held by connections that have not
// authenticated. A new connection that finds either bound reached with
// unauthenticated connections waiting takes the place of the oldest of
// them, which is told it is overloaded and closed: connections that open
// and say nothing (a flood, a scan, half-open sockets) cannot keep a new
// client out, only make it race their arrival rate, and authenticated
// connections are never displaced.

// connState is the node's record of one data-plane connection.
type connState struct {
	c net.Conn
	// elem is the connection's place in Node.pending while it has not
	// authenticated, nil once it has or lost its place; guarded by
	// Node.connMu.
	elem *list.Element
	// lost is set when a newer connection took the connection's place;
	// its reader, woken by a past read deadline, says so and closes.
	lost atomic.Bool
}

// pendingLimit is MaxPendingConns, or a quarter of MaxConns for 0.
func (n *Node) pendingLimit() int {
	if n.cfg.MaxPendingConns > 0 {
		return n.cfg.MaxPendingConns
	}
	return max(1, n.cfg.MaxConns/4)
}

// track gives a new connection a place, as unauthenticated, taking the
// oldest unauthenticated connection's if needed; it returns nil when the
// node is draining or every place is held by an authenticated
// connection.
func (n *Node) track(c net.Conn) *connState {
	n.connMu.Lock()
	defer n.connMu.Unlock()
	if n.draining.Load() {
		return nil
	}
	for n.pending.Len() > 0 && (n.pending.Len() >= n.pendingLimit() || n.authed+n.pending.Len() >= n.cfg.MaxConns) {
		n.evictOldestLocked()
	}
	if n.authed+n.pending.Len() >= n.cfg.MaxConns {
		return nil
	}
	st := &connState{c: c}
	st.elem = n.pending.PushBack(st)
	n.conns[c] = st
	n.countLocked()
	return st
}

// evictOldestLocked takes the place of the oldest unauthenticated
// connection and wakes its reader, which tells it why and closes it.
func (n *Node) evictOldestLocked() {
	st := n.pending.Remove(n.pending.Front()).(*connState)
	st.elem = nil
	st.lost.Store(true)
	st.c.SetReadDeadline(time.Now())
	n.metrics.evictedConns.Inc()
}

// promote moves an authenticated connection out of the pending ones. It
// reports false if the connection lost its place before.
func (n *Node) promote(st *connState) bool {
	n.connMu.Lock()
	defer n.connMu.Unlock()
	if st.elem == nil {
		return false
	}
	n.pending.Remove(st.elem)
	st.elem = nil
	n.authed++

	n.countLocked()
	return true
}

func (n *Node) untrack(st *connState) {
	n.connMu.Lock()
	delete(n.conns, st.c)
	switch {
	case st.elem != nil:
		n.pending.Remove(st.elem)
		st.elem = nil
	case !st.lost.Load():
		n.authed--
	}
	n.countLocked()
	n.connMu.Unlock()
	st.c.Close()
}

func (n *Node) countLocked() {
	n.metrics.conns.Set(float64(n.authed + n.pending.Len()))
	n.metrics.pendingConns.Set(float64(n.pending.Len()))
}

// evictedMessage tells a connection why it lost its place.
const evictedMessage = "too many connections waiting to authenticate: closed for a newer one"

// evicted reports whether the connection lost its place to a newer one,
// after telling it so. A reader checks it after setting a read deadline,
// which could otherwise push back the one that woke it.
func (n *Node) evicted(st *connState) bool {
	if !st.lost.Load() {
		return false
	}
	n.say(st.c, proto.CodeOverloaded, evictedMessage)
	return true
}

// refuse tells a connection past the limit why it is closed.
func (n *Node) refuse(c net.Conn) {
	defer c.Close()
	if n.draining.Load() {
		n.say(c, proto.CodeShuttingDown, "node is shutting down")
		return
	}
	n.say(c, proto.CodeOverloaded, "too many connections")
}

// say writes one Error frame, giving up after a second.
func (n *Node) say(c net.Conn, code proto.Code, msg string) {
	c.SetWriteDeadline(time.Now().Add(time.Second))
	e := &proto.Error{Code: code, Message: msg, Epoch: n.view.Load().ring.Epoch()}
	if b, err := proto.AppendFrame(nil, 0, e); err == nil {
		c.Write(b)
	}
}

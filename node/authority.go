package node

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/fcap-io/fcap/node/metrics"
	"github.com/fcap-io/fcap/node/quorum"
	"github.com/fcap-io/fcap/node/security"
	"github.com/fcap-io/fcap/proto"
	"github.com/fcap-io/fcap/ring"
)

// Strict authority (ARCHITECTURE.md, "Strict caps under partitions"). A
// strict write is granted only while
//
//   - this node holds a majority of the cluster's member set: its ring
//     confirmed by a majority within the lease (node/quorum), failed
//     members counted until they return or are forgotten (node/gossip);
//   - the viewer's partition was not claimed without any holder's copy
//     (replication.Replicator.Claimed);
//   - every backup acknowledged it from the same ring (replication's
//     ErrOtherRing).
//
// Soft caps ignore all three: they stay available on every side.

// startQuorum starts the node's quorum tracker, once its membership is up.
func (n *Node) startQuorum() {
	cfg := n.cfg.Quorum
	cfg.Self, cfg.Logger = n.cfg.Name, n.log
	cfg.Reacquire = func() {
		n.metrics.Reacquired.Inc()
		n.repl.Reacquire()
	}
	// Claims ask for copies only under the quorum: a heal's asks wait
	// for it, and went out at the next pull tick, up to a second later.
	cfg.Gained = n.repl.Kick
	q := quorum.New(cfg, n.membership(), quorumDialer{n})
	n.quorum.Store(q)
	q.Update()
}

// updateQuorum follows a ring change or a forget.
func (n *Node) updateQuorum() {
	if q := n.quorum.Load(); q != nil {
		q.Update()
	}
}

// onForget follows an operator's forget of a failed member: the member
// set shrinks and, once no failed member is left to hold them,
// partitions claimed for want of their holders are taken as whole.
func (n *Node) onForget(string) {
	n.updateQuorum()
	if n.membership().NumFailed() == 0 {
		n.repl.Unclaim()
	}
}

// absentMemory is how long this node tells a peer it routed without it
// (Pong.Absent) after the ring change that dropped it.
const absentMemory = time.Minute

// absence remembers which members this node's rings dropped, and when.
// A node that started less than absentMemory ago does not know what its
// earlier self dropped, so it says every member may have been absent.
type absence struct {
	started time.Time

	mu sync.Mutex
	// dropped is guarded by mu: when each member was last dropped.
	dropped map[string]time.Time
}

// ringChanged notes the members of old that cur lacks.
func (a *absence) ringChanged(old, cur *ring.Ring, now time.Time) {
	if old == nil || cur == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, m := range old.Members() {
		if _, in := cur.Find(m.Name); !in {
			if a.dropped == nil {
				a.dropped = map[string]time.Time{}
			}
			a.dropped[m.Name] = now
		}
	}
	for name, at := range a.dropped {
		if now.Sub(at) > absentMemory {
			delete(a.dropped, name)
		}
	}
}

// was reports whether a ring of this node dropped name within
// absentMemory.
func (a *absence) was(name string, now time.Time) bool {
	if now.Sub(a.started) <= absentMemory {
		return true
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	at, ok := a.dropped[name]
	return ok && now.Sub(at) <= absentMemory
}

// quorumDialer dials peers for the tracker's Pings as replication does.
type quorumDialer struct{ n *Node }

func (d quorumDialer) Dial(ctx context.Context, addr string) (quorum.Conn, error) {
	return d.n.peers.Dial(ctx, addr)
}

// authority returns the code to refuse a strict write to partition p
// under view v with, counted by reason, or 0 when it may be granted.
func (h *handler) authority(v *view, p int) proto.Code {
	q := h.n.quorum.Load()
	switch {
	case q == nil || !q.Holds(v.ring.Epoch()):
		h.n.metrics.StrictRefused.WithLabelValues("no_quorum").Inc()
		h.refusal = "this node does not hold a majority of the cluster's member set (a partition, or failed members not forgotten): strict caps fail closed"
		return proto.CodeNoQuorum
	case h.n.repl.Claimed(p):
		h.n.metrics.StrictRefused.WithLabelValues("no_holder").Inc()
		h.refusal = "the viewer's partition was claimed without any holder's copy: strict caps fail closed until a holder is back or an operator forgets it"
		return proto.CodeNoQuorum
	}
	return 0
}

// authorityState is the node's standing for strict writes, for status
// and metrics.
func (n *Node) authorityState() metrics.Authority {
	var a metrics.Authority
	if q := n.quorum.Load(); q != nil {
		st := q.State()
		a.Holds, a.Members, a.Confirmed = st.Holds() && q.Holds(st.Epoch), st.Members, st.Confirmed
	}
	if m := n.membership(); m != nil {
		a.Failed = m.NumFailed()
	}
	a.Claimed = n.repl.NumClaimed()
	return a
}

// Forget drops a failed member from the member set (fcapctl forget); the
// forget spreads with gossip. It refuses a member this node reaches.
func (n *Node) Forget(name string) (failed int, err error) {
	m := n.membership()
	if err := m.Forget(name); err != nil {
		return 0, fmt.Errorf("%w: %v", proto.ErrBadRequest, err)
	}
	return m.NumFailed(), nil
}

func (h *handler) forget(out []byte, v *view, hdr proto.Header, body []byte) ([]byte, metrics.Op, metrics.Outcome) {
	var m proto.Forget
	if err := proto.Decode(body, &m); err != nil {
		return h.failErr(out, hdr, err, v.ring.Epoch(), metrics.OpForget)
	}
	if m.Node == "" {
		return h.failErr(out, hdr, fmt.Errorf("%w: forget: empty node name", proto.ErrBadRequest), v.ring.Epoch(), metrics.OpForget)
	}
	failed, err := h.n.Forget(m.Node)
	if err != nil {
		return h.failErr(out, hdr, err, v.ring.Epoch(), metrics.OpForget)
	}
	return h.reply(out, hdr.ID, &proto.ForgetResult{Failed: uint64(failed)}, metrics.OpForget)
}

// Authority reports whether this node may grant strict writes now: it
// holds a majority of the member set for the ring it routes by.
func (n *Node) Authority() bool {
	q := n.quorum.Load()
	return q != nil && q.Holds(n.view.Load().ring.Epoch())
}

// authorityNotes describes, one line each, the failed members and a lost
// majority: nothing when all is well.
func (n *Node) authorityNotes() string {
	var b strings.Builder
	for _, f := range n.membership().Failed() {
		fmt.Fprintf(&b, "failed member: %s (%s) since %s\n", f.Name, f.Addr, f.Since.UTC().Format(time.RFC3339))
	}
	if q := n.quorum.Load(); q != nil && !n.Authority() {
		st := q.State()
		fmt.Fprintf(&b, "strict caps fail closed: %d of %d members confirm this node's ring, %d needed\n", st.Confirmed, st.Members, st.Needed)
	}
	return b.String()
}

// inflight counts, per viewer, the strict grants applied and not yet
// acknowledged by the backups (or taken back). A strict Allow refused
// while one is in flight answers CodeOverloaded rather than a refusal:
// the count that refused it may hold a grant that is then taken back, and
// a refusal must only read what stays (the partition suite checks strict
// histories for linearizability).
type inflight struct {
	mu sync.Mutex
	// n is guarded by mu: grants in flight by viewer key.
	n map[uint64]int
}

func (f *inflight) add(key uint64) {
	f.mu.Lock()
	if f.n == nil {
		f.n = map[uint64]int{}
	}
	f.n[key]++
	f.mu.Unlock()
}

func (f *inflight) done(key uint64) {
	f.mu.Lock()
	if f.n[key] <= 1 {
		delete(f.n, key)
	} else {
		f.n[key]--
	}
	f.mu.Unlock()
}

func (f *inflight) has(key uint64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n[key] > 0
}

// errStrictInFlight answers a strict Allow refused while another grant of
// its viewer waits for its backups: the client asks again.
var errStrictInFlight = fmt.Errorf("%w: refused while another strict grant of this viewer waits for its backups; ask again", proto.ErrOverloaded)

// peerPing reports whether a Ping naming from may ask for the quorum: from
// is a member of the ring, and the connection is a peer's (or an
// operator's, or the node takes no tokens). A client cannot make the node
// promise an epoch (quorum.Promises) or grow what it remembers.
func (h *handler) peerPing(v *view, from string) bool {
	if _, in := v.ring.Find(from); !in {
		return false
	}
	return !h.n.tokens.Required() || h.role == security.RolePeer || h.role == security.RoleOperator
}

// releaseLeft drops the quorum promises to members of old that cur lacks
// and that are not failed: they left by a drain (quorum.Promises.Release).
func (n *Node) releaseLeft(old, cur *ring.Ring) {
	m := n.membership()
	if old == nil || cur == nil || m == nil {
		return
	}
	failed := map[string]bool{}
	for _, f := range m.Failed() {
		failed[f.Name] = true
	}
	for _, mem := range old.Members() {
		if _, in := cur.Find(mem.Name); !in && !failed[mem.Name] {
			n.promises.Release(mem.Name)
		}
	}
}

// resync asks again, under the ring the node routes by now, for the
// backups to acknowledge a strict grant whose first acknowledgement came
// from another ring (a drain or a join moved the rings meanwhile). The
// grant is in this node's copy; if this node is still the viewer's
// primary and holds the quorum for the new ring, the new ring's backups
// applying it make it as good as a grant made under that ring. Otherwise
// the first error stands: the grant is taken back (revoke), on this copy
// and, by its tag's void mark, on every copy that applied it.
func (h *handler) resync(viewer string, key uint64, deadline time.Time, first error) error {
	cur := h.n.view.Load()
	q := h.n.quorum.Load()
	if cur == nil || q == nil || !cur.owns(viewer) || !q.Holds(cur.ring.Epoch()) {
		return first
	}
	return h.syncKey(cur, key, partitionOf(cur, viewer), deadline)
}

// Claimed counts the partitions this node serves claimed without any
// holder's copy (strict caps fail closed on them; rule 4 of "Strict caps
// under partitions"). A young cluster's claims end within a pull round
// once it holds the quorum.
func (n *Node) Claimed() int { return n.repl.NumClaimed() }

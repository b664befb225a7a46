package replication

import "time"

// What the node's tests (and status) may ask of the partitions and the
// senders, without reaching into them.

// Partitions returns the number of partitions tracked.
func (r *Replicator) Partitions() int { return len(r.parts) }

// Holds reports whether this node holds partition p's complete state.
func (r *Replicator) Holds(p int) bool { return r.parts[p].have.Load() }

// Pushing counts the whole transfers of partition p this node is sending.
func (r *Replicator) Pushing(p int) int { return int(r.parts[p].pushing.Load()) }

// Await marks partition p as awaited since the given time, as a ring
// change that makes this node an owner of p does.
func (r *Replicator) Await(p int, since time.Time) { r.parts[p].wait(since.UnixNano()) }

// peer returns the sender to the named member, or nil.
func (r *Replicator) peer(name string) *replica {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.replicas[name]
}

// Resend queues partition p to be sent whole to the named member again,
// as if it had stopped owning p and owned it again. It reports false when
// this node has no sender to that member.
func (r *Replicator) Resend(name string, p int) bool {
	rep := r.peer(name)
	if rep == nil {
		return false
	}
	rep.forget(p)
	rep.transfer(p)
	return true
}

// Sending reports whether a whole transfer of p to the named member is
// under way: dequeued by its sender and not finished.
func (r *Replicator) Sending(name string, p int) bool {
	rep := r.peer(name)
	if rep == nil {
		return false
	}
	rep.mu.Lock()
	defer rep.mu.Unlock()
	return len(rep.transfers) == 0 && rep.queued[p]
}

// Sent reports whether the named member received partition p whole.
func (r *Replicator) Sent(name string, p int) bool {
	rep := r.peer(name)
	return rep != nil && rep.hasSent(p)
}

// AwaitHandoff marks partition p as awaiting its hand-over from the named
// member since the given time, as a ring change that makes this node p's
// primary after that member does.
func (r *Replicator) AwaitHandoff(p int, from string, since time.Time) {
	r.parts[p].from.Store(&from)
	r.parts[p].wait(since.UnixNano())
}

// ReceiveHandoff takes partition p's hand-over marker from the named
// member, as if it had arrived over the wire.
func (r *Replicator) ReceiveHandoff(from string, p int) {
	r.received(from, 0, nil, []uint32{uint32(p)})
}

// WasPrimary reports whether this node has been p's primary in a ring
// since it started.
func (r *Replicator) WasPrimary(p int) bool { return r.parts[p].wasPrimary.Load() }

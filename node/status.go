package node

import (
	"fmt"

	"github.com/fcap-io/fcap/proto"
	"github.com/fcap-io/fcap/ring"
)

// applyReplicate imports the viewer states a peer sent. A state is
// refused when this node is the primary owner of its partition and holds
// it: the sender's ring is behind and its state may be older than what
// this node has since acknowledged.
func (n *Node) applyReplicate(v *view, m *proto.Replicate) (proto.ReplicateResult, error) {
	var res proto.ReplicateResult
	P := v.ring.Partitions()
	accept := func(key uint64) bool {
		p := ring.PartitionOf(key, P)
		o := v.ring.Owners(p)
		primary := v.in && len(o) > 0 && o[0] == v.self
		return !(primary && n.repl.parts[p].have.Load() && !n.left.Load())
	}
	n.engine.Observe(m.HighWater)
	states := m.States
	var logged uint64
	defer func() { n.waitLogged(logged) }() // the sender learns it applied once it is durable here
	for len(states) > 0 {
		key, used, applied, err := n.engine.ImportIf(states, accept)
		if err != nil {
			return res, fmt.Errorf("%w: from %s: %v", proto.ErrBadRequest, m.From, err)
		}
		if applied {
			res.Applied++
			if seq := n.logChange(key); seq != 0 {
				logged = seq
			}
		} else {
			res.Refused++
			n.log.Debug("partition: refused a stale state", "from", m.From)
		}
		states = states[used:]
	}
	n.repl.received(m.From, m.Done, m.Handoff)
	return res, nil
}

// status describes this node for operators.
func (n *Node) status() *proto.Status {
	v := n.view.Load()
	st := n.engine.Stats()
	q, _ := n.repl.queued()
	s := &proto.Status{
		Name:             n.cfg.Name,
		Epoch:            v.ring.Epoch(),
		State:            uint8(n.members.Self().State),
		Viewers:          uint64(st.Viewers),
		Keys:             uint64(st.Keys),
		Bytes:            uint64(max(st.Bytes, 0)),
		Handing:          uint64(n.repl.handing()),
		ReplicationQueue: uint64(q),
		UnderReplicated:  uint64(n.repl.underReplicated()),
		Members:          uint64(len(v.ring.Members())),
	}
	if v.in {
		for p := range v.ring.Partitions() {
			rank := v.ring.Rank(p, n.cfg.Name)
			switch {
			case rank == 0:
				s.Primaries++
			case rank > 0:
				s.Backups++
			}
			if rank >= 0 && n.repl.syncing(p) {
				s.Syncing++
			}
		}
	}
	return s
}

package node

import (
	"fmt"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/proto"
)

// applyReplicate merges the viewer states a peer sent into what this
// node holds, all or none (engine.MergeAll): a state never takes away
// what this node counted, so a push from a node whose copy is older (it
// was paused, or cut off by a gossip partition, while this one
// acknowledged writes) adds what it has and loses nothing. Even a primary
// that holds its partition merges: it may be the one whose copy is older.
func (n *Node) applyReplicate(v *view, m *proto.Replicate) (proto.ReplicateResult, error) {
	var res proto.ReplicateResult
	accept := func(uint64) bool { return true }
	// All or nothing: a message with a bad state anywhere changes nothing.
	var keys []uint64 // the viewers applied, for the log
	applied, refused, err := n.engine.MergeAll(m.States, func(key uint64) bool {
		ok := accept(key)
		if ok {
			keys = append(keys, key)
		}
		return ok
	})
	if err != nil {
		return res, fmt.Errorf("%w: from %s: %v", proto.ErrBadRequest, m.From, err)
	}
	n.metrics.time.observe(n.engine, fromReplication, m.HighWater)
	var logged uint64
	for _, key := range keys {
		if seq := n.logChange(key); seq != 0 {
			logged = seq
		}
	}
	n.waitLogged(logged) // the sender learns it applied once it is durable here
	res.Applied, res.Refused = uint64(applied), uint64(refused)
	if refused > 0 {
		n.log.Debug("partition: refused stale states", "from", m.From, "states", refused)
	}
	n.repl.received(m.From, m.Done, m.Handoff)
	return res, nil
}

// status describes this node for operators.
func (n *Node) status() *proto.Status {
	v := n.view.Load()
	st := n.engine.Stats()
	q, lag := n.repl.queued()
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
		Requests:         n.metrics.answered(),
		LagMillis:        uint64(lag.Milliseconds()),
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

// inspect copies out what the engine holds for one viewer (fcapctl keys).
func (n *Node) inspect(v *view, viewer string) *proto.ViewerState {
	res := &proto.ViewerState{}
	if v.in {
		p, _ := v.ring.Lookup(viewer)
		res.Primary = v.ring.Rank(p, n.cfg.Name) == 0
	}
	st, ok := n.engine.Viewer(viewer)
	if !ok {
		return res
	}
	res.Found = true
	res.Reservations = uint64(st.Reservations)
	res.RememberedIDs = uint64(st.RememberedIDs)
	res.LinkedTo = st.LinkedTo
	res.Devices = st.Devices
	if len(res.Devices) > proto.MaxInspectKeys {
		res.Devices = res.Devices[:proto.MaxInspectKeys]
	}
	for i, k := range st.Keys {
		if i == proto.MaxInspectKeys {
			break
		}
		ki := proto.KeyInfo{Hash: k.Hash, Algorithm: uint8(k.Algorithm), Window: k.Window, Limit: int64(k.Limit), Bucket: k.Bucket}
		switch k.Algorithm {
		case fcap.Sliding:
			ki.Values = k.Times
		default:
			ki.Values = k.Counts
		}
		if len(ki.Values) > proto.MaxInspectValues {
			ki.Values = ki.Values[len(ki.Values)-proto.MaxInspectValues:]
		}
		res.Keys = append(res.Keys, ki)
	}
	return res
}

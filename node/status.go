package node

import (
	"time"

	"github.com/fcap-io/fcap/node/buildinfo"
	"github.com/fcap-io/fcap/node/storage"
	"github.com/fcap-io/fcap/proto"
)

// status describes this node for operators.
func (n *Node) status() *proto.Status {
	v := n.view.Load()
	st := n.engine.Stats()
	q, lag := n.repl.Queued()
	s := &proto.Status{
		Name:             n.cfg.Name,
		Epoch:            v.ring.Epoch(),
		State:            uint8(n.membership().Self().State),
		Viewers:          uint64(st.Viewers),
		Keys:             uint64(st.Keys),
		Bytes:            uint64(max(st.Bytes, 0)),
		Handing:          uint64(n.repl.Handing()),
		ReplicationQueue: uint64(q),
		UnderReplicated:  uint64(n.repl.UnderReplicated()),
		Members:          uint64(len(v.ring.Members())),
		Requests:         n.metrics.Answered(),
		LagMillis:        uint64(lag.Milliseconds()),
		JoinError:        n.membership().JoinStatus().Summary(),
		Replicas:         uint64(v.ring.Replicas()),
		Drifting:         uint64(n.repl.AntiEntropy().LastRepaired),
	}
	s.Version = buildinfo.Get().Version
	s.UptimeMillis = uint64(max(n.metrics.Uptime().Milliseconds(), 0))
	s.MemoryLimit = uint64(max(st.MemoryLimit, 0))
	rc := n.metrics.Recent(time.Now())
	s.RecentMillis, s.RecentRequests, s.RecentErrors = uint64(rc.Span.Milliseconds()), rc.Requests, rc.Errors
	s.P99Nanos, s.P99Over = uint64(rc.P99.Nanoseconds()), rc.P99Over
	au := n.authorityState()
	s.Authority, s.QuorumMembers, s.QuorumConfirmed, s.Claimed = au.Holds, uint64(au.Members), uint64(au.Confirmed), uint64(au.Claimed)
	for _, f := range n.membership().Failed() {
		s.Failed = append(s.Failed, proto.FailedMember{Name: f.Name, Addr: f.Addr, SinceMillis: f.Since.UnixMilli()})
	}
	if n.shipping != nil {
		for _, r := range n.shipping.Status() {
			lent, borrowed := n.shipping.SharesMoved(r.Name)
			s.Regions = append(s.Regions, proto.RegionStatus{Name: r.Name, Reachable: r.Reachable, LagMillis: uint64(r.Lag.Milliseconds()), Queue: uint64(r.Queue), Lent: lent, Borrowed: borrowed,
				Retired: r.Retired, RetiredAtMillis: r.RetiredAt})
		}
	}
	for _, d := range n.membership().Departed(proto.MaxMembers) {
		s.Departed = append(s.Departed, proto.DepartedMember{Name: d.Name, AtMillis: d.At.UnixMilli(), Forgotten: d.Forgotten})
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
			if rank >= 0 && n.repl.Syncing(p) {
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
	storage.Inspect(n.engine, viewer, res)
	return res
}

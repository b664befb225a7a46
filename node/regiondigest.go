package node

import (
	"github.com/fcap-io/fcap/node/metrics"
	"github.com/fcap-io/fcap/node/region"
	"github.com/fcap-io/fcap/proto"
)

// regionDigest answers a RegionDigest: a node of another region (the
// origin) asks for the digests of its lane of the viewers of one
// partition (or one slice of them) this node is the primary of, to ship
// again only those that differ (node/region/digest.go). The digest of a
// viewer covers the lane counters whose cap keys the origin named
// (engine.LaneDigest). One runs at a time on a node (another is refused
// as overloaded): finding a partition's viewers is a pass over the
// engine's, kept by partition for the next requests (region.ServeDigest).
// A node whose
// ring has another partition count refuses: its partitions hold other
// viewers, and the origin falls back to shipping whole.
func (h *handler) regionDigest(out []byte, v *view, hdr proto.Header, body []byte) ([]byte, metrics.Op, metrics.Outcome) {
	var m proto.RegionDigest
	epoch := v.ring.Epoch()
	if err := proto.Decode(body, &m); err != nil {
		return h.failErr(out, hdr, err, epoch, metrics.OpVerify)
	}
	rl := h.n.region
	switch {
	case rl == nil:
		return h.failErr(out, hdr, refusal(proto.CodeBadRequest, "this node has no region (--region): it holds no region's lane"), epoch, metrics.OpVerify)
	case region.ValidName(m.Origin) != nil || m.Origin == rl.Name():
		return h.failErr(out, hdr, refusal(proto.CodeBadRequest, "region digest for region %q: not a peer region's name", m.Origin), epoch, metrics.OpVerify)
	case int(m.Partitions) != v.ring.Partitions():
		return h.failErr(out, hdr, refusal(proto.CodeBadRequest, "region digest of partition %d of %d: this region's ring has %d partitions, viewers are partitioned apart", m.Partition, m.Partitions, v.ring.Partitions()), epoch, metrics.OpVerify)
	}
	if h.n.left.Load() || !v.in || h.n.repl.Syncing(int(m.Partition)) {
		return h.notOwner(out, hdr, epoch, metrics.OpVerify)
	}
	if owners := v.ring.Owners(int(m.Partition)); len(owners) == 0 || owners[0] != v.self {
		return h.notOwner(out, hdr, epoch, metrics.OpVerify)
	}
	release, ok := rl.DigestSlot()
	if !ok {
		return h.failErr(out, hdr, refusal(proto.CodeOverloaded, "a region digest is already running on this node"), epoch, metrics.OpVerify)
	}
	defer release()
	res := rl.ServeDigest(&m, epoch, h.n.engine.PartitionKeys, func() []int { return v.ring.OwnedBy(h.n.cfg.Name, 0) }, func(key uint64) uint64 {
		return h.n.engine.LaneDigest(key, m.Origin, m.Now, m.HasKey)
	})
	return h.reply(out, hdr.ID, res, metrics.OpVerify)
}

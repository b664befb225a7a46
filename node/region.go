package node

import (
	"context"
	"fmt"

	"github.com/fcap-io/fcap/node/engine"
	"github.com/fcap-io/fcap/node/metrics"
	"github.com/fcap-io/fcap/node/peers"
	"github.com/fcap-io/fcap/node/region"
	"github.com/fcap-io/fcap/proto"
	"github.com/fcap-io/fcap/ring"
)

// The region links (ARCHITECTURE.md, "Regions"). A node with a region
// name takes RegionMerges from other regions' nodes; one with peer
// regions also ships its soft changes to them: after a write changes a
// viewer, mark (writes.go) and wrote (crossdevice.go) queue it on every
// link with a non-blocking call. A node of a single region has neither:
// the write path pays one nil check.

// startRegions makes the node's region links from its config: none
// without a region name.
func (n *Node) startRegions() error {
	cfg := n.cfg.Region
	if cfg.Name == "" {
		return nil
	}
	for _, p := range cfg.Peers {
		if err := n.engine.AddRegion(p.Name); err != nil { // checks count the peers' lanes
			return fmt.Errorf("region links: %w", err)
		}
	}
	ls, err := region.New(cfg, region.Deps{
		Engine:            localStates{n.engine},
		Dialer:            regionDialer{n.peers},
		Primary:           n.primaryOf,
		PrimaryPartitions: n.primaryPartitions,
		Registerer:        n.cfg.Registerer,
		Logger:            n.log,
	})
	if err != nil {
		return fmt.Errorf("region links: %w", err)
	}
	n.region = ls
	if cfg.Enabled() {
		n.shipping = ls
		if err := n.startEscrow(ls); err != nil {
			return fmt.Errorf("region links: %w", err)
		}
		if err := n.loadRetired(); err != nil {
			return fmt.Errorf("region links: %w", err)
		}
		n.log.Info("region links: soft changes are shipped to the peer regions; strict caps are split among the regions (escrow)",
			"region", cfg.Name, "regions", cfg.Regions())
	}
	return nil
}

// shipSoft queues a changed viewer for the peer regions, unless the
// write was strict: each region grants a strict cap from its own share
// of the limit (escrow, node/escrow.go), and only its own grants count
// against that share, so strict grants need not travel. (A strict counter of a viewer still rides along with a later soft
// change of it, whose state goes whole; in a peer region it lands in a
// lane, which strict caps do not read.)
func shipSoft(r *region.Links, wr *write) {
	if wr.local || strict(wr.caps) {
		return
	}
	r.Mark(wr.eng.Key)
}

// primaryOf reports whether this node is the primary owner of the viewer
// with key now (a digest catch-up compares those).
func (n *Node) primaryOf(key uint64) bool {
	v := n.view.Load()
	_, owners := v.ring.LookupKey(key)
	return v.in && len(owners) > 0 && owners[0] == v.self
}

// primaryPartitions returns the partition count of the node's ring and
// the partitions it is primary of now (a digest catch-up compares them).
func (n *Node) primaryPartitions() (int, []int) {
	v := n.view.Load()
	if v == nil || v.ring == nil {
		return 0, nil
	}
	if !v.in {
		return v.ring.Partitions(), nil
	}
	return v.ring.Partitions(), v.ring.OwnedBy(n.cfg.Name, 0)
}

// catchUpRegions runs, once the node serves, a digest catch-up of every
// partition it is primary of with the peer regions, when it started
// from a data dir: its queues were not kept, so changes acknowledged
// before the restart may not have been shipped.
func (n *Node) catchUpRegions() {
	if n.shipping != nil && n.durable != nil {
		n.shipping.CatchUp()
	}
}

// catchUpInherited runs a digest catch-up with the peer regions when
// this node became the primary of partitions whose primary left the
// ring, failed or drained: the changes that primary had queued for the
// peer regions and not shipped (a peer unreachable, a crash) left with
// it, and the periodic round may be minutes away (DigestInterval). Its
// replicated copy, here, has them: the round compares it with what
// each peer region holds and ships the viewers that differ. A hand-over
// to a new member needs none: its old primary stays and ships its
// queue.
func (n *Node) catchUpInherited(old, cur *ring.Ring) {
	if n.shipping == nil || old == nil || old.Partitions() != cur.Partitions() {
		return
	}
	for _, p := range cur.OwnedBy(n.cfg.Name, 0) {
		prev, ok := old.Owner(p)
		if !ok || prev.Name == n.cfg.Name {
			continue
		}
		if _, in := cur.Find(prev.Name); !in {
			n.log.Info("region: primary of partitions whose primary left; digest catch-up with the peer regions", "partition", p, "left", prev.Name)
			n.shipping.CatchUp()
			return
		}
	}
}

// regionMerge answers a RegionMerge: another region's node sends the
// states of viewers this node is the primary owner of. Each is merged
// into the viewer's lane of the sending region (engine/lane.go: never
// united with this region's counters or another region's), logged and
// marked for this node's backups, and never shipped on to other regions. States of
// viewers this node does not serve now are refused by key: the sender
// learns the ring again and sends them to their owner.
func (h *handler) regionMerge(out []byte, v *view, hdr proto.Header, body []byte) ([]byte, metrics.Op, metrics.Outcome) {
	var m proto.RegionMerge
	epoch := v.ring.Epoch()
	if err := proto.Decode(body, &m); err != nil {
		return h.failErr(out, hdr, err, epoch, metrics.OpReplicate)
	}
	rl := h.n.region
	switch {
	case rl == nil:
		return h.failErr(out, hdr, refusal(proto.CodeBadRequest, "this node has no region (--region): it takes no region merge"), epoch, metrics.OpReplicate)
	case region.ValidName(m.Region) != nil:
		return h.failErr(out, hdr, refusal(proto.CodeBadRequest, "region merge from a bad region name %q", m.Region), epoch, metrics.OpReplicate)
	case m.Region == rl.Name():
		return h.failErr(out, hdr, refusal(proto.CodeBadRequest, "region merge from this node's own region %q: two clusters share a region name", m.Region), epoch, metrics.OpReplicate)
	}
	if err := rl.CheckFrom(m.Region); err != nil { // retired here (retire.go)
		return h.failErr(out, hdr, refusal(proto.CodeBadRequest, "%v", err), epoch, metrics.OpReplicate)
	}
	res := &proto.RegionMergeResult{}
	var keys []uint64
	wv := h.enter()
	applied, _, err := h.n.engine.MergeRegionAll(m.States, m.Region, func(key uint64) bool {
		if !h.servesKey(wv, key) {
			res.Refused = append(res.Refused, key)
			return false
		}
		keys = append(keys, key)
		return true
	})
	var seq uint64
	for _, key := range keys {
		wv.plan.Mark(key)
		seq = max(seq, h.n.logChange(key))
	}
	h.leave(wv)
	if err != nil {
		return h.failErr(out, hdr, fmt.Errorf("%w: region merge from %s: %v", proto.ErrBadRequest, m.Region, err), epoch, metrics.OpReplicate)
	}
	h.n.metrics.Time.Observe(h.n.engine, metrics.FromReplication, m.HighWater)
	rl.Received(m.Region, applied)
	h.n.waitLogged(seq)
	res.Epoch, res.Applied = epoch, uint64(applied)
	return h.reply(out, hdr.ID, res, metrics.OpReplicate)
}

// servesKey is serves for a viewer key.
func (h *handler) servesKey(v *view, key uint64) bool {
	if h.n.left.Load() || !v.in {
		return false
	}
	p, owners := v.ring.LookupKey(key)
	return len(owners) > 0 && owners[0] == v.self && !h.n.repl.Syncing(p)
}

// localStates is the engine as the links read it: what they export of a
// viewer is its own counters, never the lanes other regions shipped.
type localStates struct{ *engine.Engine }

func (l localStates) Export(key uint64, dst []byte) []byte { return l.ExportLocal(key, dst) }

// regionDialer dials peer regions' nodes as this node dials its peers:
// peer TLS and the peer token.
type regionDialer struct{ p *peers.Peers }

func (d regionDialer) Dial(ctx context.Context, addr string) (region.Conn, error) {
	c, err := d.p.Dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	return c, nil
}

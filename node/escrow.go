package node

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/node/engine"
	"github.com/fcap-io/fcap/node/metrics"
	"github.com/fcap-io/fcap/node/region"
	"github.com/fcap-io/fcap/proto"
)

// Escrowed strict caps across regions (ARCHITECTURE.md, "Regions",
// "Strict caps: escrow"). With peer regions, every Allow, Reserve and
// Check judges its strict caps against this region's share (the engine's
// Config.Shares, set at Start); one refused because the share is spent
// fails closed at once and asks the peer regions for a unit, apart from
// the request (region.Links.Ask). A peer region's ask is answered by
// shareAsk: a unit lent from this region's base, recorded and
// replicated before the answer. The unit a peer lends is credited by
// creditShare, replicated the same way. Without peer regions none of
// this runs: n.shares is nil.

// sharesOf is the place of cfg's region among the regions that split
// strict caps: the engine judges strict caps by it (engine.Config.Shares).
func sharesOf(cfg region.Config) *engine.Shares {
	names := cfg.Regions()
	return &engine.Shares{Index: slices.Index(names, cfg.Name), Regions: len(names), Tag: engine.ShareTag(cfg.Name)}
}

// startEscrow starts the askers.
func (n *Node) startEscrow(ls *region.Links) error {
	return ls.EnableEscrow(region.EscrowDeps{Now: n.clock, Credit: n.creditShare}, n.cfg.Registerer)
}

// shareSpent counts a strict write refused because this region's share
// of c is spent, and asks the peer regions for a unit.
func (h *handler) shareSpent(viewer string, c *fcap.Cap) {
	h.n.metrics.StrictRefused.WithLabelValues("share_spent").Inc()
	if r := h.n.region; r != nil {
		r.Ask(strings.Clone(viewer), cloneCaps([]fcap.Cap{*c})[0])
	}
}

// shareAsk answers a peer region's ShareAsk: one unit of this region's
// base share of a strict cap, lent if unused, recorded under the
// transfer id and replicated to the viewer's backups before the answer.
// A retried transfer finds its loan and is answered with it (after the
// loan is on the backups, which the first attempt may not have seen).
func (h *handler) shareAsk(out []byte, v *view, hdr proto.Header, body []byte) ([]byte, metrics.Op, metrics.Outcome) {
	var m proto.ShareAsk
	epoch := v.ring.Epoch()
	if err := proto.Decode(body, &m); err != nil {
		return h.failErr(out, hdr, err, epoch, metrics.OpReplicate)
	}
	rl := h.n.region
	switch {
	case rl == nil || h.n.shares == nil:
		return h.failErr(out, hdr, refusal(proto.CodeBadRequest, "this node has no peer regions: it lends no share"), epoch, metrics.OpReplicate)
	case region.ValidName(m.Region) != nil || m.Region == rl.Name():
		return h.failErr(out, hdr, refusal(proto.CodeBadRequest, "share ask from region %q: not a peer region's name", m.Region), epoch, metrics.OpReplicate)
	}
	if err := rl.CheckRegions(m.Region, m.Regions); err != nil {
		return h.failErr(out, hdr, refusal(proto.CodeBadRequest, "%v", err), epoch, metrics.OpReplicate)
	}
	caps := []fcap.Cap{m.Cap}
	wr := &write{}
	if code := h.begin(wr, m.Viewer, false, caps); code != 0 {
		return h.refuse(out, hdr, code, epoch, metrics.OpReplicate)
	}
	wr.local = true
	lent, err := h.n.engine.LendWrite(&wr.eng, m.Viewer, m.Cap, h.n.clock(), m.Transfer)
	wv, key, p := wr.v, fcap.ViewerKey(m.Viewer), partitionOf(wr.v, m.Viewer)
	if lent && !wr.eng.Changed {
		wv.plan.Mark(key) // a retry: the loan goes to the backups again
	}
	seq := h.commit(wr)
	if err != nil {
		return h.failErr(out, hdr, fmt.Errorf("%w: share ask: %w", proto.ErrBadRequest, err), epoch, metrics.OpReplicate)
	}
	if lent {
		h.n.waitLogged(seq)
		if err := h.syncKey(wv, key, p, time.Time{}); err != nil {
			// The loan stays: the lender grants less until it ages out,
			// and a retry of the transfer is answered with it.
			return h.failErr(out, hdr, err, epoch, metrics.OpReplicate)
		}
		if wr.eng.Changed {
			rl.Lent(m.Region)
		}
	}
	return h.reply(out, hdr.ID, &proto.ShareGive{Epoch: epoch, Given: lent}, metrics.OpReplicate)
}

// regionSet refuses a peer region's TopologyRequest that names another
// set of regions than this node splits strict caps among: its link stays
// down (logged and counted) until the configurations agree. A node that
// splits nothing refuses every region link too: one with a region name
// but no peers (receive-only), or with no region at all, grants strict
// caps whole, while the sender counts it as a region holding one share
// of each limit and grants the rest: together they would pass it.
func (h *handler) regionSet(body []byte) error {
	var m proto.TopologyRequest
	if err := proto.Decode(body, &m); err != nil {
		return err
	}
	if len(m.Regions) == 0 { // a client's request, or a link that splits nothing
		return nil
	}
	rl := h.n.region
	if rl == nil {
		h.n.log.Error("region: a peer region's link reached this node, which has no region (--region); it is refused", "peer_region", m.Region, "its_regions", m.Regions)
		return refusal(proto.CodeBadRequest, "region %s splits strict caps among %v, but this cluster names no region (--region): it would grant strict caps whole", m.Region, m.Regions)
	}
	if err := rl.CheckRegions(m.Region, m.Regions); err != nil {
		return refusal(proto.CodeBadRequest, "%v", err)
	}
	return nil
}

// errNotCredited refuses a credit this node cannot take (it no longer
// serves the viewer, or has no strict authority).
var errNotCredited = errors.New("node: a lent share could not be credited here")

// creditShare records the unit a peer region lent this region for
// transfer, stamped at (when the ask began), and waits for the viewer's
// backups to hold it: until then no grant may use it, and a failover
// that lost it only grants less.
func (n *Node) creditShare(ctx context.Context, viewer string, c fcap.Cap, at int64, transfer uint64) error {
	h := newHandler(n)
	wr := &write{}
	if code := h.begin(wr, viewer, false, []fcap.Cap{c}); code != 0 {
		return fmt.Errorf("%w: code %v", errNotCredited, code)
	}
	wr.local = true
	credited, err := n.engine.CreditWrite(&wr.eng, viewer, c, at, transfer)
	wv, key, p := wr.v, wr.eng.Key, wr.partition()
	seq := h.commit(wr)
	if err != nil || !credited {
		return err
	}
	n.waitLogged(seq)
	deadline, _ := ctx.Deadline()
	return h.syncKey(wv, key, p, deadline)
}

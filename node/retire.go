package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/fcap-io/fcap/node/gossip"
	"github.com/fcap-io/fcap/node/metrics"
	"github.com/fcap-io/fcap/node/region"
	"github.com/fcap-io/fcap/proto"
)

// Retiring a peer region lost for good (ARCHITECTURE.md, "Strict caps:
// escrow", "Reclaim"; fcapctl region retire). An operator's RetireRegion
// reaches one node (fcapctl sends it to every member); the node stops
// its link to the region (region.Links.Retire), marks it retired in the
// engine's shares as of its clock, T0 (the retired region's base units
// go to the remaining regions from T0+2W on, per cap), writes the set of
// retired regions to its data dir, and records it in gossip, whose
// push-pull brings it to the other nodes; each applies it as of its own
// clock (onRetireRegion). A node without a data dir forgets its retires
// when it restarts: it learns them again from the others, or, after a
// restart of the whole region, the operator retires the region again.
// Either way the new T0 is later than the first: the switch comes later,
// fewer grants meanwhile, never more.

// retiredFile is the data dir's file of the retired regions.
const retiredFile = "retired-regions.json"

// retiredEntry is one retired region in retiredFile.
type retiredEntry struct {
	Region string `json:"region"`
	AtMs   int64  `json:"at_ms"`
}

// RetireRegion retires the peer region name as of the node's clock (or
// returns the first retire's time when it is retired already), unless
// it is not a peer region, or, without force, the node's link reaches
// it now.
func (n *Node) RetireRegion(name string, force bool) (at int64, first bool, err error) {
	ls := n.region
	switch {
	case ls == nil || n.shares == nil:
		return 0, false, fmt.Errorf("%w: this node has no peer regions: there is no region to retire", proto.ErrBadRequest)
	case name == ls.Name():
		return 0, false, fmt.Errorf("%w: %q is this node's own region: retire a region from the regions that remain", proto.ErrBadRequest, name)
	}
	n.retireMu.Lock()
	defer n.retireMu.Unlock()
	at, first, err = ls.Retire(name, n.clock(), force)
	if err != nil {
		return 0, false, fmt.Errorf("%w: %w", proto.ErrBadRequest, err)
	}
	if err := n.shares.Retire(slices.Index(n.cfg.Region.Regions(), name), at); err != nil {
		return 0, false, err
	}
	if err := n.saveRetired(); err != nil {
		// In force here; a retry writes the file again.
		return at, first, fmt.Errorf("region %s retired as of %d, but not kept in the data dir: %w", name, at, err)
	}
	if m := n.membership(); m != nil {
		m.RetireRegion(name, at)
	}
	return at, first, nil
}

// onRetireRegion applies a retire gossip brought (gossip.Config.
// OnRetireRegion): as of this node's clock, whether or not its link
// reaches the region (the operator's decision is made).
func (n *Node) onRetireRegion(name string) (int64, bool) {
	at, _, err := n.RetireRegion(name, true)
	if err != nil {
		if errors.Is(err, proto.ErrBadRequest) {
			n.log.Warn("a retire of a region gossip brought is not taken here", "region", name, "err", err)
			return 0, false
		}
		n.log.Error("a retired region gossip brought could not be kept", "region", name, "err", err)
	}
	return at, true
}

// spreadRetired records in gossip the regions this node retired before
// it joined (from its data dir), so they reach the others.
func (n *Node) spreadRetired(m *gossip.Membership) {
	if n.shipping == nil {
		return
	}
	for _, st := range n.shipping.Status() {
		if st.Retired {
			m.RetireRegion(st.Name, st.RetiredAt)
		}
	}
}

// loadRetired retires again, as of their first time, the regions the
// data dir says were retired. A name no longer among the peer regions is
// logged and dropped.
func (n *Node) loadRetired() error {
	if n.cfg.Storage.DataDir == "" {
		return nil
	}
	b, err := os.ReadFile(filepath.Join(n.cfg.Storage.DataDir, retiredFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var es []retiredEntry
	if err := json.Unmarshal(b, &es); err != nil {
		return fmt.Errorf("%s: %w", retiredFile, err)
	}
	for _, e := range es {
		if _, _, err := n.region.Retire(e.Region, e.AtMs, true); err != nil {
			n.log.Warn("a region the data dir says was retired is no peer region now: dropped", "region", e.Region, "err", err)
			continue
		}
		if err := n.shares.Retire(slices.Index(n.cfg.Region.Regions(), e.Region), e.AtMs); err != nil {
			return err
		}
	}
	return nil
}

// saveRetired writes the retired regions to the data dir, if the node
// has one: a new file, synced, renamed over the old one. n.retireMu is
// held.
func (n *Node) saveRetired() error {
	dir := n.cfg.Storage.DataDir
	if dir == "" {
		return nil
	}
	es := []retiredEntry{}
	for _, st := range n.region.Status() {
		if st.Retired {
			es = append(es, retiredEntry{Region: st.Name, AtMs: st.RetiredAt})
		}
	}
	b, err := json.Marshal(es)
	if err != nil {
		return err
	}
	path := filepath.Join(dir, retiredFile)
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	if d, err := os.Open(dir); err == nil {
		err = d.Sync()
		d.Close()
		return err
	}
	return nil
}

// retireRegion answers an operator's RetireRegion.
func (h *handler) retireRegion(out []byte, v *view, hdr proto.Header, body []byte) ([]byte, metrics.Op, metrics.Outcome) {
	var m proto.RetireRegion
	if err := proto.Decode(body, &m); err != nil {
		return h.failErr(out, hdr, err, v.ring.Epoch(), metrics.OpRetireRegion)
	}
	if err := region.ValidName(m.Region); err != nil {
		return h.failErr(out, hdr, fmt.Errorf("%w: retire: %v", proto.ErrBadRequest, err), v.ring.Epoch(), metrics.OpRetireRegion)
	}
	at, first, err := h.n.RetireRegion(m.Region, m.Force)
	if err != nil {
		return h.failErr(out, hdr, err, v.ring.Epoch(), metrics.OpRetireRegion)
	}
	if first {
		h.n.log.Warn("peer region retired by an operator", "region", m.Region, "at_ms", at, "forced", m.Force)
	}
	return h.reply(out, hdr.ID, &proto.RetireRegionResult{AtMillis: at, New: first}, metrics.OpRetireRegion)
}

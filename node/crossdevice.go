package node

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/node/identity"
	"github.com/fcap-io/fcap/node/security"
	"github.com/fcap-io/fcap/proto"
)

// Cross-device identity on the wire (engine/identity.go holds the data).
//
// Link goes to the viewer's owner. It checks what it can alone, asks the
// device's owner to record the link (LinkDevice; the answer carries the
// device's own impressions), then records the device among the viewer's
// and merges those impressions, once. Unlink goes to the device's owner,
// which then tells the viewer's owner (LinkDevice with Unlink set).
// Either side is written like a strict write: logged, and acknowledged
// once every backup applied it, so a link survives its owner's death.
// When one node owns both sides it calls itself directly.
//
// The driving node (the viewer's owner for a link, the device's for an
// unlink) notes the whole in its finisher (node/identity, journaled under
// a data dir) before the first step; when the other side cannot be
// reached, the finisher runs it again in the background until it is
// done, so no link stays half made for want of a retry by its caller.

// identityTimeout bounds a link's call to the other side's owner.
const identityTimeout = 2 * time.Second

// resolve answers a Resolve.
func (h *handler) resolve(v *view, m *proto.Resolve, epoch uint64) (*proto.ResolveResult, proto.Code, error) {
	res := &proto.ResolveResult{Epoch: epoch}
	for _, d := range m.Devices {
		if code := h.serves(v, d); code != 0 {
			if code != proto.CodeNotOwner || !m.Backup || !v.backs(d) || h.n.repl.Syncing(partitionOf(v, d)) {
				return nil, code, nil
			}
		}
		viewer, linked, err := h.n.engine.Resolve(d)
		if err != nil {
			return nil, 0, err
		}
		if !linked {
			viewer = ""
		}
		res.Viewers = append(res.Viewers, viewer)
	}
	return res, 0, nil
}

// link answers a Link, on the viewer's owner. A link that fails for want
// of the device's owner is finished later by this node (a peer's Link is
// such a retry: its sender holds the job).
func (h *handler) link(v *view, m *proto.Link, epoch uint64) (*proto.LinkResult, proto.Code, error) {
	if code := h.serves(v, m.Viewer); code != 0 {
		return nil, code, nil
	}
	var job uint64
	if h.role != security.RolePeer {
		var err error
		if job, err = h.n.finisher.Begin(identity.Job{Kind: identity.Link, Device: strings.Clone(m.Device), Viewer: strings.Clone(m.Viewer)}); err != nil {
			return nil, 0, fmt.Errorf("%w: %v", proto.ErrOverloaded, err)
		}
	}
	merged, code, err := h.linkSteps(v, m)
	if h.n.finisher.End(job, errors.Join(err, code.Sentinel())) && err != nil {
		err = fmt.Errorf("%w (this node finishes the link once that side answers)", err)
	}
	if err != nil || code != 0 {
		return nil, code, err
	}
	return &proto.LinkResult{Epoch: epoch, Merged: uint64(merged)}, 0, nil
}

// linkSteps runs both steps of a link: the device's side on its owner,
// then the viewer's here.
func (h *handler) linkSteps(v *view, m *proto.Link) (int64, proto.Code, error) {
	// What this node can refuse alone, before the device's side changes.
	if err := h.n.engine.CanAddDevice(m.Viewer, m.Device, h.n.cfg.MaxDevicesPerViewer); err != nil {
		return 0, 0, err
	}
	at := h.n.clock()
	ctx, cancel := context.WithTimeout(context.Background(), identityTimeout)
	defer cancel()
	var ld proto.LinkDeviceResult
	if err := h.n.linkDeviceOn(ctx, v, m.Device, &proto.LinkDevice{Device: m.Device, Viewer: m.Viewer, At: at}, &ld); err != nil {
		return 0, 0, err
	}
	wv := h.enter()
	if code := h.serves(wv, m.Viewer); code != 0 {
		h.leave(wv)
		return 0, code, nil
	}
	merged, err := h.n.engine.AddDevice(m.Viewer, m.Device, at, ld.State, h.n.cfg.MaxDevicesPerViewer)
	seq := h.wrote(wv, m.Viewer, err)
	h.leave(wv)
	if err != nil {
		return 0, 0, err
	}
	h.n.waitLogged(seq)
	return merged, 0, h.syncStrict(wv, m.Viewer, time.Time{})
}

// unlink answers an Unlink, on the device's owner. The viewer's side is
// noted in the finisher before the log holds the device's, so when the
// viewer's owner cannot be reached the unlink still succeeds: this node
// updates the viewer's list once it answers.
func (h *handler) unlink(v *view, m *proto.Unlink, epoch uint64) (*proto.UnlinkResult, proto.Code, error) {
	at, device := h.n.clock(), strings.Clone(m.Device)
	wv := h.enter()
	if code := h.serves(wv, device); code != 0 {
		h.leave(wv)
		return nil, code, nil
	}
	was, err := h.n.engine.UnlinkDevice(device, at)
	var job uint64
	if err == nil && was != "" {
		job, _ = h.n.finisher.Begin(identity.Job{Kind: identity.Unlink, Device: device, Viewer: was, At: at}) // none: tried in line only
	}
	seq := h.wrote(wv, device, err)
	h.leave(wv)
	if err != nil {
		return nil, 0, err
	}
	h.n.waitLogged(seq)
	if err := h.syncStrict(wv, device, time.Time{}); err != nil {
		h.n.finisher.End(job, err)
		return nil, 0, err
	}
	if was != "" {
		ctx, cancel := context.WithTimeout(context.Background(), identityTimeout)
		defer cancel()
		err := h.n.linkDeviceOn(ctx, wv, was, &proto.LinkDevice{Device: device, Viewer: was, At: at, Unlink: true}, &proto.LinkDeviceResult{})
		if !h.n.finisher.End(job, err) && err != nil {
			return nil, 0, fmt.Errorf("%q no longer counts as %q, but %q's device list was not updated (unlink again to finish): %w", device, was, was, err)
		}
	}
	return &proto.UnlinkResult{Epoch: epoch, Viewer: was}, 0, nil
}

// finish runs a job of the finisher once, on the owner of its side now.
func (n *Node) finish(ctx context.Context, j identity.Job) error {
	ctx, cancel := context.WithTimeout(ctx, identityTimeout)
	defer cancel()
	v := n.view.Load()
	if j.Kind == identity.Unlink {
		return n.linkDeviceOn(ctx, v, j.Viewer, &proto.LinkDevice{Device: j.Device, Viewer: j.Viewer, At: j.At, Unlink: true}, &proto.LinkDeviceResult{})
	}
	m := &proto.Link{Device: j.Device, Viewer: j.Viewer}
	return n.onOwner(ctx, v, j.Viewer, m, &proto.LinkResult{}, func(h *handler) (proto.Code, error) {
		_, code, err := h.linkSteps(v, m)
		return code, err
	})
}

// linkDevice answers a LinkDevice: the device's side of a link (on the
// device's owner), or with Unlink the viewer's side of an unlink (on the
// viewer's owner).
func (h *handler) linkDevice(m *proto.LinkDevice) (*proto.LinkDeviceResult, proto.Code, error) {
	id := m.Device
	if m.Unlink {
		id = m.Viewer
	}
	wv := h.enter()
	if code := h.serves(wv, id); code != 0 {
		h.leave(wv)
		return nil, code, nil
	}
	res := &proto.LinkDeviceResult{}
	var err error
	if m.Unlink {
		err = h.n.engine.RemoveDevice(m.Viewer, m.Device, m.At)
	} else {
		res.State, err = h.n.engine.LinkDevice(m.Device, m.Viewer, m.At, nil)
	}
	seq := h.wrote(wv, id, err)
	h.leave(wv)
	if err != nil {
		return nil, 0, err
	}
	h.n.waitLogged(seq)
	if err := h.syncStrict(wv, id, time.Time{}); err != nil {
		return nil, 0, err
	}
	return res, 0, nil
}

// wrote marks a changed slot for replication and logs it, unless the
// write failed. It returns the log record for waitLogged.
func (h *handler) wrote(wv *view, id string, err error) uint64 {
	if err != nil {
		return 0
	}
	key := fcap.ViewerKey(id)
	wv.plan.Mark(key)
	if r := h.n.shipping; r != nil {
		r.Mark(key) // an identity change or an erasure: soft, shipped
	}
	return h.n.logChange(key)
}

// onOwner sends req to the primary owner of id and decodes its answer
// into resp; when this node is that owner, local answers it instead.
func (n *Node) onOwner(ctx context.Context, v *view, id string, req, resp proto.Message, local func(*handler) (proto.Code, error)) error {
	_, owners := v.ring.Lookup(id)
	if len(owners) == 0 {
		return fmt.Errorf("%w: no owner for %q", proto.ErrOverloaded, id)
	}
	if owners[0] == v.self && v.in {
		code, err := local(newHandler(n))
		if err == nil && code != 0 {
			err = fmt.Errorf("%w: this node owns %q but cannot serve it now (%v); retry", proto.ErrOverloaded, id, code)
		}
		return err
	}
	return n.peers.CallOwner(ctx, v.ring.Member(owners[0]).Addr, id, req, resp)
}

// linkDeviceOn runs a LinkDevice on the owner of id (onOwner).
func (n *Node) linkDeviceOn(ctx context.Context, v *view, id string, req *proto.LinkDevice, resp *proto.LinkDeviceResult) error {
	return n.onOwner(ctx, v, id, req, resp, func(h *handler) (proto.Code, error) {
		r, code, err := h.linkDevice(req)
		if r != nil {
			*resp = *r
		}
		return code, err
	})
}

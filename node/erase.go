package node

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/fcap-io/fcap/node/metrics"
	"github.com/fcap-io/fcap/proto"
)

// Erase (privacy requests) on the viewer's owner. First each device
// linked to the viewer is unlinked on the device's owner (the device's
// slot names the viewer), and the erased id's own link, if it is a
// device, is undone the same way; then the engine erases the viewer and
// keeps a tombstone (engine/erase.go), written like a strict write:
// logged, and acknowledged once every backup applied it, so neither a
// replay of the log nor an older copy brings the viewer back. When an
// unlink fails the viewer is not erased and the error says so: erasing
// again retries the whole (every step is idempotent).

// eraseTimeout bounds an erasure's calls to the devices' owners.
const eraseTimeout = 2 * identityTimeout

// erase answers an Erase. It runs apart from the connection's reader
// (pending.go): it may call other nodes.
func (h *handler) erase(out []byte, v *view, hdr proto.Header, body []byte) ([]byte, metrics.Op, metrics.Outcome) {
	var m proto.Erase
	epoch := v.ring.Epoch()
	if err := proto.Decode(body, &m); err != nil {
		return h.failErr(out, hdr, err, epoch, metrics.OpErase)
	}
	if err := h.n.engine.ValidateViewer(m.Viewer); err != nil {
		return h.failErr(out, hdr, err, epoch, metrics.OpErase)
	}
	viewer := strings.Clone(m.Viewer)
	if code := h.serves(v, viewer); code != 0 {
		return h.refuse(out, hdr, code, epoch, metrics.OpErase)
	}
	devices, err := h.n.engine.Devices(viewer)
	if err != nil {
		return h.failErr(out, hdr, err, epoch, metrics.OpErase)
	}
	ctx, cancel := context.WithTimeout(context.Background(), eraseTimeout)
	defer cancel()
	var failed []error
	for _, d := range devices {
		if err := h.n.unlinkOn(ctx, v, d, epoch); err != nil {
			failed = append(failed, fmt.Errorf("device %q: %w", d, err))
		}
	}
	if to, linked, err := h.n.engine.Resolve(viewer); err == nil && linked {
		// The erased id is a device: its viewer's list names it.
		if _, code, err := h.unlink(v, &proto.Unlink{Device: viewer}, epoch); err != nil || code != 0 {
			failed = append(failed, fmt.Errorf("its link to %q: %v", to, errors.Join(err, code.Sentinel())))
		}
	}
	if len(failed) > 0 {
		err := fmt.Errorf("%w: %q was not erased: unlinking failed (erase again to retry): %w", proto.ErrOverloaded, viewer, errors.Join(failed...))
		return h.failErr(out, hdr, err, epoch, metrics.OpErase)
	}

	wv := h.enter()
	if code := h.serves(wv, viewer); code != 0 {
		h.leave(wv)
		return h.refuse(out, hdr, code, epoch, metrics.OpErase)
	}
	_, _, err = h.n.engine.Erase(viewer, h.n.clock())
	seq := h.wrote(wv, viewer, err)
	h.leave(wv)
	if err != nil {
		return h.failErr(out, hdr, err, epoch, metrics.OpErase)
	}
	h.n.waitLogged(seq)
	if err := h.syncStrict(wv, viewer, time.Time{}); err != nil {
		// Erased here and logged; a backup may still hold the viewer
		// until replication reaches it. Erasing again waits again.
		return h.failErr(out, hdr, fmt.Errorf("%q erased on its owner, not yet on every backup (erase again to wait): %w", viewer, err), epoch, metrics.OpErase)
	}
	h.n.metrics.Erased.Inc()
	return h.reply(out, hdr.ID, &proto.EraseResult{Epoch: epoch, Devices: uint64(len(devices))}, metrics.OpErase)
}

// unlinkOn unlinks device on its owner: this node, or the owner's over
// a peer connection.
func (n *Node) unlinkOn(ctx context.Context, v *view, device string, epoch uint64) error {
	req := &proto.Unlink{Device: device}
	return n.onOwner(ctx, v, device, req, &proto.UnlinkResult{}, func(h *handler) (proto.Code, error) {
		_, code, err := h.unlink(v, req, epoch)
		return code, err
	})
}

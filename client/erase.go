package client

import (
	"context"
	"fmt"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/proto"
)

// Erase forgets viewer everywhere (a privacy request): every counter,
// remembered impression id and reservation, on its owner and every
// backup, and its device links (each device linked to it is unlinked;
// if viewer is itself a linked device, it is unlinked from its viewer).
// The owner keeps an erasure tombstone, logged and replicated, so that
// no older copy, log replay or snapshot brings the viewer back; after
// Erase returns nil, a Check of the viewer shows every cap's full limit.
//
// Erase is idempotent: after an error, erasing again finishes the work
// (an error may leave the viewer erased on its owner but not yet
// acknowledged by a backup, or its devices partly unlinked and the
// viewer not erased). An impression dated at or before the erasure is
// not counted afterwards (Record reports it Stale). Without a deadline
// on ctx, Erase waits up to 5 seconds.
func (c *Client) Erase(ctx context.Context, viewer string) error {
	start := time.Now()
	if c.closed() {
		return ErrClosed
	}
	if err := fcap.ValidateViewer(viewer, c.cfg.Limits); err != nil {
		return fmt.Errorf("%w: erase: %w", ErrBadRequest, err)
	}
	defer c.resolved.drop(viewer)
	cl, err := c.owned(ctx, viewer, &proto.Erase{Viewer: viewer}, proto.TypeEraseResult, identityDeadline(ctx))
	err = c.unavailable(ctx, err)
	c.m.observe(opErase, outcomeOf(err), start)
	if err != nil {
		return err
	}
	putCall(cl)
	return nil
}

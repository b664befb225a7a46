package client

import (
	"context"
	"fmt"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/proto"
)

// Void takes back an impression that was recorded (invalid-traffic
// refunds): it stops counting on every cap it was recorded against, on
// the viewer's owner and every backup, and a later Record of the same id
// (a retry still queued, a copy on another node) does not count it
// again. Counters hold no ids, so imp names the impression as it was
// recorded: its ID, Time and Caps (the Reservation is ignored). Time is
// required: Record stamps a zero time with the client's clock, which the
// caller does not see, so an impression that may be voided should be
// recorded with its time set. The owner refuses (ErrBadRequest) an
// impression whose time or caps are not those its id was recorded with.
//
// It reports whether the owner had counted the impression: false means
// the owner holds no record of the id (never recorded, forgotten, or not
// yet arrived); nothing was taken back, and the id will not count if it
// arrives later. Void is idempotent: voiding again takes nothing more
// and answers the same. It returns once the owner logged the void and
// every backup applied it; after an error, voiding again finishes the
// work. Without a deadline on ctx, Void waits up to 5 seconds.
func (c *Client) Void(ctx context.Context, viewer string, imp fcap.Impression) (bool, error) {
	start := time.Now()
	if c.closed() {
		return false, ErrClosed
	}
	if err := fcap.ValidateViewer(viewer, c.cfg.Limits); err != nil {
		return false, fmt.Errorf("%w: void: %w", ErrBadRequest, err)
	}
	if err := imp.ValidateVoid(c.cfg.Limits); err != nil {
		return false, fmt.Errorf("%w: void: %w", ErrBadRequest, err)
	}
	imp.Reservation = 0
	cl, err := c.owned(ctx, viewer, &proto.Void{Viewer: viewer, Impression: imp}, proto.TypeVoidResult, identityDeadline(ctx))
	err = c.unavailable(ctx, err)
	c.m.observe(opVoid, outcomeOf(err), start)
	if err != nil {
		return false, err
	}
	voided := cl.void.Voided
	putCall(cl)
	return voided, nil
}

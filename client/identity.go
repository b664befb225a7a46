package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/fcap-io/fcap/proto"
)

// Cross-device identity. A device linked to a viewer counts as that
// viewer: calls given the Device option name a device, which the client
// resolves to its viewer before routing, so the check still takes one hop
// to the viewer's owner. Resolutions are cached (Config.ResolveCacheSize,
// Config.ResolveTTL); a miss costs one more round trip, to the device's
// owner (or a backup).
//
// Staleness: a device linked or unlinked through another client may be
// counted under its old identity until this client's cached resolution
// expires (ResolveTTL). Links and unlinks made through this client drop
// its own cached entry at once. When the device's owners cannot be
// reached, the device counts as its own viewer (and the failure is
// counted in Stats().ResolveFailures): the ad request is still answered.

// Device makes the call's id a device: it is resolved to the viewer it
// is linked to (itself when it is not linked) before the call is routed.
func Device() CallOption {
	return CallOption{callOptions{device: true}}
}

// identityTimeout is the deadline of Link and Unlink when ctx has none:
// they change two partitions, on two nodes, and are not on an ad
// request's path.
const identityTimeout = 5 * time.Second

// Link links device to viewer: from now on the device counts as the
// viewer, and the impressions the device had are merged into the
// viewer's counters (once: linking again merges nothing). It returns the
// impressions merged. A device cannot be linked to itself, to a device,
// or if devices are linked to it; a viewer holds at most the cluster's
// limit of devices (32 by default): those are refused with an error
// wrapping ErrBadRequest. An error wrapping ErrUnavailable (the cluster
// could not answer; with context.DeadlineExceeded when time ran out)
// may leave the link half made for a while: the node that took it
// finishes it in the background once the device's owner answers (see
// ARCHITECTURE.md, "Finishing a half-made link"); calling Link again is
// harmless and finishes it at once.
func (c *Client) Link(ctx context.Context, device, viewer string) (merged int64, err error) {
	start := time.Now()
	if c.closed() {
		return 0, ErrClosed
	}
	deadline := identityDeadline(ctx)
	defer c.resolved.drop(device)
	cl, err := c.owned(ctx, viewer, &proto.Link{Device: device, Viewer: viewer}, proto.TypeLinkResult, deadline)
	err = c.unavailable(ctx, err)
	c.m.observe(opLink, outcomeOf(err), start)
	if err != nil {
		return 0, err
	}
	defer putCall(cl)
	return int64(cl.link.Merged), nil
}

// Unlink makes device its own viewer again (with the impressions it had
// before it was linked). It returns the viewer it was linked to, "" if
// none.
func (c *Client) Unlink(ctx context.Context, device string) (string, error) {
	start := time.Now()
	if c.closed() {
		return "", ErrClosed
	}
	deadline := identityDeadline(ctx)
	defer c.resolved.drop(device)
	cl, err := c.owned(ctx, device, &proto.Unlink{Device: device}, proto.TypeUnlinkResult, deadline)
	err = c.unavailable(ctx, err)
	c.m.observe(opUnlink, outcomeOf(err), start)
	if err != nil {
		return "", err
	}
	defer putCall(cl)
	return cl.unlink.Viewer, nil
}

// Resolve returns the viewer device counts as (itself when it is not
// linked), asking the cluster (not the cache).
func (c *Client) Resolve(ctx context.Context, device string) (string, error) {
	start := time.Now()
	if c.closed() {
		return "", ErrClosed
	}
	viewer, err := c.resolve(ctx, device, c.deadline(ctx, start))
	err = c.unavailable(ctx, err)
	c.m.observe(opResolve, outcomeOf(err), start)
	if err != nil {
		return "", err
	}
	c.resolved.put(device, viewer, time.Now())
	return viewer, nil
}

func identityDeadline(ctx context.Context) time.Time {
	if d, ok := ctx.Deadline(); ok {
		return d
	}
	return time.Now().Add(identityTimeout)
}

// resolve asks the device's owner, then its backups.
func (c *Client) resolve(ctx context.Context, device string, deadline time.Time) (string, error) {
	req := &proto.Resolve{Devices: []string{device}}
	// The owner gets half the budget, the backups the rest.
	start := time.Now()
	cl, err := c.owned(ctx, device, req, proto.TypeResolveResult, start.Add(deadline.Sub(start)/2))
	if err != nil && !errors.Is(err, proto.ErrBadRequest) {
		t, owners := c.route(device)
		for _, o := range owners[min(1, len(owners)):] {
			if p := t.peers[o]; p != nil && time.Until(deadline) > 0 {
				req.Backup = true
				if cl, err = c.roundTrip(ctx, p, req, proto.TypeResolveResult, deadline, false); err == nil {
					break
				}
			}
		}
	}
	if err != nil {
		return "", err
	}
	defer putCall(cl)
	if len(cl.resolve.Viewers) != 1 {
		return "", fmt.Errorf("%w: %d answers to one device", ErrProtocol, len(cl.resolve.Viewers))
	}
	if v := cl.resolve.Viewers[0]; v != "" {
		return v, nil
	}
	return device, nil
}

// canonical returns the id a call routes by: id itself, or with the
// Device option the viewer the device counts as (cached). A device whose
// owners cannot be reached counts as itself.
func (c *Client) canonical(ctx context.Context, id string, o *callOptions, deadline time.Time) string {
	if !o.device {
		return id
	}
	now := time.Now()
	if v, ok := c.resolved.get(id, now); ok {
		return v
	}
	c.m.resolveMisses.Inc()
	// A miss gets at most half of what is left: the call itself needs
	// the rest.
	v, err := c.resolve(ctx, id, now.Add(deadline.Sub(now)/2))
	if err != nil {
		c.m.resolveFailures.Inc()
		c.log.Debug("device not resolved; it counts as itself", "device", id, "err", err)
		return id
	}
	c.resolved.put(id, v, time.Now())
	return v
}

// resolveCache holds device resolutions, bounded and expiring.
type resolveCache struct {
	mu  sync.Mutex
	m   map[string]resolution // guarded by mu
	max int
	ttl time.Duration
}

type resolution struct {
	viewer  string
	expires time.Time
}

func newResolveCache(max int, ttl time.Duration) *resolveCache {
	return &resolveCache{m: map[string]resolution{}, max: max, ttl: ttl}
}

func (rc *resolveCache) get(device string, now time.Time) (string, bool) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	r, ok := rc.m[device]
	if !ok || now.After(r.expires) {
		return "", false
	}
	return r.viewer, true
}

func (rc *resolveCache) put(device, viewer string, now time.Time) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if _, ok := rc.m[device]; !ok && len(rc.m) >= rc.max {
		// Full: evict a sixty-fourth at random (map order), expired or not.
		n := max(rc.max/64, 1)
		for k := range rc.m {
			delete(rc.m, k)
			if n--; n == 0 {
				break
			}
		}
	}
	rc.m[device] = resolution{viewer: viewer, expires: now.Add(rc.ttl)}
}

func (rc *resolveCache) drop(device string) {
	rc.mu.Lock()
	delete(rc.m, device)
	rc.mu.Unlock()
}

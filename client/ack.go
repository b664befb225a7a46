package client

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/proto"
)

// Acknowledged recording. Record is fire-and-forget: right for an ad
// server, which must not wait on the cluster, and wrong for a consumer of
// a durable log (a Kafka topic), which may move its position past an
// impression only once the cluster holds it. RecordSync is that
// consumer's path: it sends a batch the way Record does (one request per
// owner, a backup standing in for an unreachable owner when the caps are
// soft) but waits for every answer and retries what failed until each
// impression is acknowledged, refused for what it says, or ctx ends. It
// never drops: an impression not acknowledged is reported so, and the
// caller keeps it.

// RecordItem is one impression for RecordSync.
type RecordItem struct {
	// Viewer is the canonical viewer, or the device when Device is set.
	Viewer string
	// Device says Viewer names a device, resolved to its viewer as
	// RecordDevice does.
	Device     bool
	Impression fcap.Impression
}

// RecordAck is what became of one RecordItem.
type RecordAck struct {
	// Status says what the owner did with an acknowledged impression:
	// Recorded, Duplicate (its id was already counted: a replay) or
	// Stale (older than its longest window: it could never count). Valid
	// when Err is nil.
	Status fcap.RecordStatus
	// Err is nil when the owner acknowledged the impression. Otherwise it
	// wraps ErrBadRequest (the impression is invalid; ErrFutureTime, which
	// wraps it, when its time is ahead of the owner's clock by more than
	// the owner accepts): sending it again cannot succeed. Or it wraps
	// ErrUnavailable and the context's error (or is ErrClosed): the
	// impression was not acknowledged in time and may or may not count;
	// send it again.
	Err error
}

// maxSyncChunk bounds the items of one Record request of RecordSync, and
// maxSyncChunkBytes their estimated encoded size, well inside a frame.
const (
	maxSyncChunk      = 2048
	maxSyncChunkBytes = proto.DefaultMaxFrame / 2
)

// RecordSync records items and waits until the cluster acknowledged or
// refused each, or ctx ends; acks[i] says what became of items[i]. The
// attempts at the items still unanswered are retried with the backoff of
// Config.RecordRetryMin and RecordRetryMax, without Record's
// RecordAttempts bound: only ctx ends them. Each request waits at most
// Config.RecordTimeout. Soft impressions whose owner is unreachable go to
// a backup owner, which replicates them to the owner; strict ones wait
// for their owner (or its successor). An impression Record would refuse
// up front (Config.Limits) is refused here too, without a request; a
// time of 0 means now, stamped once as for Record. An acknowledged strict impression
// is on every owner; a soft one is on its owner and replicated
// asynchronously (DESIGN.md).
//
// With Replicated, each impression is acknowledged only once every owner
// of its viewer applied it, whatever its caps' mode: one node's death
// then cannot take back what was acknowledged. It costs the time of the
// replication batch that carries it (not a round trip of its own), and no
// backup stands in for an unreachable owner.
func (c *Client) RecordSync(ctx context.Context, items []RecordItem, opts ...SyncOption) []RecordAck {
	var so syncOptions
	for _, o := range opts {
		o(&so)
	}
	acks := make([]RecordAck, len(items))
	pending := make([]syncItem, 0, len(items))
	for i := range items {
		it := &items[i]
		err := fcap.ValidateViewer(it.Viewer, c.cfg.Limits)
		if err == nil {
			err = it.Impression.Validate(c.cfg.Limits)
		}
		if err != nil {
			acks[i].Err = fmt.Errorf("%w: record: %w", ErrBadRequest, err)
			continue
		}
		viewer := it.Viewer
		if it.Device {
			o := callOptions{device: true}
			viewer = c.canonical(ctx, viewer, &o, time.Now().Add(c.cfg.RecordTimeout))
		}
		imp := it.Impression
		stampNow(&imp) // once: every attempt carries the same time
		pending = append(pending, syncItem{i: i, rec: recItem{viewer: viewer, imp: imp}})
	}
	for attempt := 0; len(pending) > 0; attempt++ {
		if attempt > 0 {
			t := time.NewTimer(retryDelay(&c.cfg, attempt, rand.N[time.Duration]))
			select {
			case <-ctx.Done():
			case <-c.stop:
			case <-t.C:
			}
			t.Stop()
		}
		if err := c.syncStopped(ctx); err != nil {
			for _, p := range pending {
				acks[p.i].Err = err
			}
			return acks
		}
		pending = c.syncRound(ctx, pending, acks, so)
	}
	return acks
}

// SyncOption changes how RecordSync acknowledges.
type SyncOption func(*syncOptions)

type syncOptions struct {
	replicated bool
}

// Replicated makes RecordSync acknowledge an impression only once every
// owner of its viewer applied it (see RecordSync). fcapingest uses it so
// an offset is committed only past impressions a node's death cannot take
// back.
func Replicated() SyncOption { return func(o *syncOptions) { o.replicated = true } }

// syncStopped returns why RecordSync must stop trying, or nil.
func (c *Client) syncStopped(ctx context.Context) error {
	select {
	case <-c.stop:
		return ErrClosed
	default:
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: impression not acknowledged: %w", ErrUnavailable, err)
	}
	return nil
}

// syncItem is an item of RecordSync still waiting for its answer.
type syncItem struct {
	i   int // its index in the caller's items
	rec recItem
}

// syncRound sends every pending item once, concurrently per destination,
// fills the acks of the items answered, and returns those to try again.
func (c *Client) syncRound(ctx context.Context, pending []syncItem, acks []RecordAck, so syncOptions) []syncItem {
	t := c.topo.Load()
	var (
		mu    sync.Mutex // guards again
		again []syncItem
	)
	groups := map[dest][]syncItem{}
	for _, p := range pending {
		var owners []uint16
		if t.ring != nil {
			_, owners = t.ring.Lookup(p.rec.viewer)
		}
		if len(owners) == 0 || t.peers[owners[0]] == nil {
			c.unroutable()
			again = append(again, p)
			continue
		}
		d := dest{p: t.peers[owners[0]]}
		if !so.replicated && p.rec.standInOK() && (p.rec.ownerFailed || !reachable(d.p)) {
			if b := reachableBackup(t, owners); b != nil {
				d = dest{p: b, backup: true}
			}
		}
		groups[d] = append(groups[d], p)
	}
	var wg sync.WaitGroup
	for d, group := range groups {
		for _, chunk := range syncChunks(group) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				retry := c.syncSend(ctx, d, chunk, acks, so)
				mu.Lock()
				again = append(again, retry...)
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	return again
}

// syncChunks splits a destination's items into requests that fit a frame.
func syncChunks(items []syncItem) [][]syncItem {
	var out [][]syncItem
	start, size := 0, 0
	for i := range items {
		n := syncItemSize(&items[i].rec)
		if i > start && (i-start == maxSyncChunk || size+n > maxSyncChunkBytes) {
			out = append(out, items[start:i])
			start, size = i, 0
		}
		size += n
	}
	if start < len(items) {
		out = append(out, items[start:])
	}
	return out
}

// syncItemSize overestimates an item's encoded size.
func syncItemSize(it *recItem) int {
	n := 32 + len(it.viewer) + len(it.imp.ID)
	for i := range it.imp.Caps {
		n += 48 + len(it.imp.Caps[i].Scope) + len(it.imp.Caps[i].ID)
	}
	return n
}

// syncSend sends one request and fills the acks it answers; it returns
// the items to try again.
func (c *Client) syncSend(ctx context.Context, d dest, items []syncItem, acks []RecordAck, so syncOptions) []syncItem {
	req := proto.Record{Items: make([]proto.RecordItem, len(items)), Backup: d.backup, Replicated: so.replicated}
	for i := range items {
		req.Items[i] = proto.RecordItem{Viewer: items[i].rec.viewer, Impression: items[i].rec.imp, HasTime: true}
	}
	rctx, cancel := context.WithTimeout(ctx, c.cfg.RecordTimeout)
	deadline, _ := rctx.Deadline()
	cl, err := c.roundTrip(rctx, d.p, &req, proto.TypeRecordResult, deadline, true)
	cancel()
	if err != nil {
		c.log.Debug("acknowledged record: attempt failed", "node", d.p.addr, "items", len(items), "err", err)
		for i := range items {
			// An owner found unreachable sends the next attempt to a
			// backup; a failed backup sends it back to the owner.
			items[i].rec.ownerFailed = !d.backup && unreachable(err)
		}
		c.m.recordRetries.Add(float64(len(items)))
		return items
	}
	defer putCall(cl)
	c.noteEpoch(cl.record.Epoch, d.p)
	results := cl.record.Results
	var again []syncItem
	for i, it := range items {
		if i >= len(results) {
			again = append(again, it)
			continue
		}
		switch code := results[i].Code; code {
		case 0:
			acks[it.i] = RecordAck{Status: results[i].Status}
			c.m.recordSent.Inc()
			if d.backup {
				c.m.backupWrites.Inc()
			}
		case proto.CodeBadRequest:
			acks[it.i].Err = fmt.Errorf("impression %q refused: %w", it.rec.imp.ID, ErrBadRequest)
		case proto.CodeFutureTime:
			acks[it.i].Err = fmt.Errorf("impression %q at %d refused: %w", it.rec.imp.ID, it.rec.imp.Time, ErrFutureTime)
		case proto.CodeNotOwner:
			c.noteEpoch(0, d.p) // our topology is stale: refresh it
			it.rec.ownerFailed = false
			again = append(again, it)
		default:
			again = append(again, it)
		}
	}
	if n := len(again); n > 0 {
		c.m.recordRetries.Add(float64(n))
	}
	return again
}

// IsRefused reports whether a RecordAck's error means the impression was
// refused for what it says (sending it again cannot succeed), rather than
// not acknowledged in time.
func IsRefused(err error) bool {
	return errors.Is(err, ErrBadRequest) || errors.Is(err, ErrFutureTime)
}

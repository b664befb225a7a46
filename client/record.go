package client

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/proto"
)

// Record queues an impression for its viewer's owner and returns at once:
// recording is off the ad decision's path. Impressions are sent in
// batches, retried with exponential backoff and full jitter when a node
// fails (safe: the owner is idempotent on the impression ID), and dropped
// and counted when every attempt failed.
//
// Record refuses at once, queueing nothing, an impression the owner
// would refuse: an error wrapping ErrBadRequest (and fcap.ErrInvalid, and
// the sentinel of the field at fault, such as fcap.ErrUnknownScope) whose
// message names the field and the values accepted, judged by
// Config.Limits (fcap.Impression.Validate). It returns ErrQueueFull when
// Config.RecordQueue impressions are already waiting, and ErrClosed after
// Close. nil means queued. While the client has never reached the
// cluster it queues the impression all the same (it is sent if a node
// answers before its attempts run out) and returns an error wrapping
// ErrUnavailable that names the seeds: the cluster may never see it.
//
// imp.Time is when the ad played, in Unix milliseconds. 0 means now: this
// machine's clock when Record is called, stamped before the impression
// is queued, so every attempt and every copy (an owner's, a backup's
// standing in for it) carries the same time and a merge counts it once.
// A time further ahead of the owner's clock than it accepts (fcapd
// --max-clock-skew, default a minute: keep clocks synchronised) is
// refused by the owner and dropped (counted with reason "future_time"):
// the client cannot judge another machine's clock.
func (c *Client) Record(viewer string, imp fcap.Impression) error {
	if err := c.validateRecord(viewer, &imp); err != nil {
		return err
	}
	stampNow(&imp)
	if err := c.rec.add(viewer, imp); err != nil {
		return err
	}
	return c.neverReached()
}

// stampNow gives an impression without a time (0) the current time.
func stampNow(imp *fcap.Impression) {
	if imp.Time == 0 {
		imp.Time = time.Now().UnixMilli()
	}
}

// RecordDevice is Record for an impression a device played: the device
// is resolved to its viewer (cached; a miss waits up to Config.Timeout
// for the device's owner, and an unresolved device counts as itself).
func (c *Client) RecordDevice(device string, imp fcap.Impression) error {
	if err := c.validateRecord(device, &imp); err != nil {
		return err
	}
	stampNow(&imp)
	o := callOptions{device: true}
	ctx := context.Background()
	if err := c.rec.add(c.canonical(ctx, device, &o, c.deadline(ctx, time.Now())), imp); err != nil {
		return err
	}
	return c.neverReached()
}

// validateRecord applies the checks the owner would, so an invalid
// impression is an error now rather than a drop later.
func (c *Client) validateRecord(viewer string, imp *fcap.Impression) error {
	err := fcap.ValidateViewer(viewer, c.cfg.Limits)
	if err == nil {
		err = imp.Validate(c.cfg.Limits)
	}
	if err != nil {
		c.m.recordDropped.WithLabelValues("invalid").Inc()
		return fmt.Errorf("%w: record: %w", ErrBadRequest, err)
	}
	return nil
}

// Flush waits until every queued impression is acknowledged or dropped,
// or ctx ends.
func (c *Client) Flush(ctx context.Context) error {
	return c.rec.flush(ctx)
}

type recItem struct {
	viewer   string
	imp      fcap.Impression
	attempts int
	due      time.Time // when a retry may go
	// ownerFailed: the last attempt at the viewer's owner found it
	// unreachable (see unreachable), so the next goes to a backup owner
	// if the impression may (standInOK).
	ownerFailed bool
}

// standInOK reports whether a backup owner may take the impression while
// its owner is unreachable: soft caps only, and no reservation (those
// live on the owner alone).
func (it *recItem) standInOK() bool {
	return it.imp.Reservation == 0 && !anyStrict(it.imp.Caps)
}

// recorder is the asynchronous Record path: a bounded queue drained by
// RecordSenders goroutines that batch per owner, and a retry heap.
type recorder struct {
	c      *Client
	queue  chan recItem
	count  atomic.Int64 // accepted and not yet acknowledged or dropped
	closed atomic.Bool

	retryMu sync.Mutex
	// retries is guarded by retryMu.
	retries   retryHeap
	retryKick chan struct{}
}

func newRecorder(c *Client) *recorder {
	return &recorder{
		c:         c,
		queue:     make(chan recItem, c.cfg.RecordQueue),
		retryKick: make(chan struct{}, 1),
	}
}

func (r *recorder) start() {
	for range r.c.cfg.RecordSenders {
		r.c.goFunc(r.sendLoop)
	}
	r.c.goFunc(r.retryLoop)
}

func (r *recorder) add(viewer string, imp fcap.Impression) error {
	m := r.c.m
	if r.closed.Load() {
		m.recordDropped.WithLabelValues("closed").Inc()
		return ErrClosed
	}
	// Bound everything accepted (queued, in flight, waiting to retry) by
	// the queue's capacity, so retries always fit back in the queue.
	if r.count.Add(1) > int64(r.c.cfg.RecordQueue) {
		r.count.Add(-1)
		m.recordDropped.WithLabelValues("queue_full").Inc()
		return ErrQueueFull
	}
	imp.Caps = append([]fcap.Cap(nil), imp.Caps...) // the caller may reuse its slice
	r.queue <- recItem{viewer: viewer, imp: imp}
	m.recordQueued.Inc()
	m.recordQueue.Inc()
	return nil
}

// done retires n items.
func (r *recorder) done(n int) {
	r.count.Add(int64(-n))
	r.c.m.recordQueue.Sub(float64(n))
}

func (r *recorder) drop(it *recItem, reason string) {
	r.c.m.recordDropped.WithLabelValues(reason).Inc()
	r.c.log.Debug("impression dropped", "reason", reason, "viewer", it.viewer, "id", it.imp.ID)
	r.done(1)
}

func (r *recorder) flush(ctx context.Context) error {
	for r.count.Load() > 0 {
		select {
		case <-ctx.Done():
			return fmt.Errorf("flush: %d impressions still queued: %w", r.count.Load(), ctx.Err())
		case <-r.c.stop:
			return ErrClosed
		case <-time.After(time.Millisecond):
		}
	}
	return nil
}

// close stops accepting impressions and flushes. Whatever is left when
// ctx ends is dropped (and counted) when the client stops.
func (r *recorder) close(ctx context.Context) error {
	r.closed.Store(true)
	return r.flush(ctx)
}

func (r *recorder) sendLoop() {
	batch := make([]recItem, 0, r.c.cfg.RecordBatch)
	linger := time.NewTimer(time.Hour)
	defer linger.Stop()
	for {
		batch = batch[:0]
		select {
		case it := <-r.queue:
			batch = append(batch, it)
		case <-r.c.stop:
			r.dropQueued()
			return
		}
		linger.Reset(r.c.cfg.RecordLinger)
	fill:
		for len(batch) < cap(batch) {
			select {
			case it := <-r.queue:
				batch = append(batch, it)
			case <-linger.C:
				break fill
			case <-r.c.stop:
				break fill
			}
		}
		r.send(batch)
	}
}

// dropQueued counts what is left in the queue when the client stops.
func (r *recorder) dropQueued() {
	for {
		select {
		case it := <-r.queue:
			r.drop(&it, "closed")
		default:
			return
		}
	}
}

// dest is where a group of impressions goes: the viewers' owner, or a
// backup owner standing in for it.
type dest struct {
	p      *peer
	backup bool
}

// send delivers a batch, one request per destination. An impression goes
// to its viewer's owner, or, when the owner cannot be reached (no live
// connection, or the last attempt found it unreachable) and its caps
// are soft, to a backup owner, which replicates it to the owner: the
// owner merges it in when it is back, and the impression id keeps a copy
// that arrives twice from counting twice.
func (r *recorder) send(batch []recItem) {
	c := r.c
	t := c.topo.Load()
	groups := map[dest][]recItem{}
	for _, it := range batch {
		var owners []uint16
		if t.ring != nil {
			_, owners = t.ring.Lookup(it.viewer)
		}
		if len(owners) == 0 || t.peers[owners[0]] == nil {
			c.unroutable()
			r.retry(it, errNoOwner)
			continue
		}
		d := dest{p: t.peers[owners[0]]}
		if it.standInOK() && (it.ownerFailed || !reachable(d.p)) {
			if b := reachableBackup(t, owners); b != nil {
				d = dest{p: b, backup: true}
			}
		}
		groups[d] = append(groups[d], it)
	}
	for d, items := range groups {
		req := proto.Record{Items: make([]proto.RecordItem, len(items)), Backup: d.backup}
		for i, it := range items {
			req.Items[i] = proto.RecordItem{Viewer: it.viewer, Impression: it.imp, HasTime: true}
		}
		ctx, cancel := context.WithTimeout(context.Background(), c.cfg.RecordTimeout)
		cl, err := c.roundTrip(ctx, d.p, &req, proto.TypeRecordResult, time.Now().Add(c.cfg.RecordTimeout), true)
		cancel()
		if err != nil {
			for _, it := range items {
				// An owner found unreachable sends the next attempt to a
				// backup; a failed backup sends it back to the owner.
				it.ownerFailed = !d.backup && unreachable(err)
				r.retry(it, err)
			}
			continue
		}
		c.noteEpoch(cl.record.Epoch, d.p)
		results := cl.record.Results
		for i, it := range items {
			if i >= len(results) {
				r.retry(it, ErrProtocol)
				continue
			}
			switch code := results[i].Code; code {
			case 0:
				c.m.recordSent.Inc()
				if d.backup {
					c.m.backupWrites.Inc()
				}
				r.done(1)
			case proto.CodeBadRequest:
				r.drop(&it, "invalid")
			case proto.CodeFutureTime:
				// The impression's time is ahead of the owner's clock by
				// more than it accepts: a retry would be refused too.
				r.drop(&it, "future_time")
			case proto.CodeNotOwner:
				c.noteEpoch(0, d.p) // our topology is stale: refresh it
				it.ownerFailed = false
				r.retry(it, proto.ErrNotOwner)
			default:
				r.retry(it, fmt.Errorf("owner answered code %d", code))
			}
		}
		putCall(cl)
	}
}

// reachable reports whether a call to p can be sent now: it has a live
// connection, or its first dial is still running. A node that refused
// its connection, or whose connection died, is not.
func reachable(p *peer) bool {
	return p.pick() != nil || p.firstDial()
}

// reachableBackup returns the first reachable backup owner, or nil.
func reachableBackup(t *topology, owners []uint16) *peer {
	for _, o := range owners[min(1, len(owners)):] {
		if p := t.peers[o]; p != nil && reachable(p) {
			return p
		}
	}
	return nil
}

// retry schedules another attempt after exponential backoff, or drops
// the impression when its attempts are spent.
func (r *recorder) retry(it recItem, why error) {
	cfg := &r.c.cfg
	it.attempts++
	if it.attempts >= cfg.RecordAttempts || errors.Is(why, ErrClosed) {
		reason := "attempts"
		if errors.Is(why, ErrClosed) {
			reason = "closed"
		}
		r.drop(&it, reason)
		return
	}
	r.c.m.recordRetries.Inc()
	r.c.log.Debug("impression retried", "attempt", it.attempts, "viewer", it.viewer, "id", it.imp.ID, "err", why)
	it.due = time.Now().Add(retryDelay(cfg, it.attempts, rand.N[time.Duration]))
	r.retryMu.Lock()
	heap.Push(&r.retries, it)
	r.retryMu.Unlock()
	select {
	case r.retryKick <- struct{}{}:
	default:
	}
}

// retryDelay is the wait after an impression's attempts-th failure:
// exponential from RecordRetryMin, capped at RecordRetryMax, half of it
// fixed and half jittered (randN(n) is uniform in [0, n)). The fixed half
// makes the time before a drop predictable: with the defaults, 20
// attempts wait 30-60 s in all, longer than a node takes to be declared
// dead and its partitions served again; full jitter could spend them in
// a few seconds.
func retryDelay(cfg *Config, attempts int, randN func(time.Duration) time.Duration) time.Duration {
	ceiling := min(cfg.RecordRetryMax, cfg.RecordRetryMin<<min(attempts, 30))
	half := max(ceiling/2, 1)
	return half + randN(half)
}

// retryLoop moves due retries back into the queue.
func (r *recorder) retryLoop() {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		r.retryMu.Lock()
		now := time.Now()
		for len(r.retries) > 0 && !r.retries[0].due.After(now) {
			it := heap.Pop(&r.retries).(recItem)
			r.queue <- it // fits: everything accepted is bounded by the queue's capacity
		}
		wait := time.Hour
		if len(r.retries) > 0 {
			wait = r.retries[0].due.Sub(now)
		}
		r.retryMu.Unlock()
		t.Reset(wait)
		select {
		case <-r.c.stop:
			r.retryMu.Lock()
			for len(r.retries) > 0 {
				it := heap.Pop(&r.retries).(recItem)
				r.drop(&it, "closed")
			}
			r.retryMu.Unlock()
			return
		case <-r.retryKick:
		case <-t.C:
		}
	}
}

// retryHeap orders retries by due time.
type retryHeap []recItem

func (h retryHeap) Len() int           { return len(h) }
func (h retryHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h retryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *retryHeap) Push(x any)        { *h = append(*h, x.(recItem)) }
func (h *retryHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	old[len(old)-1] = recItem{}
	*h = old[:len(old)-1]
	return it
}

package replication

import (
	"context"
	"fmt"
	"time"

	"github.com/fcap-io/fcap/proto"
)

// Run pulls partitions whose push has not come, drops the state of
// partitions this node no longer owns, claims those whose hand-over
// never finished and runs anti-entropy, until ctx is done.
func (r *Replicator) Run(ctx context.Context) {
	r.wg.Go(func() { everyOrKick(ctx, pullAfter, r.pullKick, func() { r.pull(ctx) }) })
	if d := r.cfg.AntiEntropyInterval; d > 0 {
		r.wg.Go(func() { every(ctx, d, func() { r.antiEntropyRound(ctx) }) })
	}
	// Claims are looked for every second, not at DropGrace's pace (15 s
	// by default): a partition is claimed SyncTimeout after its wait
	// began, not up to DropGrace/4 later.
	r.wg.Go(func() { every(ctx, claimEvery, func() { r.ClaimStale(ctx, r.cfg.SyncTimeout) }) })
	every(ctx, max(r.cfg.DropGrace/4, time.Second), func() { r.dropLost(r.cfg.DropGrace) })
}

// everyOrKick is every, also calling f when kick fires.
func everyOrKick(ctx context.Context, period time.Duration, kick <-chan struct{}, f func()) {
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-kick:
		}
		f()
	}
}

// claimEvery is how often Run looks for partitions to claim.
const claimEvery = time.Second

// every calls f every period, the first time one period from now, until
// ctx is done.
func every(ctx context.Context, period time.Duration, f func()) {
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			f()
		}
	}
}

// Wait returns once every goroutine the Replicator started has ended
// (after Close and the end of Run's context).
func (r *Replicator) Wait() { r.wg.Wait() }

// Apply merges the viewer states a peer sent into what this node holds,
// all or none (engine MergeAll): a state never takes away what this node
// counted, so a push from a node whose copy is older (it was paused, or
// cut off by a gossip partition, while this one acknowledged writes) adds
// what it has and loses nothing. Even a primary that holds its partition
// merges: it may be the one whose copy is older. Each viewer merged is
// logged, and Apply returns once the log holds them: the sender learns
// they were applied only once they are durable here. The message's Done
// and Handoff markers then end this node's waits for those partitions.
func (r *Replicator) Apply(m *proto.Replicate) (proto.ReplicateResult, error) {
	var res proto.ReplicateResult
	var keys []uint64 // the viewers applied, for the log
	applied, refused, err := r.eng.MergeAll(m.States, func(key uint64) bool {
		keys = append(keys, key)
		return true
	})
	if err != nil {
		return res, fmt.Errorf("%w: from %s: %v", proto.ErrBadRequest, m.From, err)
	}
	if r.hooks.ObserveHighWater != nil {
		r.hooks.ObserveHighWater(m.HighWater)
	}
	var logged uint64
	for _, key := range keys {
		if seq := r.wal.Changed(key); seq != 0 {
			logged = seq
		}
	}
	if logged != 0 {
		r.wal.Wait(logged)
	}
	res.Applied, res.Refused = uint64(applied), uint64(refused)
	if refused > 0 {
		r.log.Debug("partition: refused stale states", "from", m.From, "states", refused)
	}
	r.received(m.From, m.Epoch, m.Done, m.Handoff)
	r.copiesReceived(m.From, m.Done, m.Copied)
	return res, nil
}

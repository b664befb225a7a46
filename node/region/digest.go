package region

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"time"

	"github.com/fcap-io/fcap/proto"
	"github.com/fcap-io/fcap/ring"
)

// Digest catch-up (ARCHITECTURE.md, "When the queue cannot keep up").
// The queue is neither logged nor bounded past QueueViewers, so marks
// are lost to an overflow, a restart, or a node that dies for good with
// viewers queued. Instead of re-shipping every viewer, a link compares,
// partition by partition, its own counters of the viewers this node is
// primary of (Engine.LocalDigest) with the lane the peer region's
// primary of the partition holds of them (proto.RegionDigest, answered
// from engine.LaneDigest), and queues only the viewers that differ or
// that the peer lacks. It runs
//
//   - when a change overflows the queue, and when the node restarted
//     from a data dir (Links.CatchUp);
//   - when the peer region answers again after an outage;
//   - when the node became the primary of partitions whose primary left
//     the ring (node.catchUpInherited): a primary that died with viewers
//     queued, whose partitions' new primaries compare their copies (the
//     backups') with what the peer holds;
//   - every DigestInterval (jittered), in case all else missed something.
//
// Per viewer digests in slices, not bucket digests first: each side
// reads every viewer's counters either way, and one round trip a slice
// keeps the exchange simple; a digest costs 16 bytes on the WAN, once
// per DigestInterval. A slice answer holds at most
// proto.MaxRegionDigests viewers and a request
// proto.MaxRegionDigestKeys cap keys; past either the partition is
// compared in twice as many slices, up to proto.MaxRegionDigestSlices,
// past which its viewers are queued whole (as the catch-up did before).
// A peer that refuses the comparison (another partition count, a node
// that predates it) gets a catch-up's partitions queued whole, never
// nothing: the queue still never drops silently. Everything is paced by
// CatchUpRate viewers a second and keeps half the queue free for live
// changes.

// digestBatch is how many partitions one pass over the engine's viewers
// gathers.
const digestBatch = 16

// Outcomes of comparing one partition (fcap_region_digest_rounds_total).
const (
	outcomeAgreed    = "agreed"    // the peer holds every viewer as this node does
	outcomeDiffered  = "differed"  // some viewers differed; they were queued
	outcomeReshipped = "reshipped" // not comparable: every viewer was queued
	outcomeSkipped   = "skipped"   // not comparable, and a periodic round queues nothing
	outcomeFailed    = "failed"    // the peer was not reached; compared again later
)

// digestState is what the digest goroutine keeps between rounds.
type digestState struct {
	everUp atomic.Bool // the shipper reached the peer region once

	// The fields below belong to the digest goroutine.
	ring  *ring.Ring      // the peer region's ring, learnt each round
	conns map[string]Conn // to the peer's nodes, closed after each round
	warn  map[string]bool // warnings logged once
}

// digestLoop runs a digest comparison when a catch-up is asked for (an
// overflow, a restart, the peer back after an outage) and every
// DigestInterval; one asked while it runs runs after it. A round the
// peer could not take part in whole is run again after RetryMax.
func (l *Link) digestLoop() {
	defer l.closeDigestConns()
	var tick <-chan time.Time
	var timer *time.Timer
	resetTick := func() {
		if l.cfg.DigestInterval <= 0 {
			return
		}
		d := l.cfg.DigestInterval/2 + rand.N(l.cfg.DigestInterval+1)
		if timer == nil {
			timer = time.NewTimer(d)
		} else {
			timer.Reset(d)
		}
		tick = timer.C
	}
	resetTick()
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	var retry <-chan time.Time
	for {
		catchUp := false
		select {
		case <-l.stop:
			return
		case <-l.catchUp:
			catchUp = true
		case <-retry:
			catchUp = true
		case <-tick:
			resetTick()
		}
		retry = nil
		if l.retired.Load() { // an operator retired the peer region: nothing goes to it
			continue
		}
		st, done := l.digestRound(catchUp)
		if !done {
			return
		}
		if st.failed > 0 {
			if catchUp {
				retry = time.After(l.cfg.RetryMax)
			}
			l.log.Debug("region link: digest catch-up: some partitions not compared; again later", "failed", st.failed, "catch_up", catchUp)
		}
		if st.queued > 0 || catchUp {
			l.log.Info("region link: digest catch-up", "catch_up", catchUp, "partitions", st.partitions, "differing", st.differing, "queued", st.queued)
		}
	}
}

// roundStats is what one digest round did.
type roundStats struct {
	partitions, failed int
	differing, queued  int
}

// digestRound compares every partition this node is primary of with
// the peer region. catchUp: viewers of partitions that cannot be
// compared are queued whole. done is false when the links closed.
func (l *Link) digestRound(catchUp bool) (st roundStats, done bool) {
	defer l.closeDigestConns()
	parts, primary := l.deps.PrimaryPartitions()
	if len(primary) == 0 {
		return st, true
	}
	if err := l.digestRing(); err != nil {
		l.log.Debug("region link: digest catch-up: peer ring", "err", err)
		st.failed = len(primary)
		l.metrics.digests[outcomeFailed].Add(float64(len(primary)))
		return st, true
	}
	if l.dg.ring.Partitions() != parts {
		// Viewers are partitioned apart in the two regions: a partition
		// here is spread over many nodes there.
		l.warnOnce("partitions", "region link: the peer region's ring has another partition count; digest catch-up cannot compare, a catch-up re-ships whole",
			"partitions", parts, "peer_partitions", l.dg.ring.Partitions())
		if !catchUp {
			l.metrics.digests[outcomeSkipped].Add(float64(len(primary)))
			return st, true
		}
		l.metrics.digests[outcomeReshipped].Add(float64(len(primary)))
		n, done := l.runCatchUp()
		st.queued = n
		return st, done
	}
	for start := 0; start < len(primary); start += digestBatch {
		batch := primary[start:min(start+digestBatch, len(primary))]
		byPart := l.localViewers(parts, batch)
		for _, p := range batch {
			st.partitions++
			ps, err := l.comparePartition(parts, p, byPart[p], catchUp)
			st.differing += ps.differing
			st.queued += ps.queued
			switch {
			case errors.Is(err, errStopped):
				return st, false
			case err != nil:
				st.failed++
				l.log.Debug("region link: digest catch-up", "partition", p, "err", err)
			}
		}
	}
	return st, true
}

// localViewers gathers, in one pass over the engine, the viewers of
// partitions ps (of a ring of parts) this node is primary of.
func (l *Link) localViewers(parts int, ps []int) map[int][]uint64 {
	want := make([]bool, parts)
	for _, p := range ps {
		if p >= 0 && p < parts {
			want[p] = true
		}
	}
	out := make(map[int][]uint64, len(ps))
	l.deps.Engine.PartitionKeys(want, func(key uint64) bool {
		if p := ring.PartitionOf(key, parts); l.deps.Primary(key) {
			out[p] = append(out[p], key)
		}
		return true
	})
	return out
}

// ours is this node's digest of a viewer and the cap keys it covers.
type ours struct {
	sum  uint64
	keys []uint64
}

// comparePartition compares partition p, whose viewers here are keys,
// with the peer's primary of p, a slice at a time, and queues the
// viewers that differ.
func (l *Link) comparePartition(parts, p int, keys []uint64, catchUp bool) (st roundStats, err error) {
	now := l.deps.Clock().UnixMilli()
	mine := make(map[uint64]ours, len(keys))
	for i, k := range keys {
		var o ours
		o.sum = l.deps.Engine.LocalDigest(k, now, func(kh uint64) { o.keys = append(o.keys, kh) })
		mine[k] = o
		if (i+1)%64 == 0 && !l.pace(64) {
			return st, errStopped
		}
	}
	n := uint32(min(max(1, (2*len(keys)+proto.MaxRegionDigests-1)/proto.MaxRegionDigests), proto.MaxRegionDigestSlices))
	var done []slice
	for ; n <= proto.MaxRegionDigestSlices; n *= 2 {
		var sst roundStats
		sst, done, err = l.compareSlices(parts, p, n, mine, now, done)
		st.differing += sst.differing
		st.queued += sst.queued
		if !errors.Is(err, errTooLarge) {
			break
		}
	}
	outcome := outcomeAgreed
	switch {
	case errors.Is(err, errStopped):
		return st, err
	case errors.Is(err, errTooLarge), refusedComparison(err):
		// Not comparable: a slice too large at the most slices, or a
		// peer that refuses (another partition count, a node that
		// predates the comparison).
		if !catchUp {
			l.warnOnce("refused", "region link: digest comparison not possible; periodic rounds skip such partitions, catch-ups re-ship them whole", "partition", p, "err", err)
			l.metrics.digests[outcomeSkipped].Inc()
			return st, nil
		}
		l.metrics.digests[outcomeReshipped].Inc()
		n, ok := l.queueAll(keys)
		st.queued += n
		if !ok {
			return st, errStopped
		}
		return st, nil
	case err != nil:
		outcome = outcomeFailed
	case st.differing > 0:
		outcome = outcomeDiffered
	}
	l.metrics.digests[outcome].Inc()
	return st, err
}

// slice is slice s of a partition cut in n (proto.RegionDigest.InSlice).
type slice struct{ n, s uint32 }

// covers reports whether slice c holds every viewer of slice (n, s), n
// a multiple of c.n.
func (c slice) covers(n, s uint32) bool { return n%c.n == 0 && s%c.n == c.s }

// compareSlices compares partition p in n slices, queueing the viewers
// that differ, but for slices within those done (compared before at
// fewer slices); it returns done with the slices it compared, and
// errTooLarge when a slice's keys or answer overflow.
func (l *Link) compareSlices(parts, p int, n uint32, mine map[uint64]ours, now int64, done []slice) (st roundStats, _ []slice, err error) {
	bySlice := make([][]uint64, n)
	for k := range mine {
		i := (k / uint64(parts)) % uint64(n)
		bySlice[i] = append(bySlice[i], k)
	}
	for s := range n {
		if slices.ContainsFunc(done, func(c slice) bool { return c.covers(n, s) }) {
			continue
		}
		req := &proto.RegionDigest{Origin: l.cfg.Name, Now: now, Partitions: uint32(parts), Partition: uint32(p), Slices: n, Slice: s}
		in := bySlice[s]
		seen := map[uint64]bool{}
		for _, k := range in {
			for _, kh := range mine[k].keys {
				if !seen[kh] {
					seen[kh] = true
					req.Keys = append(req.Keys, kh)
				}
			}
		}
		if len(req.Keys) > proto.MaxRegionDigestKeys {
			return st, done, errTooLarge
		}
		slices.Sort(req.Keys)
		var res proto.RegionDigestResult
		if err := l.askDigest(p, req, &res); err != nil {
			return st, done, err
		}
		if res.Truncated {
			return st, done, errTooLarge
		}
		theirs := make(map[uint64]uint64, len(res.Digests))
		for _, d := range res.Digests {
			if req.InSlice(d.Key) { // a peer's answer is checked, not trusted
				theirs[d.Key] = d.Sum
			}
		}
		var differ []uint64
		for _, k := range in {
			if theirs[k] != mine[k].sum {
				differ = append(differ, k)
			}
		}
		for k := range theirs {
			if _, ok := mine[k]; !ok {
				differ = append(differ, k) // this node holds nothing: its state says so
			}
		}
		st.differing += len(differ)
		l.metrics.differing.Add(float64(len(differ)))
		q, ok := l.queueAll(differ)
		st.queued += q
		if !ok {
			return st, done, errStopped
		}
		done = append(done, slice{n, s})
		if !l.pace(len(res.Digests)) {
			return st, done, errStopped
		}
	}
	return st, done, nil
}

// askDigest sends req to the peer region's primary of partition p,
// learning the peer's ring again once when that node says it is not,
// and waiting (backing off) while the node answers another digest.
func (l *Link) askDigest(p int, req *proto.RegionDigest, res *proto.RegionDigestResult) error {
	relearnt := false
	for busy := 0; ; {
		owner, ok := l.dg.ring.Owner(p)
		if !ok || owner.Addr == "" {
			return fmt.Errorf("region %s: no owner of partition %d", l.peer.Name, p)
		}
		err := l.digestCall(owner.Addr, req, res)
		var pe *proto.Error
		switch {
		case !errors.As(err, &pe):
			return err
		case pe.Code == proto.CodeNotOwner && !relearnt:
			relearnt = true
			if err := l.digestRing(); err != nil {
				return err
			}
		case pe.Code == proto.CodeOverloaded && busy < maxBusy:
			busy++
			d := min(l.cfg.RetryMin<<busy, l.cfg.RetryMax)
			if !l.wait(d/2 + rand.N(d/2+1)) {
				return errStopped
			}
		default:
			return err
		}
	}
}

// maxBusy bounds the times one slice is asked again of a node busy with
// another digest.
const maxBusy = 8

// refusedComparison reports whether err is a peer's refusal to compare
// (another partition count, a node that predates RegionDigest and so
// does not know it or does not let a peer send it), as opposed to a
// failure to reach the peer, which is compared again later.
func refusedComparison(err error) bool {
	var pe *proto.Error
	if !errors.As(err, &pe) {
		return false
	}
	switch pe.Code {
	case proto.CodeBadRequest, proto.CodeUnsupported, proto.CodePermissionDenied:
		return true
	}
	return false
}

// digestCall makes one RegionDigest call to addr, dialling it first if
// this round has no connection to it.
func (l *Link) digestCall(addr string, req *proto.RegionDigest, res *proto.RegionDigestResult) error {
	ctx, cancel := context.WithTimeout(l.ctx, l.cfg.Timeout)
	defer cancel()
	c := l.dg.conns[addr]
	if c == nil {
		var err error
		if c, err = l.deps.Dialer.Dial(ctx, addr); err != nil {
			return err
		}
		if l.dg.conns == nil {
			l.dg.conns = map[string]Conn{}
		}
		l.dg.conns[addr] = c
	}
	err := callOn(ctx, c, req, res)
	var pe *proto.Error
	if err != nil && !errors.As(err, &pe) {
		c.Close()
		delete(l.dg.conns, addr)
	}
	return err
}

// digestRing learns the peer region's ring for this round, from the
// members of the last one it knew, then the seeds.
func (l *Link) digestRing() error {
	r, _, err := l.fetchRing(l.dg.ring)
	if err == nil {
		l.dg.ring = r
	}
	return err
}

func (l *Link) closeDigestConns() {
	for addr, c := range l.dg.conns {
		c.Close()
		delete(l.dg.conns, addr)
	}
}

// queueAll queues keys, keeping half the queue free for live changes
// and kicking the shipper as it goes; false when the links closed.
func (l *Link) queueAll(keys []uint64) (n int, ok bool) {
	for _, k := range keys {
		for l.q.len() >= l.cfg.QueueViewers/2 {
			if !l.wait(l.cfg.BatchInterval) {
				return n, false
			}
		}
		if l.q.add(k, l.nowNanos) {
			n++
		}
		if n%64 == 0 {
			select {
			case l.kick <- struct{}{}:
			default:
			}
		}
	}
	if n > 0 {
		select {
		case l.kick <- struct{}{}:
		default:
		}
	}
	return n, true
}

// pace waits as long as n viewers take at CatchUpRate; false when the
// links closed.
func (l *Link) pace(n int) bool {
	if n <= 0 {
		return true
	}
	return l.wait(time.Duration(float64(time.Second) * float64(n) / float64(l.cfg.CatchUpRate)))
}

// wait sleeps d; false when the links closed.
func (l *Link) wait(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-l.stop:
		return false
	case <-t.C:
		return true
	}
}

// warnOnce logs a warning the first time what happens in a link.
func (l *Link) warnOnce(what, msg string, args ...any) {
	if l.dg.warn == nil {
		l.dg.warn = map[string]bool{}
	}
	if !l.dg.warn[what] {
		l.dg.warn[what] = true
		l.log.Warn(msg, args...)
	}
}

// reachedAgain is told by the shipper each time the peer region answers
// after it did not: past the first contact that is the end of an
// outage, after which a digest catch-up finds what the queue lost.
func (l *Link) reachedAgain() {
	if l.dg.everUp.Swap(true) {
		l.requestCatchUp()
	}
}

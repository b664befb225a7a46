package replication

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/fcap-io/fcap/node/engine"
	"github.com/fcap-io/fcap/proto"
	"github.com/fcap-io/fcap/ring"
)

// Anti-entropy. Replication ships every change once its sender is sure
// the peer applied it, but copies can still drift apart: a batch lost
// after the peer acknowledged it, a sender's queue dropped with the
// sender when gossip took the peer out of the ring for a moment, a
// stand-in write whose owner never heard of it. So every
// AntiEntropyInterval the primary of each partition compares its copy
// with each backup's, with the digests fcapctl verify compares
// (engine.Digest, combined per partition by engine.CombineDigests; the
// backup answers a proto.Verify as it answers the operator's).
//
// For partitions whose digests differ it asks for per-viewer digests, a
// budget of viewers per round (partitions beyond it wait for the next
// rounds, in turn). A viewer is repaired once it differed in two
// comparisons in a row with the same two digests: one that differs only
// because a write is on its way changes, or agrees, by the next round,
// and any later write to a viewer ships its whole state anyway. To
// repair, the primary pulls the backup's copy (proto.Pull) and merges
// it, then queues its own copy (now holding both) for the backup.
// Merges never take away what a copy counted, so the two end up equal
// and a repair that races a write loses nothing. A partition with more
// viewers than the budget is compared alone, a slice of its viewers a
// round (proto.Verify.Slices).
//
// A round compares a share of the partitions (share): those that
// differed when last compared, then the others in turn, while their
// viewers fit Config.AntiEntropyViewers. Digests are the cost (a few
// microseconds a viewer, here and on the backup), so a round's cost is
// bounded however much a node holds, and a sweep over every partition
// takes more rounds as the state grows; before the bound, every round
// digested every viewer, and a loaded node's CPU grew with its state.
// A round costs one pass over this node's viewers to size the
// partitions, the digests of the share here and on each backup, one
// more pass each for the per-viewer digests when a partition differs,
// and the states of the viewers that differ; pulled states are paced
// by the transfer rate.

// maxViewerDigests is the default per-round budget of viewer digests
// exchanged with one backup. A VerifyResult holds about 20 bytes a
// viewer: 24000 of them fit the smallest frame a peer reads (see
// node/peers).
const maxViewerDigests = 24000

// AntiEntropyStatus is what anti-entropy found, for the node's status.
type AntiEntropyStatus struct {
	// Rounds counts the rounds run since the node started.
	Rounds int64
	// Differing counts the partitions whose copies differed from a
	// backup's when last compared (0: every copy compared agreed).
	Differing int
	// Unreached counts the backups the last round could not compare
	// with (unreachable, or refusing).
	Unreached int
	// Repaired counts the viewers merged both ways since the node
	// started; LastRepaired those of the last round: copies that still
	// differed after settling (two comparisons in a row).
	Repaired, LastRepaired int64
}

// antiEntropy is the Replicator's anti-entropy state.
type antiEntropy struct {
	rounds    atomic.Int64
	differing atomic.Int64
	unreached atomic.Int64
	repaired  atomic.Int64
	lastRound atomic.Int64 // viewers repaired in the last round

	mu sync.Mutex // one round at a time
	// The fields below are guarded by mu.
	budget int                // viewer digests per backup per round
	peers  map[string]*aePeer // per backup
	// hot holds the partitions that differed from a backup's copy when
	// last compared; cursor the partition the next round's turn starts
	// at (share); sizes the viewers of each partition, counted when a
	// sweep started, and again when resize says one ended.
	hot    map[int]bool
	cursor int
	sizes  []int
	resize bool
}

// aePeer is what the last rounds found of one backup's copies.
type aePeer struct {
	// viewers that differed, with their two digests (ours, theirs).
	viewers map[uint64][2]uint64
	// slice is, per partition compared a slice at a time, the slice
	// to compare next.
	slice map[int]uint32
	// next is the partition the per-viewer comparison starts at when
	// the differing ones exceed the budget.
	next int
}

// AntiEntropy returns what anti-entropy found.
func (r *Replicator) AntiEntropy() AntiEntropyStatus {
	return AntiEntropyStatus{
		Rounds:       r.ae.rounds.Load(),
		Differing:    int(r.ae.differing.Load()),
		Unreached:    int(r.ae.unreached.Load()),
		Repaired:     r.ae.repaired.Load(),
		LastRepaired: r.ae.lastRound.Load(),
	}
}

// partDigest is one partition's digest: viewers counting anything and
// their combined digest.
type partDigest struct {
	viewers uint64
	sum     uint64
}

// antiEntropyRound compares the copies of a share of the partitions
// this node is primary of, and holds, with each backup that holds them
// (share), and repairs those that differ.
func (r *Replicator) antiEntropyRound(ctx context.Context) {
	pl := r.plan.Load()
	if pl == nil {
		return
	}
	r.ae.mu.Lock()
	defer r.ae.mu.Unlock()
	if r.ae.peers == nil {
		r.ae.peers = map[string]*aePeer{}
	}
	if r.ae.hot == nil {
		r.ae.hot = map[int]bool{}
	}
	self := r.cfg.Name
	byPeer := map[*replica][]uint32{}
	owned := make([]bool, len(r.parts)) // primary of, and held
	for p, reps := range pl.targets {
		owners := names(pl.ring, p)
		part := &r.parts[p]
		if len(owners) == 0 || owners[0] != self || !part.have.Load() || part.waitSince.Load() != 0 {
			continue
		}
		owned[p] = true
		for _, rep := range reps {
			// A backup still receiving p is not compared: its transfer
			// will bring it everything.
			if contains(owners, rep.name) && rep.hasSent(p) {
				byPeer[rep] = append(byPeer[rep], uint32(p))
			}
		}
	}
	maps.DeleteFunc(r.ae.hot, func(p int, _ bool) bool { return !owned[p] })
	reps := make([]*replica, 0, len(byPeer))
	for rep := range byPeer {
		reps = append(reps, rep)
	}
	slices.SortFunc(reps, func(a, b *replica) int { return strings.Compare(a.name, b.name) })
	for name := range r.ae.peers {
		if !slices.ContainsFunc(reps, func(rep *replica) bool { return rep.name == name }) {
			delete(r.ae.peers, name) // no longer a backup this node compares with
		}
	}
	// Anti-entropy yields to live replication: a backup with changes
	// still queued for it is compared in a later round, when its sender
	// is idle. Under load every copy differs by the batches in flight, and
	// comparing then costs the hot path per-viewer digests and pulls for
	// differences that the next batch removes anyway.
	idle := reps[:0]
	for _, rep := range reps {
		if !rep.busy() {
			idle = append(idle, rep)
		}
	}
	reps = idle
	before := r.ae.repaired.Load()
	defer func() { r.ae.lastRound.Store(r.ae.repaired.Load() - before) }()
	now := r.now().UnixMilli()
	want := make([]bool, len(r.parts))
	for _, rep := range reps {
		for _, p := range byPeer[rep] {
			want[p] = true
		}
	}
	want = r.share(want)
	var local []partDigest
	if len(reps) > 0 {
		local = r.partitionDigests(want, now)
	}
	unreached := 0
	differed := map[int]bool{} // this round, with some backup
	unsure := map[int]bool{}   // not compared with some backup
	for _, rep := range reps {
		st := r.ae.peers[rep.name]
		if st == nil {
			st = &aePeer{viewers: map[uint64][2]uint64{}, slice: map[int]uint32{}}
			r.ae.peers[rep.name] = st
		}
		ps := slices.DeleteFunc(byPeer[rep], func(p uint32) bool { return !want[p] })
		diff, err := r.compare(ctx, rep, st, ps, owned, local, now)
		for _, p := range diff {
			differed[p] = true
		}
		if err != nil {
			unreached++
			for _, p := range ps {
				unsure[int(p)] = true
			}
			r.log.Debug("anti-entropy", "peer", rep.name, "err", err)
		}
	}
	for p, w := range want {
		switch {
		case !w:
		case differed[p]:
			r.ae.hot[p] = true
		case unsure[p]: // as it was
		default:
			delete(r.ae.hot, p)
		}
	}
	r.ae.differing.Store(int64(len(r.ae.hot)))
	r.ae.unreached.Store(int64(unreached))
	r.ae.rounds.Add(1)
	r.metrics.AntiEntropyRounds.Inc()
}

// share narrows the partitions cand marks to those a round compares:
// the viewers they hold fit AntiEntropyViewers. Those that differed when
// last compared come first (their repair needs a second comparison),
// in up to half the budget; then the others in turn, from where the
// last round stopped, at least one. So a round's cost is bounded
// however many viewers the node holds, and every partition is compared
// once a sweep.
func (r *Replicator) share(cand []bool) []bool {
	budget := r.cfg.AntiEntropyViewers
	if budget <= 0 {
		return cand
	}
	P := len(cand)
	// Partitions are sized by a pass over the keys once a sweep (the
	// pass costs about as much as digesting a budget's worth): sizes
	// change little in one.
	if len(r.ae.sizes) != P || r.ae.resize {
		r.ae.resize = false
		r.ae.sizes = r.eng.PartitionSizes(P)
	}
	size := r.ae.sizes
	out := make([]bool, P)
	used, took := 0, 0
	for i := range P {
		p := (r.ae.cursor + i) % P
		if !cand[p] || !r.ae.hot[p] || took > 0 && used+size[p] > budget/2 {
			continue
		}
		out[p] = true
		used += size[p]
		took++
	}
	turn := 0
	for i := range P {
		p := (r.ae.cursor + i) % P
		if !cand[p] || out[p] {
			continue
		}
		if turn > 0 && used+size[p] > budget {
			r.ae.resize = p <= r.ae.cursor // the turn wrapped: a sweep ended
			r.ae.cursor = p
			return out
		}
		out[p] = true
		used += size[p]
		turn++
	}
	r.ae.resize = true // every candidate fit: a sweep a round
	return out
}

// compare compares partitions ps with one backup and repairs those that
// differ; it returns those that differed. Suspect viewers are kept for
// the partitions still owned and not compared this round.
func (r *Replicator) compare(ctx context.Context, rep *replica, st *aePeer, ps []uint32, owned []bool, local []partDigest, now int64) ([]int, error) {
	if len(ps) == 0 {
		return nil, nil
	}
	var res proto.VerifyResult
	if err := r.callPeer(ctx, rep, &proto.Verify{Now: now, Partitions: ps}, &res); err != nil {
		return nil, err
	}
	budget := uint64(r.ae.budget)
	if budget == 0 {
		budget = maxViewerDigests
	}
	compared := make([]bool, len(r.parts))
	for _, p := range ps {
		compared[p] = true
	}
	var diff []int // differing partitions, from st.next on, then the rest
	size := map[int]uint64{}
	for _, pd := range res.Partitions {
		p := int(pd.Partition)
		if p >= len(local) || !compared[p] || !pd.Held || (pd.Sum == local[p].sum && pd.Viewers == local[p].viewers) {
			continue
		}
		r.metrics.DifferingPartitions.Inc()
		diff = append(diff, p)
		size[p] = max(pd.Viewers, local[p].viewers)
	}
	gone := func(p int) bool { return !owned[p] || compared[p] && size[p] == 0 }
	maps.DeleteFunc(st.viewers, func(k uint64, _ [2]uint64) bool { return gone(ring.PartitionOf(k, len(r.parts))) })
	maps.DeleteFunc(st.slice, func(p int, _ uint32) bool { return gone(p) })
	if len(diff) == 0 {
		return nil, nil
	}
	slices.SortFunc(diff, func(a, b int) int { return cmpFrom(a, b, st.next) })
	// Differing partitions are compared viewer by viewer in turn while
	// the budget lasts; one larger than the budget alone, a slice of its
	// viewers a round (twice as many slices as the budget needs: slices
	// are uneven).
	if p := diff[0]; size[p] > budget {
		n := uint32(min((2*size[p]+budget-1)/budget, maxSlices))
		sl := st.slice[p] % n
		st.slice[p] = sl + 1
		if sl+1 == n {
			st.next = p + 1
			delete(st.slice, p)
		}
		return diff, r.repair(ctx, rep, st, []uint32{uint32(p)}, n, sl, now)
	}
	var picked []uint32
	viewers := uint64(0)
	st.next = 0
	for _, p := range diff {
		if viewers+size[p] > budget {
			st.next = p
			break
		}
		picked = append(picked, uint32(p))
		viewers += size[p]
	}
	return diff, r.repair(ctx, rep, st, picked, 1, 0, now)
}

// maxSlices bounds the slices a partition is compared in.
const maxSlices = 1024

// cmpFrom orders partitions from next on, then those before it.
func cmpFrom(a, b, next int) int {
	if (a >= next) != (b >= next) {
		if a >= next {
			return -1
		}
		return 1
	}
	return a - b
}

// repair compares the viewers of partitions ps in slice sl of n
// (proto.Verify.InSlice) with the backup's and exchanges those that
// differed twice in a row with the same digests: it pulls and merges the
// backup's copies, then queues its own (now holding both) for the
// backup.
func (r *Replicator) repair(ctx context.Context, rep *replica, st *aePeer, ps []uint32, n, sl uint32, now int64) error {
	req := &proto.Verify{Now: now, Partitions: ps, Viewers: true, Slices: n, Slice: sl}
	var res proto.VerifyResult
	if err := r.callPeer(ctx, rep, req, &res); err != nil {
		return err
	}
	if res.Truncated {
		return fmt.Errorf("%s truncated the digests of %d viewers", rep.name, len(res.Viewers))
	}
	want := make([]bool, len(r.parts))
	for _, p := range ps {
		want[p] = true
	}
	compared := func(k uint64) bool {
		return want[ring.PartitionOf(k, len(r.parts))] && req.InSlice(k, len(r.parts))
	}
	ours := r.viewerDigests(want, func(k uint64) bool { return req.InSlice(k, len(r.parts)) }, now)
	theirs := make(map[uint64]uint64, len(res.Viewers))
	for _, v := range res.Viewers {
		if compared(v.Key) { // a peer's answer is checked, not trusted
			theirs[v.Key] = v.Sum
		}
	}
	// Suspects of viewers not compared this round are kept.
	suspects := map[uint64][2]uint64{}
	for k, pair := range st.viewers {
		if !compared(k) {
			suspects[k] = pair
		}
	}
	// Viewers that differ, less those queued for the backup (on their
	// way), looked up under one lock: client writes take it too.
	var differ []uint64
	for k, d := range ours {
		if theirs[k] != d {
			differ = append(differ, k)
		}
	}
	for k := range theirs {
		if _, ok := ours[k]; !ok {
			differ = append(differ, k)
		}
	}
	differ = rep.notDirty(differ)
	var push, pull []uint64
	for _, k := range differ {
		pair := [2]uint64{ours[k], theirs[k]}
		if st.viewers[k] != pair {
			suspects[k] = pair // differs once: confirmed or gone by the next round
			continue
		}
		if pair[0] != 0 {
			push = append(push, k)
		}
		if pair[1] != 0 {
			pull = append(pull, k)
		}
	}
	st.viewers = suspects
	repaired := len(push)
	for _, k := range pull {
		if ours[k] == 0 {
			repaired++
		}
	}
	for len(pull) > 0 {
		n := min(len(pull), proto.MaxPullKeys)
		left, err := r.pull1(ctx, rep, pull[:n])
		if err != nil {
			return err
		}
		if left == n {
			return fmt.Errorf("%s sent none of the states asked for", rep.name)
		}
		pull = pull[n-left:]
	}
	// Counted before the pushes go out, so that whoever sees the copies
	// agree sees them counted.
	if repaired > 0 {
		r.log.Debug("anti-entropy: repaired", "peer", rep.name, "partitions", len(ps), "viewers", repaired)
	}
	r.ae.repaired.Add(int64(repaired))
	r.metrics.RepairedViewers.Add(float64(repaired))
	// Its own copies go after the pull: they now hold the backup's too.
	for _, k := range push {
		rep.markDirty(k, ring.PartitionOf(k, len(r.parts)))
	}
	return nil
}

// pull1 asks the backup for its copies of keys and merges them; it
// returns how many of keys (at their end) did not fit in the answer.
func (r *Replicator) pull1(ctx context.Context, rep *replica, keys []uint64) (left int, err error) {
	var res proto.PullResult
	if err := r.callPeer(ctx, rep, &proto.Pull{From: r.cfg.Name, Keys: keys}, &res); err != nil {
		return 0, err
	}
	if res.Left > uint64(len(keys)) {
		return 0, fmt.Errorf("%w: %s left %d of %d states", proto.ErrBadRequest, rep.name, res.Left, len(keys))
	}
	if !r.throttle.wait(len(res.States), r.stop) {
		return 0, fmt.Errorf("replication stopped")
	}
	if _, err := r.Apply(&proto.Replicate{From: res.From, HighWater: res.HighWater, States: res.States}); err != nil {
		return 0, err
	}
	return int(res.Left), nil
}

// ServePull answers a peer's Pull: this node's copies of the viewers it
// names, as many as fit in one message.
func (r *Replicator) ServePull(m *proto.Pull) *proto.PullResult {
	res := &proto.PullResult{From: r.cfg.Name, HighWater: r.eng.HighWater()}
	var buf []byte
	for i, k := range m.Keys {
		next := r.eng.Export(k, buf)
		if len(next) > proto.MaxReplicateBytes {
			res.Left = uint64(len(m.Keys) - i)
			break
		}
		buf = next
	}
	res.States = buf
	return res
}

// callPeer sends one request to a peer within the replication timeout.
func (r *Replicator) callPeer(ctx context.Context, rep *replica, req, resp proto.Message) error {
	rep.mu.Lock()
	addr := rep.addr
	rep.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	defer cancel()
	return r.peers.Call(ctx, addr, req, resp)
}

// partitionDigests digests the partitions want marks, in one pass over
// the engine.
func (r *Replicator) partitionDigests(want []bool, now int64) []partDigest {
	out := make([]partDigest, len(want))
	r.digests(want, nil, now, func(p int, _, d uint64) {
		out[p].viewers++
		out[p].sum = engine.CombineDigests(out[p].sum, d)
	})
	return out
}

// viewerDigests digests every viewer of the partitions want marks, and
// in slice, that counts anything.
func (r *Replicator) viewerDigests(want []bool, slice func(key uint64) bool, now int64) map[uint64]uint64 {
	out := map[uint64]uint64{}
	r.digests(want, slice, now, func(_ int, k, d uint64) { out[k] = d })
	return out
}

// digests calls fn with the digest of every viewer of the partitions
// want marks, and in slice (nil: all), that counts anything at now (as
// storage.Digests, which answers Verify, walks them).
func (r *Replicator) digests(want []bool, slice func(key uint64) bool, now int64, fn func(p int, key, digest uint64)) {
	r.eng.PartitionKeys(want, func(k uint64) bool {
		p := ring.PartitionOf(k, len(want))
		if slice != nil && !slice(k) {
			return true
		}
		if d, _ := r.eng.Digest(k, now); d != 0 {
			fn(p, k, d)
		}
		return true
	})
}

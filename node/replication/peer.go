package replication

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/fcap-io/fcap/proto"
)

// replica sends this node's changes, and whole partitions, to one peer.
// It has one goroutine and one connection; a send waits for its answer,
// so everything a peer acknowledged was applied in order.
type replica struct {
	r    *Replicator
	name string
	kick chan struct{}
	quit chan struct{}

	mu sync.Mutex
	// The fields below are guarded by mu.
	addr        string
	incarnation int64               // the peer process's, from its gossip metadata
	dirty       map[uint64]struct{} // changed viewers to send
	dirtySince  time.Time           // when the oldest of them changed
	transfers   []int               // partitions to send whole
	handoffs    []int               // partitions to hand over: last changes, then Done
	offers      []int               // partitions whose recovered state to send, with no marker (recovery.go)
	leaving     []*Plan             // plans the hand-overs leave: their writes must end first
	queued      map[int]bool        // partitions in transfers or being sent
	copyAsked   map[int]int64       // partitions the peer asked a copy of (SyncRequest.Copies), and when (unix ns): a Copied marker ends a transfer of them begun after that
	sent        map[int]bool        // partitions the peer received whole
	forgot      map[int]uint32      // per partition: how often forget ran (a transfer in flight then must not count as sent)
	waiters     []chan error        // strict writes waiting for the next flush
	closed      bool
	maxDirty    int // the bound on dirty: maxDirty, lower in tests
}

// maxDirty bounds a peer's set of changed viewers; past it a change
// queues its whole partition instead (bounded by the partition count).
const maxDirty = 1 << 20

func newReplica(r *Replicator, name, addr string) *replica {
	return &replica{
		r: r, name: name, addr: addr,
		kick:      make(chan struct{}, 1),
		quit:      make(chan struct{}),
		dirty:     map[uint64]struct{}{},
		queued:    map[int]bool{},
		sent:      map[int]bool{},
		copyAsked: map[int]int64{},
		maxDirty:  maxDirty,
	}
}

func (rep *replica) poke() {
	select {
	case rep.kick <- struct{}{}:
	default:
	}
}

// setMember records the peer's address and incarnation. A new
// incarnation is a restarted process that holds nothing: every partition
// sent to its earlier self must be sent again.
func (rep *replica) setMember(addr string, incarnation int64) {
	rep.mu.Lock()
	rep.addr = addr
	if rep.incarnation != incarnation {
		if rep.incarnation != 0 {
			rep.sent = map[int]bool{}
		}
		rep.incarnation = incarnation
	}
	rep.mu.Unlock()
}

// markDirty queues a changed viewer of partition p. It reports false
// when the set was full and p's whole transfer was queued instead: the
// next flush answers the strict writers waiting on it (sendDirty) before
// that transfer is sent, so such a write is not replicated when they are
// answered (Plan.WaitSynced).
func (rep *replica) markDirty(key uint64, p int) bool {
	rep.mu.Lock()
	if rep.closed {
		rep.mu.Unlock()
		return true // addWaiter answers that replication stopped
	}
	queued := len(rep.dirty) < rep.maxDirty
	if !queued {
		rep.transferLocked(p)
	} else {
		if len(rep.dirty) == 0 {
			rep.dirtySince = time.Now()
		}
		rep.dirty[key] = struct{}{}
	}
	rep.mu.Unlock()
	rep.poke()
	return queued
}

// backlogged is the error of a strict write whose change did not fit in
// rep's set of changed viewers (markDirty).
func (rep *replica) backlogged() error {
	return fmt.Errorf("replication to %s is %d viewers behind: the write is not acknowledged until it catches up", rep.name, rep.maxDirty)
}

// handoff queues the hand-over of partition p to a new primary: every
// queued change, then its Done marker.
func (rep *replica) handoff(p int, leaving *Plan) {
	rep.mu.Lock()
	if !rep.closed {
		rep.handoffs = append(rep.handoffs, p)
		if leaving != nil {
			rep.leaving = append(rep.leaving, leaving)
		}
		rep.r.parts[p].pushing.Add(1)
	}
	rep.mu.Unlock()
	rep.poke()
}

// handingOff reports whether a hand-over of p is queued and not sent.
func (rep *replica) handingOff(p int) bool {
	rep.mu.Lock()
	defer rep.mu.Unlock()
	for _, x := range rep.handoffs {
		if x == p {
			return true
		}
	}
	return false
}

// transfer queues partition p to be sent whole.
func (rep *replica) transfer(p int) {
	rep.mu.Lock()
	rep.transferLocked(p)
	rep.mu.Unlock()
	rep.poke()
}

func (rep *replica) transferLocked(p int) {
	if rep.closed || rep.queued[p] {
		return
	}
	rep.queued[p] = true
	rep.transfers = append(rep.transfers, p)
	rep.r.parts[p].pushing.Add(1)
}

// notDirty returns the keys of viewers not queued for the peer, in place.
func (rep *replica) notDirty(keys []uint64) []uint64 {
	rep.mu.Lock()
	defer rep.mu.Unlock()
	out := keys[:0]
	for _, k := range keys {
		if _, ok := rep.dirty[k]; !ok {
			out = append(out, k)
		}
	}
	return out
}

func (rep *replica) hasSent(p int) bool {
	rep.mu.Lock()
	defer rep.mu.Unlock()
	return rep.sent[p]
}

// owns reports whether the peer owns p, now or in the future ring, in
// this node's current plan.
func (rep *replica) owns(p int) bool {
	pl := rep.r.plan.Load()
	return pl != nil && (contains(names(pl.ring, p), rep.name) || contains(names(pl.future, p), rep.name))
}

// markHeld records that the peer holds p without this node sending it.
func (rep *replica) markHeld(p int) {
	rep.mu.Lock()
	rep.sent[p] = true
	rep.mu.Unlock()
}

// forget makes p unsent: the peer stopped owning it and may drop it.
func (rep *replica) forget(p int) {
	rep.mu.Lock()
	delete(rep.sent, p)
	if rep.forgot == nil {
		rep.forgot = map[int]uint32{}
	}
	rep.forgot[p]++
	rep.mu.Unlock()
}

func (rep *replica) addWaiter(ch chan error) {
	rep.mu.Lock()
	if rep.closed {
		rep.mu.Unlock()
		ch <- errors.New("replication to " + rep.name + " stopped")
		return
	}
	rep.waiters = append(rep.waiters, ch)
	rep.mu.Unlock()
	rep.poke()
}

// busy reports whether anything is left to send.
func (rep *replica) busy() bool {
	rep.mu.Lock()
	defer rep.mu.Unlock()
	return len(rep.dirty) > 0 || len(rep.transfers) > 0 || len(rep.handoffs) > 0 || len(rep.offers) > 0 || len(rep.waiters) > 0
}

func (rep *replica) backlog() (int, time.Duration) {
	rep.mu.Lock()
	defer rep.mu.Unlock()
	if len(rep.dirty) == 0 {
		return 0, 0
	}
	return len(rep.dirty), time.Since(rep.dirtySince)
}

func (rep *replica) close() {
	rep.mu.Lock()
	defer rep.mu.Unlock()
	if rep.closed {
		return
	}
	rep.closed = true
	close(rep.quit)
	for _, p := range append(rep.transfers, rep.handoffs...) {
		rep.r.parts[p].pushing.Add(-1)
	}
	rep.transfers, rep.handoffs, rep.offers = nil, nil, nil
	for _, w := range rep.waiters {
		w <- errors.New("replication to " + rep.name + " stopped")
	}
	rep.waiters = nil
}

// run sends until the replica is closed or the node stops, retrying with
// backoff while the peer cannot be reached.
// stopping reports whether the replica, or the whole replicator, is
// told to stop.
func (rep *replica) stopping() bool {
	select {
	case <-rep.quit:
		return true
	case <-rep.r.stop:
		return true
	default:
		return false
	}
}

func (rep *replica) run() {
	s := &sender{rep: rep}
	defer s.disconnect()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	backoff := time.Duration(0)
	for {
		select {
		case <-rep.quit:
			return
		case <-rep.r.stop:
			return
		case <-rep.kick:
		case <-tick.C:
		}
		for {
			if rep.stopping() {
				return
			}
			more, err := s.step()
			if err != nil {
				rep.r.metrics.Errors.Inc()
				rep.r.log.Debug("replicate", "peer", rep.name, "err", err)
				backoff = min(max(2*backoff, 10*time.Millisecond), time.Second)
				select {
				case <-rep.quit:
					return
				case <-rep.r.stop:
					return
				case <-time.After(backoff):
				}
				continue
			}
			backoff = 0
			if !more {
				break
			}
		}
	}
}

// sender is the state of a replica's goroutine.
type sender struct {
	rep  *replica
	conn Conn
	buf  []byte
	keys []uint64
	res  proto.ReplicateResult
	// otherRing: the peer's last answer came from a ring other than the
	// one this node sent by (its epoch differed). Strict writers are not
	// acknowledged by such an answer: a peer on another ring may have
	// another primary for the partition, whose grants this node's copy
	// does not hold (ARCHITECTURE.md, "Strict writes under partitions").
	otherRing error
}

// step sends what is queued: changed viewers, then whole partitions
// (paced by the node's transfer rate, each followed by the changes that
// arrived meanwhile and its Done marker, so strict writers never wait
// behind a long transfer and a marker follows every change it covers),
// then the markers of hand-overs, releasing
// waiters as soon as the changes they wait for are applied. more says
// work arrived meanwhile.
func (s *sender) step() (more bool, err error) {
	rep := s.rep
	rep.mu.Lock()
	transfers, handoffs, leaving, offers := rep.transfers, rep.handoffs, rep.leaving, rep.offers
	rep.transfers, rep.handoffs, rep.leaving, rep.offers = nil, nil, nil, nil
	forgot := make(map[int]uint32, len(transfers)+len(handoffs))
	for _, ps := range [][]int{transfers, handoffs} {
		for _, p := range ps {
			forgot[p] = rep.forgot[p]
		}
	}
	rep.mu.Unlock()
	// A hand-over first lets the writes in flight under the plan it
	// leaves finish (and mark their viewers), so they go before Done.
	for _, pl := range leaving {
		pl.drain(time.Now().Add(5 * time.Second))
	}
	requeue := func(err error) error {
		rep.mu.Lock()
		rep.transfers = append(transfers, rep.transfers...)
		rep.handoffs = append(handoffs, rep.handoffs...)
		rep.leaving = append(leaving, rep.leaving...)
		rep.offers = append(offers, rep.offers...)
		rep.mu.Unlock()
		return err
	}
	if err := s.sendDirty(); err != nil {
		return false, requeue(err)
	}
	if len(transfers) > 0 {
		n, err := s.sendPartitions(transfers, forgot)
		transfers = transfers[n:]
		if err != nil {
			return false, requeue(err)
		}
	}
	if len(offers) > 0 {
		n, err := s.sendOffers(offers)
		offers = offers[n:]
		if err != nil {
			return false, requeue(err)
		}
	}
	if len(handoffs) > 0 {
		var handed []uint32
		for _, p := range handoffs {
			handed = append(handed, uint32(p))
		}
		if _, err := s.sendMarkers(nil, handed); err != nil {
			return false, requeue(err)
		}
		rep.mu.Lock()
		for _, p := range handoffs {
			if rep.forgot[p] == forgot[p] {
				rep.sent[p] = true
			}
		}
		rep.mu.Unlock()
		for _, p := range handoffs {
			rep.r.parts[p].pushing.Add(-1)
		}
		rep.r.transferred(len(handoffs))
	}
	rep.mu.Lock()
	more = len(rep.transfers) > 0 || len(rep.handoffs) > 0 || len(rep.offers) > 0 || len(rep.dirty) > 0 || len(rep.waiters) > 0
	rep.mu.Unlock()
	return more, nil
}

// sendDirty sends the changed viewers queued so far and then answers the
// strict writers waiting for them. On failure the viewers are queued
// again and the waiters get the error (their clients fail closed).
func (s *sender) sendDirty() error {
	rep := s.rep
	rep.mu.Lock()
	dirty, since := rep.dirty, rep.dirtySince
	waiters := rep.waiters
	if len(dirty) == 0 && len(waiters) == 0 {
		rep.mu.Unlock()
		return nil
	}
	rep.dirty = map[uint64]struct{}{}
	rep.waiters = nil
	rep.mu.Unlock()
	answer := func(err error) {
		for _, w := range waiters {
			w <- err
		}
	}
	if len(dirty) == 0 {
		// What they wait for went with an earlier batch: its answer
		// stands for them.
		answer(s.otherRing)
		return nil
	}
	s.keys = s.keys[:0]
	for k := range dirty {
		s.keys = append(s.keys, k)
	}
	refused, err := s.sendKeys(s.keys, nil, nil)
	if err != nil {
		rep.mu.Lock()
		// The lag is the age of the oldest change still unsent: a
		// failed send keeps it, so the lag grows while the peer is
		// unreachable instead of restarting at every retry.
		if len(rep.dirty) == 0 || since.Before(rep.dirtySince) {
			rep.dirtySince = since
		}
		for k := range dirty {
			rep.dirty[k] = struct{}{}
		}
		rep.mu.Unlock()
		answer(err)
		return err
	}
	if refused > 0 {
		// The peer is the primary of some of these and holds them: this
		// node's ring is behind, and its state may be older than what the
		// peer acknowledged since. They are dropped, and strict writers
		// learn they were not replicated (their clients fail closed).
		rep.r.metrics.Refused.Add(float64(refused))
		answer(fmt.Errorf("%s refused %d states: it is their primary", rep.name, refused))
		return nil
	}
	answer(s.otherRing)
	return nil
}

// sendPartitions sends partitions whole: every viewer the engine holds in
// them (one pass over the engine for all of them), paced by the node's
// transfer rate, each followed by the changes queued meanwhile and its
// Done marker. forgot holds each partition's forget count when it was
// dequeued: a partition the peer stopped owning since is not marked sent.
// It returns how many partitions were sent.
func (s *sender) sendPartitions(ps []int, forgot map[int]uint32) (sent int, err error) {
	rep := s.rep
	began := time.Now().UnixNano() // before the keys are listed and exported
	want := rep.r.keysOf(ps)
	for i, p := range ps {
		start := time.Now()
		if _, err := s.sendKeys(want[p], nil, rep.r.throttle); err != nil {
			return i, err
		}
		rep.r.log.Debug("partition sent", "peer", rep.name, "partition", p, "viewers", len(want[p]), "took", time.Since(start))
		// Changes made during the pass go before the marker, which
		// tells the peer it now holds all of p: it may serve p at once,
		// without waiting for the rest of the batch.
		if err := s.sendDirty(); err != nil {
			return i, err
		}
		// A copy this node claimed (or waits for again) is no current
		// copy: its states merge (they only add), but no Done marker
		// ends the peer's wait with it, or the peer could serve strict
		// caps from what a minority kept while the majority granted
		// (a 3/2 split's heal did: two minority nodes handed each other
		// their claimed copies). The peer asks a holder in turn.
		// A copy asked for is this transfer only if the transfer began
		// after the ask: one begun before may have exported p before
		// writes the asker never got (this node is not replicating p to
		// it). Then p is sent again, and that one carries the marker.
		rep.mu.Lock()
		askedAt, asked := rep.copyAsked[p]
		copied := asked && askedAt <= began
		if copied {
			delete(rep.copyAsked, p)
		}
		rep.mu.Unlock()
		cur := rep.r.current(p)
		switch {
		case copied:
			// Asked for (a claim): Copied says this was all of it, begun
			// after the ask; Done beside it that the copy is current.
			var done []uint32
			if cur {
				done = []uint32{uint32(p)}
			}
			if _, err := s.sendMsg(nil, done, nil, []uint32{uint32(p)}); err != nil {
				return i, err
			}
		case cur:
			if _, err := s.sendMarkers([]uint32{uint32(p)}, nil); err != nil {
				return i, err
			}
		default:
			rep.r.log.Debug("partition sent without its Done marker: this node's copy is claimed or awaited", "peer", rep.name, "partition", p)
		}
		owner := rep.owns(p)
		rep.mu.Lock()
		delete(rep.queued, p)
		if _, again := rep.copyAsked[p]; again {
			rep.transferLocked(p) // asked for during this transfer: once more, then the marker
		}
		switch {
		case rep.forgot[p] == forgot[p]:
			rep.sent[p] = true
		case owner:
			// The peer stopped owning p during the transfer and owns it
			// again: it may have dropped what arrived before, and the
			// transfer asked for meanwhile found this one queued. Send
			// it again, or p stays unsent (and counted under-replicated)
			// until the next ring change.
			rep.transferLocked(p)
		}
		rep.mu.Unlock()
		rep.r.parts[p].pushing.Add(-1)
		rep.r.transferred(1)
	}
	return len(ps), nil
}

// sendKeys exports viewers and sends them in messages of at most half
// proto.MaxReplicateBytes, the last one carrying done, each paced by th
// when it is not nil. It returns how many states the peer refused.
func (s *sender) sendKeys(keys []uint64, done []uint32, th *throttle) (refused int, err error) {
	var other error // any answer of the batch from another ring
	defer func() {
		if other != nil {
			s.otherRing = other
		}
	}()
	s.buf = s.buf[:0]
	for i, k := range keys {
		s.buf = s.rep.r.eng.Export(k, s.buf)
		last := i == len(keys)-1
		if len(s.buf) >= proto.MaxReplicateBytes/2 || last {
			var d []uint32
			if last {
				d = done
			}
			if !th.wait(len(s.buf), s.rep.quit) {
				return refused, errors.New("replication to " + s.rep.name + " stopped")
			}
			r, err := s.send(s.buf, d)
			if err != nil {
				return refused, err
			}
			if s.otherRing != nil {
				other = s.otherRing
			}
			refused += r
			s.buf = s.buf[:0]
		}
	}
	if len(keys) == 0 && len(done) > 0 {
		_, err := s.send(nil, done)
		return 0, err
	}
	return refused, nil
}

// sendMarkers sends Done and Handoff markers.
func (s *sender) sendMarkers(done, handoff []uint32) (int, error) {
	return s.sendMsg(nil, done, handoff, nil)
}

// send writes one Replicate and waits for its answer.
func (s *sender) send(states []byte, done []uint32) (refused int, err error) {
	return s.sendMsg(states, done, nil, nil)
}

func (s *sender) sendMsg(states []byte, done, handoff, copied []uint32) (refused int, err error) {
	r := s.rep.r
	if err := s.connect(); err != nil {
		return 0, err
	}
	var epoch uint64
	if pl := r.plan.Load(); pl != nil {
		epoch = pl.ring.Epoch()
	}
	msg := &proto.Replicate{From: r.cfg.Name, Epoch: epoch, HighWater: r.eng.HighWater(), States: states, Done: done, Handoff: handoff, Copied: copied}
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.Timeout)
	defer cancel()
	if err := s.conn.Call(ctx, msg, &s.res); err != nil {
		var refusal *proto.Error
		if errors.As(err, &refusal) {
			return 0, fmt.Errorf("%s: %w", s.rep.name, refusal) // the connection stays good
		}
		s.disconnect()
		return 0, err
	}
	r.metrics.ReplicatedBytes.Add(float64(len(states)))
	s.otherRing = nil
	if s.res.Epoch != epoch {
		s.otherRing = fmt.Errorf("%w: %s answered from ring %016x, this node sent from %016x", ErrOtherRing, s.rep.name, s.res.Epoch, epoch)
	}
	return int(s.res.Refused), nil
}

func (s *sender) connect() error {
	if s.conn != nil {
		return nil
	}
	s.rep.mu.Lock()
	addr := s.rep.addr
	s.rep.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c, err := s.rep.r.peers.Dial(ctx, addr)
	if err != nil {
		return err
	}
	s.conn = c
	return nil
}

func (s *sender) disconnect() {
	if s.conn != nil {
		s.conn.Close()
		s.conn = nil
	}
}

package ingest

import (
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Tracking what may be committed. Batches finish out of order (several
// workers, several owners), but a partition's offset may move past a
// record only once every record before it is accounted for. Each
// partition keeps its segments (its records inside one batch) in offset
// order; a finished segment at the head moves the committable offset.

// tp names a partition.
type tp struct {
	topic     string
	partition int32
}

// segment is one partition's records inside a batch.
type segment struct {
	part    *partState
	records []*kgo.Record
	done    bool
}

// batch is the unit a worker records: up to BatchRecords records of one
// poll, from one or more partitions.
type batch struct {
	segs []*segment
	n    int // records
}

// partState is what the ingester knows of a partition it owns.
type partState struct {
	tp tp
	// pending holds the segments dispatched and not yet passed by the
	// committable offset, in offset order.
	pending []*segment
	// next is the offset to commit: one past the last record of the
	// finished prefix of pending, but never past a record still in
	// flight (a fetch that went back puts lower offsets behind higher
	// ones in pending). Offset -1: nothing to commit yet.
	next kgo.EpochOffset
	// done is one past the highest record of the finished prefix of
	// pending. Offset -1: none yet.
	done kgo.EpochOffset
	// committed is the last offset committed by this ingester, -1 none.
	committed int64
	// start is the first offset this ingester fetched, the baseline of
	// lag before anything is committed; -1 unknown.
	start int64
	// hwm is the high watermark seen on the last fetch, -1 unknown.
	hwm int64
	// inFlight counts the segments dispatched and neither finished nor
	// abandoned.
	inFlight int
	// last is the offset of the last record added, -1 none.
	last int64
}

// tracker holds every partition the ingester owns.
type tracker struct {
	mu sync.Mutex
	// changed is broadcast when a segment finishes or a commit lands;
	// it uses mu.
	changed *sync.Cond
	// parts is guarded by mu.
	parts map[tp]*partState
	// inFlight counts the records dispatched and not finished; guarded
	// by mu.
	inFlight int
}

func newTracker() *tracker {
	t := &tracker{parts: map[tp]*partState{}}
	t.changed = sync.NewCond(&t.mu)
	return t
}

// part returns the state of a partition, creating it. mu is held.
func (t *tracker) part(k tp) *partState {
	ps := t.parts[k]
	if ps == nil {
		none := kgo.EpochOffset{Epoch: -1, Offset: -1}
		ps = &partState{tp: k, next: none, done: none, committed: -1, start: -1, hwm: -1, last: -1}
		t.parts[k] = ps
	}
	return ps
}

// fetched says where a fetch's records stand against the ones before it
// on their partition: worth a log line when they do not follow on.
type fetched struct {
	// first is the first offset fetched since the partition was
	// (re)assigned, -1 for a later fetch: where consuming resumed.
	first int64
	// prev is one past the last offset fetched before, -1 for none;
	// at is this fetch's first offset. at > prev: the fetch skipped
	// [prev, at) (legitimate on a compacted or transactional topic, a
	// broker's fault on a plain one; the committed offset moves past
	// them). at < prev: the fetch went back (the client reset its
	// position: data loss detected, an offset out of range); the
	// committed offset waits for the records fetched again.
	prev, at int64
}

// add cuts a fetched partition's records into segments appended to the
// batches being built, and records its high watermark.
func (t *tracker) add(p kgo.FetchTopicPartition, out *[]*batch, batchRecords int) fetched {
	t.mu.Lock()
	defer t.mu.Unlock()
	ps := t.part(tp{p.Topic, p.Partition})
	ps.hwm = p.HighWatermark
	recs := p.Records
	f := fetched{first: -1, prev: -1, at: -1}
	if len(recs) > 0 {
		f.at = recs[0].Offset
		if ps.start < 0 {
			ps.start, f.first = recs[0].Offset, recs[0].Offset
		}
		if ps.last >= 0 {
			f.prev = ps.last + 1
		}
		ps.last = recs[len(recs)-1].Offset
	}
	for len(recs) > 0 {
		if len(*out) == 0 || (*out)[len(*out)-1].n >= batchRecords {
			*out = append(*out, &batch{})
		}
		b := (*out)[len(*out)-1]
		n := min(len(recs), batchRecords-b.n)
		s := &segment{part: ps, records: recs[:n:n]}
		recs = recs[n:]
		b.segs = append(b.segs, s)
		b.n += n
		ps.pending = append(ps.pending, s)
		ps.inFlight++
		t.inFlight += n
	}
	return f
}

// finish marks a batch accounted for and moves the committable offsets.
// A segment of a partition given up meanwhile moves nothing.
func (t *tracker) finish(b *batch) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.inFlight -= b.n
	for _, s := range b.segs {
		s.done = true
		ps := s.part
		ps.inFlight--
		if t.parts[ps.tp] != ps {
			continue
		}
		ps.advance()
	}
	t.changed.Broadcast()
}

// advance moves the committable offset over the finished prefix of
// pending, but never past the first record of a segment still in
// flight: pending is in fetch order, which is offset order unless a
// fetch went back.
func (ps *partState) advance() {
	for len(ps.pending) > 0 && ps.pending[0].done {
		last := ps.pending[0].records[len(ps.pending[0].records)-1]
		if last.Offset+1 > ps.done.Offset {
			ps.done = kgo.EpochOffset{Epoch: last.LeaderEpoch, Offset: last.Offset + 1}
		}
		ps.pending[0] = nil
		ps.pending = ps.pending[1:]
	}
	next := ps.done
	for _, s := range ps.pending {
		if first := s.records[0]; !s.done && first.Offset < next.Offset {
			next = kgo.EpochOffset{Epoch: first.LeaderEpoch, Offset: first.Offset}
		}
	}
	ps.next = next
}

// abandon gives up a batch that will not be accounted for (the ingester
// is stopping): its segments stay pending, so no offset moves past them,
// and their records are replayed by whoever resumes.
func (t *tracker) abandon(b *batch) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.inFlight -= b.n
	for _, s := range b.segs {
		s.part.inFlight--
	}
	t.changed.Broadcast()
}

// committable returns the offsets to commit: of the given partitions (all
// when keys is nil), those that moved since the last commit.
func (t *tracker) committable(keys []tp) map[string]map[int32]kgo.EpochOffset {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]map[int32]kgo.EpochOffset{}
	add := func(ps *partState) {
		if ps == nil || ps.next.Offset < 0 || ps.next.Offset <= ps.committed {
			return
		}
		if out[ps.tp.topic] == nil {
			out[ps.tp.topic] = map[int32]kgo.EpochOffset{}
		}
		out[ps.tp.topic][ps.tp.partition] = ps.next
	}
	if keys == nil {
		for _, ps := range t.parts {
			add(ps)
		}
	} else {
		for _, k := range keys {
			add(t.parts[k])
		}
	}
	return out
}

// committed records a successful commit.
func (t *tracker) committed(offsets map[string]map[int32]kgo.EpochOffset) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for topic, parts := range offsets {
		for p, eo := range parts {
			if ps := t.parts[tp{topic, p}]; ps != nil && eo.Offset > ps.committed {
				ps.committed = eo.Offset
			}
		}
	}
}

// lags returns every owned partition's lag: the high watermark minus the
// committed offset (or the first offset fetched, before any commit).
func (t *tracker) lags(f func(k tp, lag int64)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for k, ps := range t.parts {
		base := ps.committed
		if base < 0 {
			base = ps.start
		}
		if ps.hwm < 0 || base < 0 {
			continue
		}
		f(k, max(ps.hwm-base, 0))
	}
}

// drain waits until the given partitions (all when keys is nil) have no
// segment in flight, or the timeout passes; it reports whether they
// drained.
func (t *tracker) drain(keys []tp, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	wake := time.AfterFunc(timeout, func() {
		t.mu.Lock()
		t.changed.Broadcast()
		t.mu.Unlock()
	})
	defer wake.Stop()
	t.mu.Lock()
	defer t.mu.Unlock()
	for !t.idle(keys) {
		if !time.Now().Before(deadline) {
			return false
		}
		t.changed.Wait()
	}
	return true
}

// idle reports whether the partitions have nothing in flight. mu is held.
func (t *tracker) idle(keys []tp) bool {
	if keys == nil {
		return t.inFlight == 0
	}
	for _, k := range keys {
		if ps := t.parts[k]; ps != nil && ps.inFlight > 0 {
			return false
		}
	}
	return true
}

// forget drops partitions the ingester no longer owns.
func (t *tracker) forget(keys []tp) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, k := range keys {
		delete(t.parts, k)
	}
	t.changed.Broadcast()
}

// records returns the records in flight.
func (t *tracker) records() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.inFlight
}

package region

import "sync"

// entry is a viewer waiting to be shipped, with when it was first marked
// (Unix nanoseconds): the lag is the age of the oldest.
type entry struct {
	key uint64
	at  int64
}

// queue is a link's bounded, de-duplicating set of changed viewers, in
// the order they were first marked. A viewer marked again while it waits
// is not queued twice (its state is read when it is shipped, so the
// newest change goes with it); one marked while it is being shipped is
// queued again, since the state on its way may predate that change.
type queue struct {
	bound int

	mu sync.Mutex
	// The fields below are guarded by mu.
	set  map[uint64]struct{}
	fifo []entry // fifo[head:] wait, oldest first
	head int
}

func newQueue(bound int) *queue {
	return &queue{bound: bound, set: map[uint64]struct{}{}}
}

// add queues key, first marked at (a func, so the clock is read only for
// a viewer not already waiting). It reports false when the queue is full
// and key is not in it: the change is not queued.
func (q *queue) add(key uint64, at func() int64) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, ok := q.set[key]; ok {
		return true
	}
	if len(q.set) >= q.bound {
		return false
	}
	q.set[key] = struct{}{}
	q.fifo = append(q.fifo, entry{key: key, at: at()})
	return true
}

// take moves up to n of the oldest waiting viewers to dst.
func (q *queue) take(dst []entry, n int) []entry {
	q.mu.Lock()
	defer q.mu.Unlock()
	end := min(q.head+n, len(q.fifo))
	for _, e := range q.fifo[q.head:end] {
		delete(q.set, e.key)
		dst = append(dst, e)
	}
	q.head = end
	switch {
	case q.head == len(q.fifo):
		q.fifo, q.head = q.fifo[:0], 0
		if cap(q.fifo) > 4*q.bound/3+1024 {
			q.fifo = nil
		}
	case q.head > 4096 && q.head > len(q.fifo)/2:
		q.fifo = append(q.fifo[:0], q.fifo[q.head:]...)
		q.head = 0
	}
	return dst
}

// len is the number of waiting viewers.
func (q *queue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.set)
}

// oldest is when the oldest waiting viewer was marked, 0 when none
// waits.
func (q *queue) oldest() int64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.head == len(q.fifo) {
		return 0
	}
	return q.fifo[q.head].at
}

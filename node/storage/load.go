package storage

import (
	"encoding/binary"
	"sync"
)

// Loading the data dir on several cores. Decoding and importing a state
// is nearly all of a restart's work, and states of different viewers are
// independent, so a loader spreads them over goroutines by viewer: every
// state of one viewer goes to the same goroutine, in the order it was
// given, and so the last state given for a viewer is the one that stays,
// as in a replay on one goroutine. The reader (checksums, framing) stays
// sequential: it is a small part of the work.

// loadBatchBytes is how many payload bytes a batch collects before it is
// handed to its goroutine.
const loadBatchBytes = 256 << 10

// loadQueue is how many batches may wait per goroutine: it bounds the
// loader's memory to about workers x (loadQueue+2) x loadBatchBytes.
const loadQueue = 4

// loader applies logged payloads (durable.apply's format) on workers
// goroutines.
type loader struct {
	apply func([]byte)
	queue []chan *loadBatch // per worker
	cur   []*loadBatch      // per worker: the batch being filled
	free  sync.Pool
	wg    sync.WaitGroup
}

// loadBatch is a run of payloads, copied end to end.
type loadBatch struct {
	buf  []byte
	ends []int // end offset of each payload in buf
}

// newLoader starts a loader. With one worker it applies every payload on
// the caller's goroutine and starts nothing.
func newLoader(workers int, apply func([]byte)) *loader {
	ld := &loader{apply: apply}
	if workers <= 1 {
		return ld
	}
	ld.queue = make([]chan *loadBatch, workers)
	ld.cur = make([]*loadBatch, workers)
	for i := range ld.queue {
		ch := make(chan *loadBatch, loadQueue)
		ld.queue[i] = ch
		ld.wg.Add(1)
		go func() {
			defer ld.wg.Done()
			for b := range ch {
				start := 0
				for _, end := range b.ends {
					ld.apply(b.buf[start:end])
					start = end
				}
				b.buf, b.ends = b.buf[:0], b.ends[:0]
				ld.free.Put(b)
			}
		}()
	}
	return ld
}

// add queues a payload; p may be reused once add returns.
func (ld *loader) add(p []byte) {
	if ld.queue == nil {
		ld.apply(p)
		return
	}
	w := int(payloadKey(p) % uint64(len(ld.queue)))
	b := ld.cur[w]
	if b == nil {
		b, _ = ld.free.Get().(*loadBatch)
		if b == nil {
			b = &loadBatch{buf: make([]byte, 0, loadBatchBytes+4<<10)}
		}
		ld.cur[w] = b
	}
	b.buf = append(b.buf, p...)
	b.ends = append(b.ends, len(b.buf))
	if len(b.buf) >= loadBatchBytes {
		ld.queue[w] <- b
		ld.cur[w] = nil
	}
}

// wait applies what is queued and returns once every payload given to
// add has been applied. The loader cannot be used after it.
func (ld *loader) wait() {
	for w, ch := range ld.queue {
		if b := ld.cur[w]; b != nil && len(b.ends) > 0 {
			ch <- b
		}
		close(ch)
	}
	ld.wg.Wait()
	ld.queue, ld.cur = nil, nil
}

// payloadKey is the viewer key of a logged state (kind byte, high-water
// mark, then the engine's export: version byte, key), or 0 when the
// payload is too short to hold one (apply counts it as bad).
func payloadKey(p []byte) uint64 {
	if len(p) < 18 {
		return 0
	}
	return binary.LittleEndian.Uint64(p[10:18])
}

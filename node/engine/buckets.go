package engine

import "math"

// Buckets counters approximate a sliding window with B sub-buckets of
// width g = ceil(window/B) ticks, aligned to multiples of g. Their data is
// a ring of B+1 counts behind the index of the newest bucket:
//
//	[0] [1]  head, the index (t/g) of the newest bucket
//	[2 : 2+B+1]  counts; bucket x lives at 2 + x mod (B+1)
//
// At now the counter sums every bucket holding a tick of the window
// (now-window, now]. Those buckets cover the window and at most g-1 ticks
// before it, hence the bound documented on Buckets. B+1 buckets are
// enough because the window touches at most ceil(window/g)+1 <= B+1 of
// them.

// bucketWords is the data size of a Buckets counter for a window, given
// the configured number of sub-buckets.
func bucketWords(window int64, buckets int) int {
	b := int64(buckets)
	if window < b {
		b = window
	}
	return 2 + int(b) + 1
}

// bucketWidth is g for a Buckets counter.
func bucketWidth(h *header) int64 {
	b := int64(h.n - 3) // ring size minus one
	return (h.window + b - 1) / b
}

func (v *viewer) bucketsCount(h *header, now int64) int64 {
	g := bucketWidth(h)
	ring := int64(h.n - 2)
	head := get64(v.arena, h.off)
	from := max(bucketIndex(now-h.window+1, g), head-ring+1)
	var sum int64
	for x := from; x <= head; x++ {
		sum += int64(v.arena[h.off+2+int(x%ring)])
	}
	return sum
}

func (v *viewer) bucketsRecord(h *header, t int64) {
	g := bucketWidth(h)
	ring := int64(h.n - 2)
	x := t / g
	head := get64(v.arena, h.off)
	if x > head {
		if x-head >= ring {
			clear(v.arena[h.off+2 : h.off+h.n])
		} else {
			for y := head + 1; y <= x; y++ {
				v.arena[h.off+2+int(y%ring)] = 0
			}
		}
		put64(v.arena, h.off, x)
		head = x
	}
	if x <= head-ring {
		return // older than the ring holds: outside every window that matters
	}
	if p := h.off + 2 + int(x%ring); v.arena[p] < math.MaxUint32 {
		v.arena[p]++
	}
}

// bucketsLive reports whether the counter can still count at time now or
// later.
func (v *viewer) bucketsLive(h *header, now int64) bool {
	return get64(v.arena, h.off) >= bucketIndex(now-h.window+1, bucketWidth(h)) &&
		v.bucketsCount(h, now) > 0
}

// bucketsRemove uncounts an impression at t from its bucket, if the ring
// still holds that bucket.
func (v *viewer) bucketsRemove(h *header, t int64) bool {
	g := bucketWidth(h)
	ring := int64(h.n - 2)
	x, head := t/g, get64(v.arena, h.off)
	if x > head || x <= head-ring {
		return false
	}
	p := h.off + 2 + int(x%ring)
	if v.arena[p] == 0 {
		return false
	}
	v.arena[p]--
	return true
}

// bucketsHeld is the sum of the ring's counts.
func (v *viewer) bucketsHeld(h *header) int64 {
	var n int64
	for j := h.off + 2; j < h.off+h.n; j++ {
		n += int64(v.arena[j])
	}
	return n
}

// bucketsDigest feeds word each bucket of the window at now that counts
// something: its index and count.
func (v *viewer) bucketsDigest(h *header, now int64, word func(uint64)) {
	g := bucketWidth(h)
	ring := int64(h.n - 2)
	head := get64(v.arena, h.off)
	for x := max(bucketIndex(now-h.window+1, g), head-ring+1); x <= head; x++ {
		if c := v.arena[h.off+2+int(x%ring)]; c > 0 {
			word(uint64(x))
			word(uint64(c))
		}
	}
}

func (v *viewer) bucketsExport(h *header, k *KeyState) {
	ring := int64(h.n - 2)
	k.Bucket = get64(v.arena, h.off)
	for x := k.Bucket - ring + 1; x <= k.Bucket; x++ {
		c := int64(0)
		if x >= 0 {
			c = int64(v.arena[h.off+2+int(x%ring)])
		}
		k.Counts = append(k.Counts, c)
	}
}

// bucketsMerge keeps the larger count of each bucket.
func (e *Engine) bucketsMerge(v, nv *viewer, nh *header, floor int64) {
	g := bucketWidth(nh)
	ring := int64(nh.n - 2)
	head := get64(nv.arena, nh.off)
	for b := head - ring + 1; b <= head; b++ {
		if b < 0 || b*g <= floor {
			continue
		}
		want := int64(nv.arena[nh.off+2+int(b%ring)])
		var held int64
		if j, ok := v.find(nh.hash); ok {
			h := v.header(j)
			if h.n == nh.n {
				vh := get64(v.arena, h.off)
				if b <= vh && b > vh-ring {
					held = int64(v.arena[h.off+2+int(b%ring)])
				}
			}
		}
		e.replay(v, nh, b*g, want-held)
	}
}

func (e *Engine) bucketsAdd(v, nv *viewer, nh *header) int64 {
	g := bucketWidth(nh)
	ring := int64(nh.n - 2)
	head := get64(nv.arena, nh.off)
	var added int64
	for b := max(head-ring+1, 0); b <= head; b++ {
		n := int64(nv.arena[nh.off+2+int(b%ring)])
		e.replay(v, nh, b*g, n)
		added += n
	}
	return added
}

func bucketsCheck(i int, h *header) (int, error) {
	if h.n < 4 || int64(h.n-3) > h.window {
		return 0, badState("buckets counter %d of %d words for window %d", i, h.n, h.window)
	}
	return h.n, nil
}

// bucketIndex is floor(t/g) for t that may be negative; it returns at
// least 0 because no impression has a negative time.
func bucketIndex(t, g int64) int64 {
	if t <= 0 {
		return 0
	}
	return t / g
}

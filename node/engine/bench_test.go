package engine_test

import (
	"fmt"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/node/engine"
)

func newBenchEngine(b *testing.B, mutate ...func(*engine.Config)) *engine.Engine {
	b.Helper()
	cfg := engine.DefaultConfig()
	cfg.MemoryLimit = 0
	for _, m := range mutate {
		m(&cfg)
	}
	e, err := engine.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return e
}

// BenchmarkAllowExisting: Allow on a counter that exists and is full to
// its limit of recent impressions, the steady state of a hot key.
func BenchmarkAllowExisting(b *testing.B) {
	e := newBenchEngine(b)
	c := fcap.Cap{Scope: "campaign", ID: "campaign-0042", Limit: 5, Window: time.Hour}
	for i := range 5 {
		if _, err := e.Allow("viewer-000001", int64(i), c); err != nil {
			b.Fatal(err)
		}
	}
	now := int64(3_600_000 * 10)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		now++
		if _, err := e.Allow("viewer-000001", now, c); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAllowParallel: Allow from every core on random viewers among
// 2^18 that each hold a counter (a node's traffic: two concurrent calls
// rarely share a viewer), with time advancing one tick every 64 calls per
// goroutine. Run with -cpu 1,2: the scaling figure is
// ns/op(cpu=1) / ns/op(cpu=2).
func BenchmarkAllowParallel(b *testing.B) {
	e := newBenchEngine(b)
	const viewers = 1 << 18
	ids := make([]string, viewers)
	c := fcap.Cap{Scope: "campaign", ID: "campaign-0042", Limit: 5, Window: (1 << 20) * time.Millisecond}
	for i := range ids {
		ids[i] = "viewer-" + strconv.Itoa(i)
		if _, err := e.Allow(ids[i], 0, c); err != nil {
			b.Fatal(err)
		}
	}
	var seq atomic.Uint64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		x := seq.Add(1) * 0x9e3779b97f4a7c15
		now := int64(1 << 22)
		for n := 0; pb.Next(); n++ {
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			if n&63 == 0 {
				now++
			}
			if _, err := e.Allow(ids[x&(viewers-1)], now, c); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkCheck100x3: one viewer, 100 candidates of creative, campaign
// and advertiser caps, against a viewer holding those counters.
func BenchmarkCheck100x3(b *testing.B) { check100x3(b) }

// BenchmarkCheck100x3Partitioned is BenchmarkCheck100x3 with the stripes
// laid out by a node's 271 partitions (a division more per lookup).
func BenchmarkCheck100x3Partitioned(b *testing.B) {
	check100x3(b, func(c *engine.Config) { c.Partitions = 271 })
}

func check100x3(b *testing.B, mutate ...func(*engine.Config)) {
	e := newBenchEngine(b, mutate...)
	cands := make([]fcap.Candidate, 100)
	for i := range cands {
		cands[i].Caps = []fcap.Cap{
			{Scope: "creative", ID: fmt.Sprintf("cr-%d", i), Limit: 3, Window: time.Hour},
			{Scope: "campaign", ID: fmt.Sprintf("cmp-%d", i/2), Limit: 5, Window: 24 * time.Hour},
			{Scope: "advertiser", ID: fmt.Sprintf("adv-%d", i/10), Limit: 20, Window: 7 * 24 * time.Hour},
		}
		if _, err := e.Record("viewer-1", fcap.Impression{ID: strconv.Itoa(i), Time: int64(i), Caps: cands[i].Caps}); err != nil {
			b.Fatal(err)
		}
	}
	out := make([]fcap.Verdict, 0, len(cands))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var err error
		out, err = e.Check("viewer-1", cands, 1000, out[:0])
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMemoryPerKey loads 200,000 viewers x 5 campaigns, 5
// impressions each on a cap-5 sliding window, and reports heap bytes per
// counter after GC.
func BenchmarkMemoryPerKey(b *testing.B) {
	const viewers, campaigns, imps = 200_000, 5, 5
	memoryPerKey(b, func(e *engine.Engine) {
		caps := make([]fcap.Cap, campaigns)
		for c := range caps {
			caps[c] = fcap.Cap{Scope: "campaign", ID: "campaign-" + strconv.Itoa(c), Limit: 5, Window: 24 * time.Hour}
		}
		ids := make([]string, viewers)
		for v := range ids {
			ids[v] = fmt.Sprintf("viewer-%07d", v)
		}
		now := int64(1_700_000_000_000)
		for k := range imps {
			for v := range ids {
				for c := range caps {
					if vd, err := e.Allow(ids[v], now+int64(k*1000+c), caps[c]); err != nil || !vd.Allowed {
						b.Fatal(vd, err)
					}
				}
			}
		}
	})
}

// memoryPerKey reports the heap bytes per counter (after GC) and the
// engine's own estimate of an engine load filled, b.N times.
func memoryPerKey(b *testing.B, load func(e *engine.Engine)) {
	for i := 0; i < b.N; i++ {
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		e := newBenchEngine(b)
		load(e)
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		st := e.Stats()
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(st.Keys), "heapB/key")
		b.ReportMetric(float64(st.Bytes)/float64(st.Keys), "estB/key")
		runtime.KeepAlive(e)
	}
}

// BenchmarkCheckTable100x3 is BenchmarkCheck100x3 with the request in
// table form, as the wire carries it: the 160 distinct caps once.
func BenchmarkCheckTable100x3(b *testing.B) {
	e := newBenchEngine(b)
	var t fcap.CheckTable
	index := map[fcap.Cap]uint16{}
	for i := range 100 {
		caps := []fcap.Cap{
			{Scope: "creative", ID: fmt.Sprintf("cr-%d", i), Limit: 3, Window: time.Hour},
			{Scope: "campaign", ID: fmt.Sprintf("cmp-%d", i/2), Limit: 5, Window: 24 * time.Hour},
			{Scope: "advertiser", ID: fmt.Sprintf("adv-%d", i/10), Limit: 20, Window: 7 * 24 * time.Hour},
		}
		if _, err := e.Record("viewer-1", fcap.Impression{ID: strconv.Itoa(i), Time: int64(i), Caps: caps}); err != nil {
			b.Fatal(err)
		}
		for _, c := range caps {
			ref, ok := index[c]
			if !ok {
				ref = uint16(len(t.Caps))
				index[c] = ref
				t.Caps = append(t.Caps, c)
			}
			t.Refs = append(t.Refs, ref)
		}
		t.Ends = append(t.Ends, uint32(len(t.Refs)))
	}
	out := make([]fcap.Verdict, 0, 100)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var err error
		out, err = e.CheckTable("viewer-1", &t, 1000, out[:0])
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMemoryPerKeyRecorded is BenchmarkMemoryPerKey loaded through
// Record, so every viewer also remembers its 25 impression ids for
// idempotency (16 bytes each).
func BenchmarkMemoryPerKeyRecorded(b *testing.B) {
	const viewers, campaigns, imps = 200_000, 5, 5
	memoryPerKey(b, func(e *engine.Engine) {
		caps := make([][]fcap.Cap, campaigns)
		for c := range caps {
			caps[c] = []fcap.Cap{{Scope: "campaign", ID: "campaign-" + strconv.Itoa(c), Limit: 5, Window: 24 * time.Hour}}
		}
		now := int64(1_700_000_000_000)
		for k := range imps {
			for v := range viewers {
				id := fmt.Sprintf("viewer-%07d", v)
				for c := range caps {
					imp := fcap.Impression{ID: fmt.Sprintf("imp-%d-%d-%d", v, c, k), Time: now + int64(k*1000+c), Caps: caps[c]}
					if st, err := e.Record(id, imp); err != nil || st != fcap.Recorded {
						b.Fatal(st, err)
					}
				}
			}
		}
	})
}

// BenchmarkPartitionKeys walks the viewers of one partition in 27 (an
// anti-entropy round's share) of 200,000 viewers over 271 partitions,
// with the stripes laid out by partition (Config.Partitions) and without
// (every viewer visited and filtered).
func BenchmarkPartitionKeys(b *testing.B) {
	for _, parts := range []int{0, 271} {
		b.Run(fmt.Sprintf("partitions=%d", parts), func(b *testing.B) {
			cfg := engine.DefaultConfig()
			cfg.MemoryLimit = 0
			cfg.Partitions = parts
			e, err := engine.New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			c := fcap.Cap{Scope: "campaign", ID: "c", Limit: 5, Window: time.Hour}
			for i := range 200_000 {
				if _, err := e.Record("viewer-"+strconv.Itoa(i), fcap.Impression{ID: "x", Time: 1, Caps: []fcap.Cap{c}}); err != nil {
					b.Fatal(err)
				}
			}
			want := make([]bool, 271)
			for p := 0; p < 271; p += 27 {
				want[p] = true
			}
			b.ReportAllocs()
			b.ResetTimer()
			n := 0
			for range b.N {
				e.PartitionKeys(want, func(uint64) bool { n++; return true })
			}
			b.ReportMetric(float64(n)/float64(b.N), "viewers/op")
		})
	}
}

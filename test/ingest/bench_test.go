package ingest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/client/ingest"
	"github.com/fcap-io/fcap/test/cluster"
)

// benchImpressions is how many impressions the throughput benchmark
// feeds (FCAP_INGEST_BENCH_N overrides).
func benchImpressions() int {
	if n, err := strconv.Atoi(os.Getenv("FCAP_INGEST_BENCH_N")); err == nil && n > 0 {
		return n
	}
	return 400_000
}

// benchIngester runs an ingester in this process (the library, as
// fcapingest runs it) against seeds, or against a Recorder that
// acknowledges at once when seeds is empty (the floor: Kafka and the
// ingester alone).
func benchIngester(b *testing.B, k *kafka, seeds []string, acked func(*kgo.Record, time.Time), mutate ...func(*ingest.Config)) (stop func()) {
	b.Helper()
	cfg := ingest.DefaultConfig(k.brokers, topic)
	for _, m := range mutate {
		m(&cfg)
	}
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.Acked = acked
	cfg.KafkaOptions = []kgo.Opt{kgo.FetchMaxWait(10 * time.Millisecond)}
	if w, err := strconv.Atoi(os.Getenv("FCAP_INGEST_BENCH_WORKERS")); err == nil {
		cfg.Workers = w
	}
	if n, err := strconv.Atoi(os.Getenv("FCAP_INGEST_BENCH_BATCH")); err == nil {
		cfg.BatchRecords = n
	}
	var rec ingest.Recorder = instant{}
	var c *client.Client
	if len(seeds) > 0 {
		ccfg := cluster.ClientConfig(seeds...)
		ccfg.Logger = cfg.Logger
		var err error
		if c, err = client.New(ccfg); err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		err = c.WaitReady(ctx)
		cancel()
		if err != nil {
			b.Fatal(err)
		}
		rec = c
	}
	in, err := ingest.New(cfg, rec)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- in.Run(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			b.Error(err)
		}
		if c != nil {
			c.Close(context.Background())
		}
	}
}

// instant acknowledges every impression at once.
type instant struct{}

func (instant) RecordSync(_ context.Context, items []client.RecordItem, _ ...client.SyncOption) []client.RecordAck {
	return make([]client.RecordAck, len(items))
}

// produceMany produces n impressions (one a record) over 8 partitions
// and 10,000 viewers, played now, in chunks.
func produceMany(b *testing.B, k *kafka, n int, prefix string) {
	b.Helper()
	produceManyMode(b, k, n, prefix, "")
}

// produceManyMode is produceMany with caps of the given mode ("" soft).
func produceManyMode(b *testing.B, k *kafka, n int, prefix, mode string) {
	b.Helper()
	jcaps := []jsonCap{
		{Scope: "creative", ID: "cr1", Limit: 3, Window: "1h", Mode: mode},
		{Scope: "campaign", ID: "c1", Limit: 10, Window: "24h", Mode: mode},
	}
	const chunk = 10_000
	for start := 0; start < n; start += chunk {
		now := time.Now()
		recs := make([]*kgo.Record, 0, chunk)
		for i := start; i < min(start+chunk, n); i++ {
			imp := impression{ID: prefix + strconv.Itoa(i), Viewer: "viewer-" + strconv.Itoa(i%10_000), Time: now.UnixMilli(), Caps: jcaps}
			recs = append(recs, imp.record(topic, int32(i%8), now))
		}
		k.produce(recs...)
	}
}

// BenchmarkIngestThroughput: impressions already in Kafka (kfake, in
// this process) recorded into one fcapd node, batched, acknowledged and
// committed; impressions/s beside the floor of the same run (the
// ingester acknowledging at once, no cluster).
//
//	FCAP_TEST_NORACE=1 go test -run '^$' -bench IngestThroughput -benchtime 1x ./test/ingest
func BenchmarkIngestThroughput(b *testing.B) {
	n := benchImpressions()
	for _, target := range []string{"floor", "fcap"} {
		b.Run(target, func(b *testing.B) {
			for range b.N {
				k := startKafkaB(b, 8, topic)
				produceMany(b, k, n, "imp")
				var (
					seeds []string
					node  *cluster.Node
				)
				if target == "fcap" {
					node = startOne(b)[0]
					seeds = cluster.Seeds(node)
				}
				cpu0, nodeCPU0 := selfCPU(), nodeCPU(b, node)
				// The clock starts at the first acknowledgement: joining
				// the group (kfake delays a new group's first rebalance by
				// 3 s) is not ingestion.
				var (
					seen  atomic.Int64
					first atomic.Int64 // UnixNano of the first acknowledgement
				)
				all := make(chan struct{})
				stop := benchIngester(b, k, seeds, func(_ *kgo.Record, at time.Time) {
					first.CompareAndSwap(0, at.UnixNano())
					if seen.Add(1) == int64(n) {
						close(all)
					}
				})
				select {
				case <-all:
				case <-time.After(10 * time.Minute):
					b.Fatalf("only %d of %d impressions acknowledged", seen.Load(), n)
				}
				el := time.Since(time.Unix(0, first.Load()))
				cpu, ncpu := selfCPU()-cpu0, nodeCPU(b, node)-nodeCPU0
				stop()
				b.ReportMetric(float64(n)/el.Seconds(), "impressions/s")
				// CPU per million impressions: the test process (kfake
				// serving the fetches, the ingester, the client) and the
				// node; what a busy shared machine does not change much.
				b.ReportMetric(cpu.Seconds()/float64(n)*1e6, "ingest-cpu-s/M")
				b.ReportMetric(ncpu/float64(n)*1e6, "node-cpu-s/M")
				b.ReportMetric(0, "ns/op")
			}
		})
	}
}

// BenchmarkIngestModes: issue 37's rates, on 3 nodes with 2 owners per
// partition, back to back in one run: soft impressions acknowledged by
// their owner (--ack owner, the only mode before issue 37), soft ones
// acknowledged once every owner applied them (--ack replicated, the
// default), and strict ones (acknowledged once every owner applied
// them, whatever the mode). Impressions are in Kafka before the
// ingester starts; the clock starts at the first acknowledgement.
//
//	FCAP_TEST_NORACE=1 go test -run '^$' -bench IngestModes -benchtime 1x ./test/ingest
func BenchmarkIngestModes(b *testing.B) {
	n := benchImpressions()
	for _, m := range []struct {
		name, mode string
		ack        ingest.AckMode
	}{
		{"soft-owner", "", ingest.AckOwner},
		{"soft-replicated", "", ingest.AckReplicated},
		{"strict", "strict", ingest.AckReplicated},
	} {
		b.Run(m.name, func(b *testing.B) {
			for range b.N {
				k := startKafkaB(b, 8, topic)
				produceManyMode(b, k, n, "imp", m.mode)
				nodes := cluster.StartCluster(b, 3, cluster.Options{Replicas: 2})
				var (
					seen  atomic.Int64
					first atomic.Int64 // UnixNano of the first acknowledgement
				)
				all := make(chan struct{})
				stop := benchIngester(b, k, cluster.Seeds(nodes...), func(_ *kgo.Record, at time.Time) {
					first.CompareAndSwap(0, at.UnixNano())
					if seen.Add(1) == int64(n) {
						close(all)
					}
				}, func(c *ingest.Config) { c.Ack = m.ack })
				select {
				case <-all:
				case <-time.After(10 * time.Minute):
					b.Fatalf("only %d of %d impressions acknowledged", seen.Load(), n)
				}
				el := time.Since(time.Unix(0, first.Load()))
				stop()
				b.ReportMetric(float64(n)/el.Seconds(), "impressions/s")
				b.ReportMetric(0, "ns/op")
			}
		})
	}
}

// BenchmarkIngestDelay: impressions produced at a steady rate while the
// ingester runs; the delay from produce (the record's timestamp) to
// acknowledged by the owner (counted), p50/p99/max, beside the floor of
// the same run (the ingester acknowledging at once, no cluster).
//
//	FCAP_TEST_NORACE=1 go test -run '^$' -bench IngestDelay -benchtime 1x ./test/ingest
func BenchmarkIngestDelay(b *testing.B) {
	const rate, seconds = 20_000, 10 // impressions/s, for this long
	for _, target := range []string{"floor", "fcap"} {
		b.Run(target, func(b *testing.B) {
			for range b.N {
				k := startKafkaB(b, 8, topic)
				var seeds []string
				if target == "fcap" {
					seeds = cluster.Seeds(startOne(b)...)
				}
				var mu sync.Mutex
				h := hdrhistogram.New(1, int64(time.Minute/time.Microsecond), 3)
				stop := benchIngester(b, k, seeds, func(r *kgo.Record, at time.Time) {
					mu.Lock()
					h.RecordValue(max(at.Sub(r.Timestamp).Microseconds(), 1))
					mu.Unlock()
				})
				time.Sleep(2 * time.Second) // the group joined
				jcaps := []jsonCap{{Scope: "creative", ID: "cr1", Limit: 3, Window: "1h"}}
				tick := time.NewTicker(10 * time.Millisecond)
				for i := 0; i < rate*seconds; {
					<-tick.C
					now := time.Now()
					recs := make([]*kgo.Record, 0, rate/100)
					for range rate / 100 {
						imp := impression{ID: "d" + strconv.Itoa(i), Viewer: "viewer-" + strconv.Itoa(i%10_000), Time: now.UnixMilli(), Caps: jcaps}
						recs = append(recs, imp.record(topic, int32(i%8), now))
						i++
					}
					for _, r := range recs {
						k.prod.Produce(context.Background(), r, nil)
					}
				}
				tick.Stop()
				k.prod.Flush(context.Background())
				cluster.Eventually(b, deadline, func() bool {
					mu.Lock()
					defer mu.Unlock()
					return h.TotalCount() >= rate*seconds
				}, "not every impression acknowledged")
				stop()
				us := func(q float64) float64 { return float64(h.ValueAtQuantile(q)) / 1000 }
				b.ReportMetric(us(50), "p50-ms")
				b.ReportMetric(us(99), "p99-ms")
				b.ReportMetric(float64(h.Max())/1000, "max-ms")
				b.ReportMetric(0, "ns/op")
				fmt.Fprintf(os.Stderr, "%s: %d impressions at %d/s: p50 %.1f ms, p99 %.1f ms, max %.1f ms\n", target, h.TotalCount(), rate, us(50), us(99), float64(h.Max())/1000)
			}
		})
	}
}

// selfCPU is the CPU time this process used so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// nodeCPU is the CPU seconds the node used so far (0 without a node).
func nodeCPU(b *testing.B, n *cluster.Node) float64 {
	if n == nil {
		return 0
	}
	return n.Metric("process_cpu_seconds_total")
}

// BenchmarkIngestNodeKill: issue 37's "kill -9 of one fcapd during
// ingestion at the highest rate the machine sustains". Impressions
// already in Kafka (unique ids, 10,000 viewers, one cap of mode soft or
// strict whose limit no viewer reaches) are ingested as fast as the
// ingester goes into 3 nodes, R=2, with replicated acknowledgements (the
// default); once a third of them were acknowledged one node is killed
// with SIGKILL. When every impression was acknowledged, each viewer's
// count is read back from the survivors and compared with what was
// produced: lost and counted twice (both must be 0), beside the rate.
//
//	FCAP_TEST_NORACE=1 go test -run '^$' -bench IngestNodeKill -benchtime 5x ./test/ingest
func BenchmarkIngestNodeKill(b *testing.B) {
	n := benchImpressions()
	for _, mode := range []string{"soft", "strict"} {
		b.Run(mode, func(b *testing.B) {
			var lost, twice int64
			for range b.N {
				k := startKafkaB(b, 8, topic)
				jcaps, caps := hourCap(mode)
				want := map[string]int64{}
				const chunk = 10_000
				for start := 0; start < n; start += chunk {
					now := time.Now()
					recs := make([]*kgo.Record, 0, chunk)
					for i := start; i < min(start+chunk, n); i++ {
						v := "viewer-" + strconv.Itoa(i%10_000)
						want[v]++
						imp := impression{ID: "kill" + strconv.Itoa(i), Viewer: v, Time: now.UnixMilli(), Caps: jcaps}
						recs = append(recs, imp.record(topic, int32(i%8), now))
					}
					k.produce(recs...)
				}
				nodes := cluster.StartCluster(b, 3, cluster.Options{Replicas: 2})
				var (
					seen   atomic.Int64
					first  atomic.Int64
					killed sync.Once
				)
				all := make(chan struct{})
				stop := benchIngester(b, k, cluster.Seeds(nodes...), func(_ *kgo.Record, at time.Time) {
					first.CompareAndSwap(0, at.UnixNano())
					switch seen.Add(1) {
					case int64(n) / 3:
						go killed.Do(nodes[1].Kill)
					case int64(n):
						close(all)
					}
				})
				select {
				case <-all:
				case <-time.After(10 * time.Minute):
					b.Fatalf("only %d of %d impressions acknowledged", seen.Load(), n)
				}
				el := time.Since(time.Unix(0, first.Load()))
				stop()
				live := []*cluster.Node{nodes[0], nodes[2]}
				cluster.Eventually(b, deadline, func() bool { ok, _ := cluster.Settled(live, 2); return ok }, "the survivors did not settle")
				c := cluster.NewClient(b, cluster.Seeds(live...))
				viewers := make([]string, 0, len(want))
				for v := range want {
					viewers = append(viewers, v)
				}
				got := counts(b, c, viewers, caps)
				for v, w := range want {
					if d := w - got[v]; d > 0 {
						lost += d
					} else {
						twice -= d
					}
				}
				b.ReportMetric(float64(n)/el.Seconds(), "impressions/s")
			}
			b.ReportMetric(float64(lost), "lost")
			b.ReportMetric(float64(twice), "twice")
			b.ReportMetric(0, "ns/op")
			if lost > 0 || twice > 0 {
				b.Errorf("%s: %d acknowledged impressions lost, %d counted twice over %d runs", mode, lost, twice, b.N)
			}
		})
	}
}

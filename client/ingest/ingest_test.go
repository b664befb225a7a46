package ingest

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/internal/testwait"
)

// fakeCluster is a Recorder that counts like the engine: once per
// impression id. An impression whose id is in hold waits until released.
type fakeCluster struct {
	mu     sync.Mutex
	counts map[string]int // by impression id
	hold   map[string]chan struct{}
}

func newFakeCluster() *fakeCluster {
	return &fakeCluster{counts: map[string]int{}, hold: map[string]chan struct{}{}}
}

func (f *fakeCluster) RecordSync(ctx context.Context, items []client.RecordItem, _ ...client.SyncOption) []client.RecordAck {
	acks := make([]client.RecordAck, len(items))
	var held []int
	for i, it := range items {
		f.mu.Lock()
		h := f.hold[it.Impression.ID]
		f.mu.Unlock()
		if h != nil {
			held = append(held, i)
			continue
		}
		acks[i].Status = f.add(it.Impression.ID)
	}
	for _, i := range held {
		f.mu.Lock()
		h := f.hold[items[i].Impression.ID]
		f.mu.Unlock()
		select {
		case <-h:
			acks[i].Status = f.add(items[i].Impression.ID)
		case <-ctx.Done():
			acks[i].Err = ctx.Err()
		}
	}
	return acks
}

func (f *fakeCluster) add(id string) fcap.RecordStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.counts[id]++; f.counts[id] > 1 {
		return fcap.Duplicate
	}
	return fcap.Recorded
}

func (f *fakeCluster) count(id string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.counts[id]
}

func (f *fakeCluster) distinct() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.counts)
}

func (f *fakeCluster) holdID(id string) chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	h := make(chan struct{})
	f.hold[id] = h
	return h
}

func impJSON(id string, t int64) []byte {
	b, _ := json.Marshal(map[string]any{
		"id": id, "viewer": "v-" + id, "time": t,
		"caps": []map[string]any{{"scope": "creative", "id": "cr1", "limit": 100, "window": "1h"}},
	})
	return b
}

// kafka starts a kfake cluster with the topics and returns its address
// and a producer.
func kafka(t *testing.T, partitions int32, topics ...string) ([]string, *kgo.Client) {
	t.Helper()
	return kafkaWith(t, kfake.SeedTopics(partitions, topics...))
}

// kafkaWith starts a one-broker kfake cluster with opts and returns its
// address and a producer.
func kafkaWith(t *testing.T, opts ...kfake.Opt) ([]string, *kgo.Client) {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	addrs := c.ListenAddrs()
	p, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return addrs, p
}

func produce(t *testing.T, p *kgo.Client, recs ...*kgo.Record) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// start runs an ingester until the test ends.
func start(t *testing.T, cfg Config, rec Recorder) *Ingester {
	t.Helper()
	in, err := New(cfg, rec)
	if err != nil {
		t.Fatal(err)
	}
	runUntilEnd(t, in, true)
	return in
}

// runUntilEnd runs in until the test ends; failRun says whether an error
// from Run fails the test (a killed ingester's does not).
func runUntilEnd(t *testing.T, in *Ingester, failRun bool) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- in.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && failRun {
			t.Errorf("Run: %v", err)
		}
	})
}

func testConfig(brokers []string, topics ...string) Config {
	cfg := DefaultConfig(brokers, topics...)
	cfg.Group = "g"
	cfg.CommitInterval = 20 * time.Millisecond
	cfg.KafkaOptions = []kgo.Opt{kgo.FetchMaxWait(50 * time.Millisecond)}
	return cfg
}

// committed returns the group's committed offset of topic/partition, -1
// when none.
func committed(t *testing.T, brokers []string, group, topic string, p int32) int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := kadm.NewClient(cl).FetchOffsets(ctx, group)
	if err != nil {
		return -1
	}
	o, ok := resp.Lookup(topic, p)
	if !ok || o.Err != nil {
		return -1
	}
	return o.At
}

// TestPoisonRecords: bad records of every kind are counted by reason and
// dead-lettered with the reason in a header, and the partition goes on:
// the good records after them are recorded and the offset passes them.
func TestPoisonRecords(t *testing.T) {
	brokers, p := kafka(t, 1, "imps", "dead")
	now := time.Now().UnixMilli()
	bad := map[string]string{
		"not json":  ReasonUndecodable,
		"bad-limit": ReasonInvalid,
		"future":    ReasonFutureTime,
		"no-viewer": ReasonInvalid,
	}
	produce(t, p,
		&kgo.Record{Topic: "imps", Value: impJSON("a", now)},
		&kgo.Record{Topic: "imps", Value: []byte("{not json"), Key: []byte("not json")},
		&kgo.Record{Topic: "imps", Key: []byte("bad-limit"), Value: []byte(`{"id":"x","viewer":"v","caps":[{"scope":"creative","id":"c","limit":0,"window":1000}]}`)},
		&kgo.Record{Topic: "imps", Key: []byte("future"), Value: impJSON("f", now+time.Hour.Milliseconds())},
		&kgo.Record{Topic: "imps", Key: []byte("no-viewer"), Value: []byte(`{"id":"y","caps":[{"scope":"creative","id":"c","limit":1,"window":1000}]}`)},
		&kgo.Record{Topic: "imps", Value: impJSON("b", now)},
	)
	f := newFakeCluster()
	reg := prometheus.NewRegistry()
	cfg := testConfig(brokers, "imps")
	cfg.DeadLetterTopic = "dead"
	cfg.Registerer = reg
	in := start(t, cfg, f)

	testwait.Eventually(t, 30*time.Second, func() bool { return f.count("a") == 1 && f.count("b") == 1 }, "the good records after the poison ones are recorded")
	testwait.Eventually(t, 30*time.Second, func() bool { return committed(t, brokers, "g", "imps", 0) == 6 }, "the offset passes every record")
	if n := f.distinct(); n != 2 {
		t.Errorf("%d impressions recorded, want 2: a bad record's impressions are never sent", n)
	}
	for reason, want := range map[string]float64{ReasonUndecodable: 1, ReasonInvalid: 2, ReasonFutureTime: 1} {
		if got := testutil.ToFloat64(in.m.bad.WithLabelValues(reason)); got != want {
			t.Errorf("bad records %s: %v, want %v", reason, got, want)
		}
	}

	c, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics("dead"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got := map[string]string{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for len(got) < len(bad) && ctx.Err() == nil {
		c.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			for _, h := range r.Headers {
				if h.Key == HeaderReason {
					got[string(r.Key)] = string(h.Value)
				}
			}
		})
	}
	for key, want := range bad {
		if got[key] != want {
			t.Errorf("dead letter %q: reason %q, want %q", key, got[key], want)
		}
	}
}

// TestCommitWaitsForEveryEarlierRecord: a batch acknowledged before an
// earlier one does not move the offset past the earlier one.
func TestCommitWaitsForEveryEarlierRecord(t *testing.T) {
	brokers, p := kafka(t, 1, "imps")
	now := time.Now().UnixMilli()
	f := newFakeCluster()
	release := f.holdID("slow")
	produce(t, p,
		&kgo.Record{Topic: "imps", Value: impJSON("first", now)},
		&kgo.Record{Topic: "imps", Value: impJSON("slow", now)},
		&kgo.Record{Topic: "imps", Value: impJSON("third", now)},
	)
	cfg := testConfig(brokers, "imps")
	cfg.BatchRecords = 1 // one record a batch, each on its own worker
	cfg.Workers = 3
	start(t, cfg, f)

	testwait.Eventually(t, 30*time.Second, func() bool { return f.count("first") == 1 && f.count("third") == 1 }, "the records around the slow one are acknowledged")
	testwait.Eventually(t, 30*time.Second, func() bool { return committed(t, brokers, "g", "imps", 0) == 1 }, "the offset moves past the first record")
	time.Sleep(100 * time.Millisecond) // several commit intervals: a wrong commit would land
	if got := committed(t, brokers, "g", "imps", 0); got != 1 {
		t.Fatalf("committed offset %d while record 1 is unacknowledged, want 1", got)
	}
	close(release)
	testwait.Eventually(t, 30*time.Second, func() bool { return committed(t, brokers, "g", "imps", 0) == 3 }, "the offset passes every record once the slow one is acknowledged")
}

// TestRestartReplaysUnacknowledged: an ingester stopped while a record is
// unacknowledged leaves it uncommitted; the next one replays it, and the
// replay counts once.
func TestRestartReplaysUnacknowledged(t *testing.T) {
	brokers, p := kafka(t, 2, "imps")
	now := time.Now().UnixMilli()
	f := newFakeCluster()
	f.holdID("stuck")
	var recs []*kgo.Record
	for i := range 20 {
		id := "i" + strconv.Itoa(i)
		if i == 7 {
			id = "stuck"
		}
		recs = append(recs, &kgo.Record{Topic: "imps", Partition: int32(i % 2), Value: impJSON(id, now)})
	}
	produce(t, p, recs...)
	cfg := testConfig(brokers, "imps")
	cfg.ShutdownTimeout = 200 * time.Millisecond
	in, err := New(cfg, f)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- in.Run(ctx) }()
	testwait.Eventually(t, 30*time.Second, func() bool { return f.distinct() == 19 }, "the other records are acknowledged")
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := committed(t, brokers, "g", "imps", 1); got > 3 {
		t.Fatalf("partition 1 committed at %d past its unacknowledged record 3", got)
	}

	f.mu.Lock()
	delete(f.hold, "stuck") // the cluster is well again
	f.mu.Unlock()
	start(t, cfg, f)
	testwait.Eventually(t, 30*time.Second, func() bool { return f.count("stuck") == 1 }, "the unacknowledged record is replayed")
	testwait.Eventually(t, 30*time.Second, func() bool {
		return committed(t, brokers, "g", "imps", 0) == 10 && committed(t, brokers, "g", "imps", 1) == 10
	}, "every partition is committed to its end")
}

// TestFromTime: a rebuild replays every partition from the first record
// at or after the time, and only from there.
func TestFromTime(t *testing.T) {
	brokers, p := kafka(t, 3, "imps")
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	var recs []*kgo.Record
	for i := range 30 {
		ts := base.Add(time.Duration(i) * time.Minute)
		recs = append(recs, &kgo.Record{Topic: "imps", Partition: int32(i % 3), Timestamp: ts, Value: impJSON(fmt.Sprint(i), ts.UnixMilli())})
	}
	produce(t, p, recs...)
	f := newFakeCluster()
	cfg := testConfig(brokers, "imps")
	cfg.FromTime = base.Add(20 * time.Minute)
	start(t, cfg, f)
	testwait.Eventually(t, 30*time.Second, func() bool { return f.distinct() == 10 }, "the records since the time are replayed")
	testwait.Eventually(t, 30*time.Second, func() bool {
		return committed(t, brokers, "g", "imps", 0) == 10 && committed(t, brokers, "g", "imps", 2) == 10
	}, "every partition is committed to its end")
	for i := range 20 {
		if f.count(fmt.Sprint(i)) != 0 {
			t.Errorf("impression %d, from before the time, was replayed", i)
		}
	}
}

func TestJSONDecode(t *testing.T) {
	ts := time.UnixMilli(1_700_000_000_000)
	for _, tc := range []struct {
		name, value string
		want        []client.RecordItem
		bad         bool
	}{
		{name: "one", value: `{"id":"i","viewer":"v","time":5,"caps":[{"scope":"creative","id":"c","limit":3,"window":"1h","mode":"strict","algorithm":"fixed"}]}`,
			want: []client.RecordItem{{Viewer: "v", Impression: fcap.Impression{ID: "i", Time: 5, Caps: []fcap.Cap{{Scope: "creative", ID: "c", Limit: 3, Window: time.Hour, Mode: fcap.Strict, Algorithm: fcap.Fixed}}}}}},
		{name: "array, device, rfc3339, record time", value: `[{"id":"i","device":"d","time":"2023-11-14T22:13:20Z","caps":[{"scope":"s","id":"c","limit":1,"window":10}]},{"id":"j","viewer":"v","caps":[]}]`,
			want: []client.RecordItem{
				{Viewer: "d", Device: true, Impression: fcap.Impression{ID: "i", Time: 1_700_000_000_000, Caps: []fcap.Cap{{Scope: "s", ID: "c", Limit: 1, Window: 10 * time.Millisecond}}}},
				{Viewer: "v", Impression: fcap.Impression{ID: "j", Time: ts.UnixMilli(), Caps: []fcap.Cap{}}},
			}},
		{name: "window in milliseconds", value: `{"id":"i","viewer":"v","time":5,"caps":[{"scope":"s","id":"c","limit":1,"window":3600000}]}`,
			want: []client.RecordItem{{Viewer: "v", Impression: fcap.Impression{ID: "i", Time: 5, Caps: []fcap.Cap{{Scope: "s", ID: "c", Limit: 1, Window: time.Hour}}}}}},
		// A duration with a fraction of a millisecond is kept whole (it
		// was cut to 1ms), so validation refuses it rather than count it
		// under another window.
		{name: "window of a fraction of a millisecond", value: `{"id":"i","viewer":"v","time":5,"caps":[{"scope":"s","id":"c","limit":1,"window":"1.5ms"}]}`,
			want: []client.RecordItem{{Viewer: "v", Impression: fcap.Impression{ID: "i", Time: 5, Caps: []fcap.Cap{{Scope: "s", ID: "c", Limit: 1, Window: 1500 * time.Microsecond}}}}}},
		{name: "both viewer and device", value: `{"id":"i","viewer":"v","device":"d"}`, bad: true},
		{name: "unknown mode", value: `{"id":"i","viewer":"v","caps":[{"scope":"s","id":"c","limit":1,"window":1,"mode":"hard"}]}`, bad: true},
		{name: "bad window", value: `{"id":"i","viewer":"v","caps":[{"scope":"s","id":"c","limit":1,"window":"soon"}]}`, bad: true},
		{name: "empty array", value: `[]`, bad: true},
		{name: "not json", value: `impression`, bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := JSON{}.Decode(nil, &kgo.Record{Value: []byte(tc.value), Timestamp: ts})
			if tc.bad {
				if err == nil {
					t.Fatalf("decoded %+v, want an error", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// TestBackPressure: while the cluster answers nothing, the records in
// flight stay within PollRecords + Workers x BatchRecords and none is counted or
// committed; once it answers, every one counts.
func TestBackPressure(t *testing.T) {
	brokers, p := kafka(t, 4, "imps")
	now := time.Now().UnixMilli()
	f := newFakeCluster()
	var recs []*kgo.Record
	for i := range 2000 {
		recs = append(recs, &kgo.Record{Topic: "imps", Partition: int32(i % 4), Value: impJSON(fmt.Sprint(i), now)})
	}
	produce(t, p, recs...)
	gate := make(chan struct{})
	cfg := testConfig(brokers, "imps")
	cfg.Workers, cfg.BatchRecords, cfg.PollRecords = 2, 50, 100
	in := start(t, cfg, gatedCluster{f, gate})

	testwait.Eventually(t, 30*time.Second, func() bool { return in.track.records() >= 150 }, "the workers are full")
	for range 20 {
		if n := in.track.records(); n > 200 {
			t.Fatalf("%d records in flight, want at most PollRecords + Workers x BatchRecords = 200", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for part := range int32(4) {
		if got := committed(t, brokers, "g", "imps", part); got > 0 {
			t.Fatalf("partition %d committed at %d while nothing was acknowledged", part, got)
		}
	}
	close(gate)
	testwait.Eventually(t, 30*time.Second, func() bool { return f.distinct() == 2000 }, "every record counts once the cluster answers")
	for i := range 2000 {
		if n := f.count(fmt.Sprint(i)); n != 1 {
			t.Fatalf("impression %d counted %d times", i, n)
		}
	}
}

// gatedCluster answers nothing until gate closes.
type gatedCluster struct {
	*fakeCluster
	gate chan struct{}
}

func (g gatedCluster) RecordSync(ctx context.Context, items []client.RecordItem, _ ...client.SyncOption) []client.RecordAck {
	select {
	case <-g.gate:
	case <-ctx.Done():
		acks := make([]client.RecordAck, len(items))
		for i := range acks {
			acks[i].Err = ctx.Err()
		}
		return acks
	}
	return g.fakeCluster.RecordSync(ctx, items)
}

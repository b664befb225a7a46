package ingest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fcap-io/fcap/client"
)

// slowCluster is a fakeCluster that takes a random while to answer, so
// batches are in flight when partitions move.
type slowCluster struct {
	*fakeCluster
	max time.Duration
}

func (s slowCluster) RecordSync(ctx context.Context, items []client.RecordItem) []client.RecordAck {
	t := time.NewTimer(rand.N(s.max))
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		acks := make([]client.RecordAck, len(items))
		for i := range acks {
			acks[i].Err = ctx.Err()
		}
		return acks
	}
	return s.fakeCluster.RecordSync(ctx, items)
}

// TestChurnLosesNothing: ingesters joining and leaving the group while
// impressions stream in (cooperative rebalances revoking partitions with
// batches in flight, revocations that give up waiting, stops that give
// up on batches) never move a committed offset past an impression the
// cluster did not acknowledge: once one ingester catches up, every
// impression produced was recorded.
func TestChurnLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("streams for seconds")
	}
	const partitions = 4
	brokers, p := kafka(t, partitions, "imps")
	f := newFakeCluster()
	rec := slowCluster{f, 30 * time.Millisecond}
	cfg := testConfig(brokers, "imps")
	cfg.BatchRecords = 20
	cfg.Workers = 3
	cfg.RevokeTimeout = 10 * time.Millisecond // revocations often give up on batches in flight
	cfg.ShutdownTimeout = 10 * time.Millisecond
	// A member stopped between a join and its sync holds the group for the
	// rebalance timeout (60 s by default): keep it short.
	cfg.KafkaOptions = append(cfg.KafkaOptions, kgo.HeartbeatInterval(100*time.Millisecond), kgo.RebalanceTimeout(3*time.Second))

	// The stream: ids 0..n-1, round robin over the partitions.
	var (
		mu sync.Mutex
		n  int
	)
	stop := make(chan struct{})
	streamed := make(chan struct{})
	go func() {
		defer close(streamed)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			mu.Lock()
			now := time.Now().UnixMilli()
			var recs []*kgo.Record
			for range 20 {
				recs = append(recs, &kgo.Record{Topic: "imps", Partition: int32(n % partitions), Value: impJSON(fmt.Sprint(n), now)})
				n++
			}
			mu.Unlock()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			err := p.ProduceSync(ctx, recs...).FirstErr()
			cancel()
			if err != nil {
				t.Errorf("produce: %v", err)
				return
			}
		}
	}()

	// Three ingesters come and go.
	var wg sync.WaitGroup
	deadline := time.Now().Add(4 * time.Second)
	for w := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				in, err := New(cfg, rec)
				if err != nil {
					t.Error(err)
					return
				}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() { done <- in.Run(ctx) }()
				time.Sleep(time.Duration(100+rand.IntN(700)) * time.Millisecond)
				cancel()
				if err := <-done; err != nil {
					t.Errorf("ingester %d: %v", w, err)
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-streamed

	start(t, cfg, f)
	mu.Lock()
	total := n
	mu.Unlock()
	caughtUp := time.Now().Add(2 * time.Minute) // a race-built test on a busy machine
	for {
		sum := int64(0)
		for p := range int32(partitions) {
			sum += committed(t, brokers, "g", "imps", p)
		}
		if sum == int64(total) {
			break
		}
		if time.Now().After(caughtUp) {
			t.Fatalf("the last ingester did not commit every partition to its end: %d of %d", sum, total)
		}
		time.Sleep(50 * time.Millisecond)
	}
	var lost []int
	for i := range total {
		if f.count(fmt.Sprint(i)) == 0 {
			lost = append(lost, i)
		}
	}
	if len(lost) > 0 {
		t.Fatalf("%d of %d impressions committed past and never recorded: %v", len(lost), total, lost[:min(len(lost), 40)])
	}
	t.Logf("%d impressions, none lost", total)
}

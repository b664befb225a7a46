package ingest

import (
	"context"
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

func (s slowCluster) RecordSync(ctx context.Context, items []client.RecordItem, _ ...client.SyncOption) []client.RecordAck {
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
	st := newStream(t, p, partitions)
	st.run(20)

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
	total := st.halt()
	start(t, cfg, f)
	expectAllCounted(t, brokers, f, partitions, total, "the last ingester")
	t.Logf("%d impressions, none lost", total)
}

package ingest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fcap-io/fcap/internal/testwait"
)

// stream produces impressions numbered 0, 1, ... to the topic "imps",
// round robin over its partitions: the input of the tests that churn,
// stall and kill ingesters and then look for every number in the cluster.
type stream struct {
	t          *testing.T
	p          *kgo.Client
	partitions int

	mu sync.Mutex
	n  int // the next impression's number

	stop chan struct{}
	done chan struct{}
}

func newStream(t *testing.T, p *kgo.Client, partitions int) *stream {
	return &stream{t: t, p: p, partitions: partitions}
}

// batch numbers the next k impressions, timed now.
func (s *stream) batch(k int) []*kgo.Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now().UnixMilli()
	recs := make([]*kgo.Record, 0, k)
	for range k {
		recs = append(recs, &kgo.Record{Topic: "imps", Partition: int32(s.n % s.partitions), Value: impJSON(fmt.Sprint(s.n), now)})
		s.n++
	}
	return recs
}

// run produces k impressions every 5 ms until halt.
func (s *stream) run(k int) {
	s.stop, s.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(s.done)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			err := s.p.ProduceSync(ctx, s.batch(k)...).FirstErr()
			cancel()
			if err != nil {
				s.t.Errorf("produce: %v", err)
				return
			}
		}
	}()
}

// halt stops run and returns how many impressions were numbered.
func (s *stream) halt() int {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// waitCommitted waits until the group "g" has committed an offset of
// some partition of "imps".
func waitCommitted(t *testing.T, brokers []string, partitions int, what string) {
	t.Helper()
	testwait.Eventually(t, 30*time.Second, func() bool {
		for p := range int32(partitions) {
			if committed(t, brokers, "g", "imps", p) > 0 {
				return true
			}
		}
		return false
	}, "%s", what)
}

// expectAllCounted waits until the group "g" has committed every
// partition of "imps" to its end, total records in all (who names the
// ingesters it waits for), then checks that the cluster f counted each
// of the total impressions: an offset committed past one it never
// recorded is a loss.
func expectAllCounted(t *testing.T, brokers []string, f *fakeCluster, partitions, total int, who string) {
	t.Helper()
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
			t.Fatalf("%s did not commit every partition to its end: %d of %d", who, sum, total)
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
}

package ingest

import (
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// stream produces impressions to a topic in the background, spread over
// viewers and partitions, and remembers how many each viewer got.
type stream struct {
	k          *kafka
	topic      string
	partitions int32
	viewers    int
	caps       []jsonCap
	prefix     string

	mu sync.Mutex
	// sent counts the impressions produced per viewer; n counts them
	// all. Guarded by mu.
	sent map[string]int64
	n    int

	stopc chan struct{}
	done  chan struct{}
	err   error // the first produce error of start's goroutine
}

func newStream(k *kafka, topic string, partitions int32, viewers int, caps []jsonCap) *stream {
	return &stream{k: k, topic: topic, partitions: partitions, viewers: viewers, caps: caps, prefix: "imp", sent: map[string]int64{}}
}

// batch produces n impressions played at t, their Kafka timestamp t.
func (s *stream) batch(n int, t time.Time) error {
	recs := make([]*kgo.Record, 0, n)
	s.mu.Lock()
	for range n {
		v := fmt.Sprintf("viewer-%d", s.n%s.viewers)
		imp := impression{ID: fmt.Sprintf("%s-%d", s.prefix, s.n), Viewer: v, Time: t.UnixMilli(), Caps: s.caps}
		recs = append(recs, imp.record(s.topic, int32(s.n%int(s.partitions)), t))
		s.sent[v]++
		s.n++
	}
	s.mu.Unlock()
	return s.k.produceErr(recs...)
}

// start produces batches of n impressions, played now, every interval
// until stop.
func (s *stream) start(n int, interval time.Duration) {
	s.stopc, s.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(s.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-s.stopc:
				return
			case <-t.C:
				if err := s.batch(n, time.Now()); err != nil {
					s.err = err
					return
				}
			}
		}
	}()
}

// stop stops producing; it fails the test if a produce failed (an
// impression counted as sent might not be in the topic).
func (s *stream) stop() {
	s.k.t.Helper()
	close(s.stopc)
	<-s.done
	if s.err != nil {
		s.k.t.Fatalf("produce: %v", s.err)
	}
}

func (s *stream) viewerNames() []string {
	out := make([]string, s.viewers)
	for i := range out {
		out[i] = fmt.Sprintf("viewer-%d", i)
	}
	return out
}

func (s *stream) expected() (map[string]int64, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int64{}
	for v, n := range s.sent {
		out[v] = n
	}
	return out, s.n
}

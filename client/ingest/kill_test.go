package ingest

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fcap-io/fcap/client"
)

// mortal is what kill -9 does to an ingester, as the rest of the world
// sees it: its connections to the brokers close at once, it dials no
// more, and nothing it records afterwards reaches the cluster. Its
// goroutines live on in the test process, but can no longer act.
type mortal struct {
	mu    sync.Mutex
	dead  bool
	conns []net.Conn
	died  chan struct{}
}

func newMortal() *mortal { return &mortal{died: make(chan struct{})} }

func (m *mortal) dial(ctx context.Context, network, host string) (net.Conn, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.dead {
		return nil, fmt.Errorf("dial %s: the process is dead", host)
	}
	c, err := (&net.Dialer{}).DialContext(ctx, network, host)
	if err == nil {
		m.conns = append(m.conns, c)
	}
	return c, err
}

func (m *mortal) kill() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.dead = true
	close(m.died)
	for _, c := range m.conns {
		c.Close()
	}
}

// mortalCluster records through rec after a random delay of up to
// delay, unless its process died meanwhile: then the request never
// reaches the cluster (the worst case of a kill), and every call hangs
// until its context ends, unanswered.
type mortalCluster struct {
	rec   Recorder
	delay time.Duration
	m     *mortal
}

func (mc mortalCluster) RecordSync(ctx context.Context, items []client.RecordItem, _ ...client.SyncOption) []client.RecordAck {
	t := time.NewTimer(rand.N(mc.delay))
	defer t.Stop()
	select {
	case <-t.C:
		mc.m.mu.Lock()
		dead := mc.m.dead
		mc.m.mu.Unlock()
		if !dead {
			return mc.rec.RecordSync(ctx, items)
		}
	case <-mc.m.died:
	}
	<-ctx.Done()
	acks := make([]client.RecordAck, len(items))
	for i := range acks {
		acks[i].Err = ctx.Err()
	}
	return acks
}

// TestKill9MidStreamLosesNothing is TestIngesterKill9MidStream of
// test/ingest in one process, so it can run many rounds: an ingester
// killed (its broker connections cut, the dead member left in the group
// until its session times out) while impressions stream in and batches
// are in flight, a second one started a moment later; once the second
// caught up, every impression produced was recorded.
func TestKill9MidStreamLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("streams for seconds")
	}
	for r := range 4 {
		// Odd rounds start on a backlog with polls smaller than a fetch:
		// the client hands a fetched partition out over several polls.
		t.Run(fmt.Sprint("round", r), func(t *testing.T) { killRound(t, r%2 == 1) })
	}
}

// syncBuffer is a log destination for several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// roundPartitions is the partitions of "imps" in a kill or stall round.
const roundPartitions = 4

// newRound starts the kfake cluster, the fake fcap cluster and the
// ingester configuration of a kill or stall round: batches of 100,
// commits every 20 ms, and a 1 s session, so a member that dies or stalls
// leaves the group within the round.
func newRound(t *testing.T) (brokers []string, p *kgo.Client, f *fakeCluster, cfg Config) {
	t.Helper()
	brokers, p = kafkaWith(t, kfake.SeedTopics(roundPartitions, "imps"), kfake.GroupMinSessionTimeout(100*time.Millisecond))
	f = newFakeCluster()
	cfg = testConfig(brokers, "imps")
	cfg.BatchRecords = 100
	cfg.CommitInterval = 20 * time.Millisecond
	cfg.ShutdownTimeout = 10 * time.Millisecond
	cfg.KafkaOptions = append(cfg.KafkaOptions, kgo.SessionTimeout(time.Second), kgo.HeartbeatInterval(100*time.Millisecond))
	return brokers, p, f, cfg
}

func killRound(t *testing.T, backlog bool) {
	const partitions = roundPartitions
	brokers, p, f, cfg := newRound(t)

	st := newStream(t, p, partitions)
	if backlog {
		cfg.PollRecords = 700 + rand.IntN(2000)
		for range 20 {
			produce(t, p, st.batch(500)...)
		}
	}
	st.run(50)

	// The first ingester, killed at a random moment once it committed.
	m := newMortal()
	first := cfg
	first.KafkaOptions = append(first.KafkaOptions, kgo.Dialer(m.dial))
	// The dead one's goroutines complain until the test ends: its log is
	// shown only if the round fails.
	var firstLog syncBuffer
	first.Logger = slog.New(slog.NewTextHandler(&firstLog, nil))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("first ingester (killed):\n%s", firstLog.String())
		}
	})
	// Answers take up to 100 ms: batches finish out of order, and the
	// kill finds some acknowledged past others still in flight.
	in, err := New(first, mortalCluster{f, 100 * time.Millisecond, m})
	if err != nil {
		t.Fatal(err)
	}
	runUntilEnd(t, in, false)
	waitCommitted(t, brokers, partitions, "the first ingester commits")
	time.Sleep(time.Duration(rand.IntN(300)) * time.Millisecond)
	m.kill()
	time.Sleep(200 * time.Millisecond)
	start(t, cfg, slowCluster{f, 5 * time.Millisecond})
	time.Sleep(200 * time.Millisecond)
	expectAllCounted(t, brokers, f, partitions, st.halt(), "the second ingester")
}

// stallable is a process the machine stops running for a while (a
// stalled VM, a starved container): its broker connections carry nothing
// until it resumes, so its group session can expire under it while its
// goroutines still hold batches.
type stallable struct {
	mu      sync.Mutex
	resumed chan struct{} // nil while running; closed on resume
}

func (s *stallable) stall() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.resumed == nil {
		s.resumed = make(chan struct{})
	}
}

func (s *stallable) resume() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.resumed != nil {
		close(s.resumed)
		s.resumed = nil
	}
}

func (s *stallable) wait() {
	s.mu.Lock()
	ch := s.resumed
	s.mu.Unlock()
	if ch != nil {
		<-ch
	}
}

func (s *stallable) dial(ctx context.Context, network, host string) (net.Conn, error) {
	s.wait()
	c, err := (&net.Dialer{}).DialContext(ctx, network, host)
	if err != nil {
		return nil, err
	}
	return stallConn{c, s}, nil
}

type stallConn struct {
	net.Conn
	s *stallable
}

func (c stallConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.s.wait() // what arrived meanwhile is read once it runs again
	return n, err
}

func (c stallConn) Write(b []byte) (int, error) {
	c.s.wait()
	return c.Conn.Write(b)
}

// TestStalledMemberLosesNothing: of two ingesters sharing the stream,
// one stalls past its session timeout with batches in flight: the group
// gives its partitions to the other, and when it runs again its stale
// commits are refused, it finds its partitions lost and rejoins. Once
// the stream stops and the group caught up, every impression produced
// was recorded.
func TestStalledMemberLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("streams for seconds")
	}
	for r := range 3 {
		t.Run(fmt.Sprint("round", r), func(t *testing.T) { stallRound(t) })
	}
}

func stallRound(t *testing.T) {
	const partitions = roundPartitions
	brokers, p, f, cfg := newRound(t)
	cfg.RevokeTimeout = 50 * time.Millisecond
	// A stall between a join and its sync holds the group for the
	// rebalance timeout (60 s by default): keep it short.
	cfg.KafkaOptions = append(cfg.KafkaOptions, kgo.RebalanceTimeout(3*time.Second))

	st := newStream(t, p, partitions)
	st.run(50)

	s := &stallable{}
	stalling := cfg
	stalling.KafkaOptions = append(stalling.KafkaOptions, kgo.Dialer(s.dial))
	start(t, stalling, slowCluster{f, 100 * time.Millisecond})
	start(t, cfg, slowCluster{f, 20 * time.Millisecond})
	waitCommitted(t, brokers, partitions, "the group commits")
	for range 2 {
		time.Sleep(time.Duration(100+rand.IntN(400)) * time.Millisecond)
		s.stall()
		time.Sleep(1500 * time.Millisecond) // past the session timeout
		s.resume()
	}
	time.Sleep(500 * time.Millisecond)
	expectAllCounted(t, brokers, f, partitions, st.halt(), "the group")
}

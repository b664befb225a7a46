// Package ingest feeds an fcap cluster from Kafka: it consumes impression
// topics in a consumer group (cooperative-sticky rebalancing), decodes
// each record into impressions (JSON by default, any Decoder), records
// them through the client and waits for the cluster to acknowledge them,
// and commits a partition's offset only once every impression before it
// is acknowledged: at least once. A replay (a restart, a rebalance, a
// rebuild) counts once, because the engine deduplicates by impression id.
//
// A bad record (undecodable, invalid, a time too far ahead) never stops
// its partition: it is counted by reason and, when configured, produced
// to a dead-letter topic with the reason in a header. A slow cluster
// slows the ingester (the records in flight are bounded); nothing is
// dropped. Config.FromTime rebuilds a cluster from the topic.
package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/fcap-io/fcap/client"
)

// Recorder is what the ingester needs of the cluster: *client.Client's
// RecordSync, which answers once every impression is acknowledged or
// refused, or ctx ends.
type Recorder interface {
	RecordSync(ctx context.Context, items []client.RecordItem, opts ...client.SyncOption) []client.RecordAck
}

// Ingester consumes Kafka into an fcap cluster. Create it with New, run
// it with Run.
type Ingester struct {
	cfg   Config
	rec   Recorder
	log   *slog.Logger
	m     *metrics
	track *tracker
	kafka *kgo.Client
	bad   *badLog // samples the log of bad records

	// work hands batches to the workers.
	work chan *batch
	// workCtx is the workers' context: it outlives Run's for
	// ShutdownTimeout, so the batches in flight can finish.
	workCtx    context.Context
	workCancel context.CancelFunc
	wg         sync.WaitGroup
}

// New builds an ingester that records into rec (a *client.Client). It
// connects to no broker before Run.
func New(cfg Config, rec Recorder) (*Ingester, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if rec == nil {
		return nil, errors.New("ingest: no Recorder")
	}
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	in := &Ingester{
		cfg:   cfg,
		rec:   rec,
		log:   cfg.Logger.With("component", "fcap-ingest"),
		m:     m,
		track: newTracker(),
		work:  make(chan *batch),
	}
	clock := cfg.Clock
	if clock == nil {
		clock = time.Now
	}
	interval, examples := cfg.BadLogInterval, cfg.BadLogExamples
	if interval == 0 {
		interval = DefaultConfig(nil).BadLogInterval
	}
	if examples == 0 {
		examples = DefaultConfig(nil).BadLogExamples
	}
	in.bad = newBadLog(in.log, interval, examples, clock)
	return in, nil
}

func (in *Ingester) goFunc(f func()) {
	in.wg.Add(1)
	go func() {
		defer in.wg.Done()
		f()
	}()
}

// Run consumes until ctx ends, then stops polling, waits up to
// ShutdownTimeout for the batches in flight, commits what they
// acknowledged and leaves the group. It returns an error when it could
// not start (a bad broker list, a rebuild that failed) and nil after a
// clean stop. Call it once.
func (in *Ingester) Run(ctx context.Context) error {
	if !in.cfg.FromTime.IsZero() {
		if err := in.rewind(ctx); err != nil {
			return err
		}
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(in.cfg.Brokers...),
		kgo.ConsumerGroup(in.cfg.Group),
		kgo.ConsumeTopics(in.cfg.Topics...),
		kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.OnPartitionsRevoked(in.revoked),
		kgo.OnPartitionsLost(in.lost),
		kgo.WithLogger(kgoLogger{in.log}),
	}
	if in.cfg.InstanceID != "" {
		// Static membership: a restart (or kill -9) with the same id gets
		// its partitions back at once instead of after the session timeout.
		opts = append(opts, kgo.InstanceID(in.cfg.InstanceID))
	}
	if in.cfg.DeadLetterTopic != "" {
		opts = append(opts, kgo.DefaultProduceTopic(in.cfg.DeadLetterTopic), kgo.RequiredAcks(kgo.AllISRAcks()))
	}
	kafka, err := kgo.NewClient(append(opts, in.cfg.KafkaOptions...)...)
	if err != nil {
		return fmt.Errorf("ingest: kafka client: %w", err)
	}
	in.kafka = kafka
	in.workCtx, in.workCancel = context.WithCancel(context.Background())
	defer in.workCancel()
	for range in.cfg.Workers {
		in.goFunc(in.worker)
	}
	commitStop := make(chan struct{})
	commitDone := make(chan struct{})
	go func() {
		defer close(commitDone)
		in.commitLoop(commitStop)
	}()

	in.log.Info("ingesting", "topics", in.cfg.Topics, "group", in.cfg.Group, "dead_letter_topic", in.cfg.DeadLetterTopic)
	in.poll(ctx)

	// Stop: let the batches in flight finish, commit them, leave.
	close(in.work)
	stopTimer := time.AfterFunc(in.cfg.ShutdownTimeout, in.workCancel)
	in.wg.Wait()
	stopTimer.Stop()
	close(commitStop)
	<-commitDone
	in.commit(nil)
	kafka.CloseAllowingRebalance()
	if n := in.track.records(); n > 0 {
		in.log.Warn("stopped with records unacknowledged; they are replayed on restart", "records", n)
	}
	return nil
}

// poll takes records from Kafka and hands them to the workers until ctx
// ends. Rebalances wait while a poll's records are being handed out
// (BlockRebalanceOnPoll), so a revoked partition's callback sees every
// batch of it that will ever be dispatched.
func (in *Ingester) poll(ctx context.Context) {
	var batches []*batch
	for ctx.Err() == nil {
		fs := in.kafka.PollRecords(ctx, in.cfg.PollRecords)
		if fs.IsClientClosed() {
			return
		}
		fs.EachError(func(topic string, p int32, err error) {
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				return
			}
			in.m.fetchErrors.Inc()
			in.log.Warn("fetch failed", "topic", topic, "partition", p, "err", err)
		})
		batches = batches[:0]
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			f := in.track.add(p, &batches, in.cfg.BatchRecords)
			switch {
			case f.first >= 0:
				in.log.Info("partition: consuming from", "topic", p.Topic, "partition", p.Partition, "offset", f.first)
			case f.prev >= 0 && f.at > f.prev:
				in.log.Info("fetch skipped offsets (compaction or transaction markers)", "topic", p.Topic, "partition", p.Partition, "from", f.prev, "to", f.at)
			case f.prev >= 0 && f.at >= 0 && f.at < f.prev:
				in.log.Warn("fetch went back; nothing past the records fetched again is committed before they are acknowledged", "topic", p.Topic, "partition", p.Partition, "from", f.prev, "to", f.at)
			}
		})
		in.m.inFlight.Set(float64(in.track.records()))
		for i, b := range batches {
			select {
			case in.work <- b:
			case <-ctx.Done():
				for _, rest := range batches[i:] {
					in.track.abandon(rest)
				}
				in.kafka.AllowRebalance()
				return
			}
		}
		in.kafka.AllowRebalance()
	}
}

// worker records batches until the work channel closes.
func (in *Ingester) worker() {
	for b := range in.work {
		if in.process(in.workCtx, b) {
			in.track.finish(b)
		} else {
			in.track.abandon(b)
		}
		in.m.inFlight.Set(float64(in.track.records()))
	}
}

// commitLoop commits every CommitInterval until stop closes, and keeps
// the lag gauges current.
func (in *Ingester) commitLoop(stop <-chan struct{}) {
	t := time.NewTicker(in.cfg.CommitInterval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			in.commit(nil)
		}
	}
}

// commit commits the acknowledged offsets of the given partitions (all
// when keys is nil) and refreshes the lag gauges.
func (in *Ingester) commit(keys []tp) {
	offsets := in.track.committable(keys)
	if len(offsets) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var failed error
		in.kafka.CommitOffsetsSync(ctx, offsets, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
			if err == nil {
				err = commitError(resp)
			}
			failed = err
		})
		cancel()
		if failed != nil {
			in.m.commits.WithLabelValues("failed").Inc()
			in.log.Warn("commit failed; it is retried, and a replay counts once", "err", failed)
		} else {
			in.m.commits.WithLabelValues("ok").Inc()
			in.track.committed(offsets)
		}
	}
	in.track.lags(func(k tp, lag int64) {
		in.m.lag.WithLabelValues(k.topic, partLabel(k.partition)).Set(float64(lag))
	})
}

// revoked runs when a rebalance takes partitions away: it waits for
// their batches in flight (up to RevokeTimeout), commits what they
// acknowledged so the next owner starts there, and forgets them.
func (in *Ingester) revoked(_ context.Context, _ *kgo.Client, parts map[string][]int32) {
	keys := keysOf(parts)
	if !in.track.drain(keys, in.cfg.RevokeTimeout) {
		in.log.Warn("revoked partitions still had batches in flight; their next owner replays them", "partitions", parts)
	}
	in.commit(keys)
	in.forget(keys)
}

// lost runs when the group took partitions away without a rebalance (a
// session timeout): committing is no longer allowed, so they are
// forgotten; their next owner replays what was not committed.
func (in *Ingester) lost(_ context.Context, _ *kgo.Client, parts map[string][]int32) {
	in.log.Warn("partitions lost", "partitions", parts)
	in.forget(keysOf(parts))
}

func (in *Ingester) forget(keys []tp) {
	in.track.forget(keys)
	for _, k := range keys {
		in.m.lag.DeleteLabelValues(k.topic, partLabel(k.partition))
	}
}

func keysOf(parts map[string][]int32) []tp {
	keys := []tp{}
	for topic, ps := range parts {
		for _, p := range ps {
			keys = append(keys, tp{topic, p})
		}
	}
	return keys
}

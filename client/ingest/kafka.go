package ingest

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// rewind sets the group's committed offsets to the first offset at or
// after FromTime on every partition of the topics (Config.FromTime). It
// refuses a group with active members: their commits would race ours.
func (in *Ingester) rewind(ctx context.Context) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(in.cfg.Brokers...), kgo.WithLogger(kgoLogger{in.log})}, in.cfg.KafkaOptions...)...)
	if err != nil {
		return fmt.Errorf("ingest: rebuild: kafka client: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	groups, err := adm.DescribeGroups(ctx, in.cfg.Group)
	if err != nil {
		return fmt.Errorf("ingest: rebuild: describe group %q: %w", in.cfg.Group, err)
	}
	if g, ok := groups[in.cfg.Group]; ok && len(g.Members) > 0 {
		return fmt.Errorf("ingest: rebuild: group %q has %d active members: stop every ingester of the group first", in.cfg.Group, len(g.Members))
	}
	ms := in.cfg.FromTime.UnixMilli()
	listed, err := adm.ListOffsetsAfterMilli(ctx, ms, in.cfg.Topics...)
	if err != nil {
		return fmt.Errorf("ingest: rebuild: list offsets at %v: %w", in.cfg.FromTime, err)
	}
	if err := listed.Error(); err != nil {
		return fmt.Errorf("ingest: rebuild: list offsets at %v: %w", in.cfg.FromTime, err)
	}
	for _, t := range in.cfg.Topics {
		if _, ok := listed[t]; !ok {
			return fmt.Errorf("ingest: rebuild: topic %q not found", t)
		}
	}
	offsets := listed.Offsets()
	for t, ps := range offsets {
		for p, o := range ps {
			o.LeaderEpoch = -1 // a reset position: no data-loss detection against it
			ps[p] = o
			in.log.Info("rebuild: partition rewound", "topic", t, "partition", p, "offset", o.At, "from_time", in.cfg.FromTime)
		}
	}
	resp, err := adm.CommitOffsets(ctx, in.cfg.Group, offsets)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		return fmt.Errorf("ingest: rebuild: commit offsets for %v: %w", in.cfg.FromTime, err)
	}
	return nil
}

// commitError returns the first error of a commit response's partitions.
func commitError(resp *kmsg.OffsetCommitResponse) error {
	if resp == nil {
		return nil
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return fmt.Errorf("%s/%d: %w", t.Topic, p.Partition, err)
			}
		}
	}
	return nil
}

// kgoLogger sends franz-go's logs to slog, a level below: its info is
// our debug.
type kgoLogger struct{ log *slog.Logger }

func (l kgoLogger) Level() kgo.LogLevel {
	if l.log.Enabled(context.Background(), slog.LevelDebug) {
		return kgo.LogLevelInfo
	}
	return kgo.LogLevelWarn
}

func (l kgoLogger) Log(level kgo.LogLevel, msg string, kv ...any) {
	lv := slog.LevelDebug
	switch level {
	case kgo.LogLevelError:
		lv = slog.LevelError
	case kgo.LogLevelWarn:
		lv = slog.LevelWarn
	}
	l.log.Log(context.Background(), lv, "kafka: "+msg, kv...)
}

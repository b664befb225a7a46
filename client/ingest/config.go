package ingest

import (
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fcap-io/fcap"
)

// Config configures an Ingester. Start from DefaultConfig.
type Config struct {
	// Brokers are Kafka seed brokers ("host:port"). Required.
	Brokers []string

	// Topics are the topics to consume. Required.
	Topics []string

	// Group is the consumer group. The group's committed offsets are the
	// ingester's position: an offset is committed only once every
	// impression before it was acknowledged by the cluster. Default
	// "fcapingest".
	Group string

	// Ack says when an impression counts as acknowledged, and so when its
	// offset may be committed. AckReplicated (the default): once every
	// owner of its viewer applied it, so a node's death cannot take back
	// what was committed; it rides the replication batches that flow
	// anyway. AckOwner: once its owner applied it (strict caps wait for
	// their backups anyway); a soft impression acknowledged by an owner
	// that dies within the replication lag is lost for good, since its
	// offset was committed.
	Ack AckMode

	// InstanceID, when not empty, makes the ingester a static member of
	// the group (Kafka's group.instance.id): a restart, or a kill -9,
	// with the same id gets its partitions back at once instead of
	// leaving them unread for the session timeout. Give each ingester its
	// own stable id (fcapingest takes the pod name or host name): two
	// live ingesters with one id fence each other out. The trade-off: an
	// ingester that dies for good keeps its partitions until the session
	// timeout ends, where a dynamic member's would move at once on a
	// clean leave. Default "": a dynamic member.
	InstanceID string

	// BadLogInterval and BadLogExamples sample the log of bad records:
	// per reason, at most BadLogExamples records are logged each
	// BadLogInterval, then one line with how many more there were (all
	// are counted, and dead-lettered when configured). Defaults 10s, 5.
	BadLogInterval time.Duration
	BadLogExamples int

	// Decoder turns a record into impressions. Default JSON{}.
	Decoder Decoder

	// DeadLetterTopic, when set, receives every bad record (undecodable,
	// invalid, or with a time too far ahead), unchanged but for the
	// headers fcap-dead-letter-reason, fcap-dead-letter-error and
	// fcap-dead-letter-source (topic/partition/offset). A record's
	// offset is committed only once its dead letter is produced. Default
	// "": bad records are counted and logged, nothing more.
	DeadLetterTopic string

	// PollRecords bounds the records taken from Kafka in one poll.
	// Default 8192.
	PollRecords int

	// BatchRecords bounds the records recorded as one batch (their
	// impressions go to the cluster as one request per owner). Default
	// 2048.
	BatchRecords int

	// Workers is how many batches are recorded at once. PollRecords plus
	// Workers times BatchRecords bounds the records in flight (polled
	// and not yet acknowledged): when the cluster is slow, the ingester
	// stops polling, it never drops. Default 4.
	Workers int

	// CommitInterval is how often acknowledged positions are committed.
	// Default 500ms. A restart replays at most what was acknowledged in
	// the last interval, and the replay counts once (impression ids).
	CommitInterval time.Duration

	// MaxClockSkew is how far ahead of this process's clock an
	// impression's time may be; beyond it the record is bad
	// ("future_time"). Keep it at most fcapd's --max-clock-skew, which
	// refuses such impressions anyway. Default 1m, fcapd's default.
	MaxClockSkew time.Duration

	// Limits are the cluster's request limits (fcapd --scopes,
	// --max-id-length): an impression they refuse makes its record bad
	// ("invalid") before any of its impressions is sent. Default
	// fcap.Limits{}: fcapd's defaults.
	Limits fcap.Limits

	// RevokeTimeout bounds how long a partition being revoked in a
	// rebalance waits for its batches in flight before the ingester
	// gives it up uncommitted (its new owner replays them). Default 20s.
	RevokeTimeout time.Duration

	// ShutdownTimeout bounds how long Run, once its context ends, waits
	// for the batches in flight to be acknowledged and committed.
	// Default 10s.
	ShutdownTimeout time.Duration

	// FromTime, when not zero, rebuilds: before joining, the group's
	// committed offset of every partition of Topics is set to the first
	// offset at or after FromTime (Kafka's ListOffsets by timestamp), so
	// the cluster is fed everything since. The group must have no active
	// member. Default zero: resume from the committed offsets (the
	// earliest offset for a partition the group never committed).
	FromTime time.Time

	// KafkaOptions are more franz-go options for the Kafka client (TLS,
	// SASL, session timeout, ...). Default none.
	KafkaOptions []kgo.Opt

	// Acked, when set, is called once a record's impressions were all
	// acknowledged (or the record dead-lettered), with the time of the
	// acknowledgement: benchmarks measure produce-to-counted delay with
	// it. Called from several goroutines at once. Default nil.
	Acked func(r *kgo.Record, at time.Time)

	// Clock is the time source for the skew bound. Default time.Now.
	Clock func() time.Time

	// Logger receives the ingester's logs. Default slog.Default().
	Logger *slog.Logger

	// Registerer receives the ingester's metrics. Default: none.
	Registerer prometheus.Registerer
}

// DefaultConfig returns the defaults for the given brokers and topics.
func DefaultConfig(brokers []string, topics ...string) Config {
	return Config{
		Brokers:         brokers,
		Topics:          topics,
		Group:           "fcapingest",
		Decoder:         JSON{},
		PollRecords:     8192,
		BatchRecords:    2048,
		Workers:         4,
		CommitInterval:  500 * time.Millisecond,
		MaxClockSkew:    time.Minute,
		RevokeTimeout:   20 * time.Second,
		ShutdownTimeout: 10 * time.Second,
		BadLogInterval:  10 * time.Second,
		BadLogExamples:  5,
		Clock:           time.Now,
	}
}

// AckMode says when an impression counts as acknowledged (Config.Ack).
type AckMode uint8

const (
	// AckReplicated: every owner of its viewer applied it.
	AckReplicated AckMode = iota
	// AckOwner: its owner applied it.
	AckOwner
)

// String returns "replicated" or "owner".
func (a AckMode) String() string {
	switch a {
	case AckReplicated:
		return "replicated"
	case AckOwner:
		return "owner"
	}
	return "ack(" + strconv.Itoa(int(a)) + ")"
}

// ParseAckMode reads "replicated" or "owner".
func ParseAckMode(s string) (AckMode, error) {
	switch s {
	case "replicated":
		return AckReplicated, nil
	case "owner":
		return AckOwner, nil
	}
	return 0, fmt.Errorf("ingest config: ack %q: want replicated or owner", s)
}

// Validate checks every field.
func (c *Config) Validate() error {
	var errs []error
	if c.BadLogInterval < 0 || c.BadLogExamples < 0 {
		errs = append(errs, fmt.Errorf("ingest config: BadLogInterval %v and BadLogExamples %d must not be negative", c.BadLogInterval, c.BadLogExamples))
	}
	if c.Ack != AckReplicated && c.Ack != AckOwner {
		errs = append(errs, fmt.Errorf("ingest config: unknown %v", c.Ack))
	}
	if len(c.Brokers) == 0 {
		errs = append(errs, errors.New("ingest config: no Brokers"))
	}
	if len(c.Topics) == 0 {
		errs = append(errs, errors.New("ingest config: no Topics"))
	}
	for _, t := range c.Topics {
		if t == "" {
			errs = append(errs, errors.New("ingest config: an empty topic name"))
		}
		if t == c.DeadLetterTopic {
			errs = append(errs, fmt.Errorf("ingest config: topic %q is also the DeadLetterTopic", t))
		}
	}
	if c.Group == "" {
		errs = append(errs, errors.New("ingest config: no Group"))
	}
	if c.Decoder == nil {
		errs = append(errs, errors.New("ingest config: no Decoder"))
	}
	if c.PollRecords < 1 || c.BatchRecords < 1 || c.Workers < 1 || c.Workers > 1024 {
		errs = append(errs, fmt.Errorf("ingest config: PollRecords (%d) and BatchRecords (%d) must be positive and Workers (%d) in [1, 1024]",
			c.PollRecords, c.BatchRecords, c.Workers))
	}
	for name, d := range map[string]time.Duration{
		"CommitInterval": c.CommitInterval, "RevokeTimeout": c.RevokeTimeout, "ShutdownTimeout": c.ShutdownTimeout,
	} {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("ingest config: %s must be positive, got %v", name, d))
		}
	}
	if c.MaxClockSkew < 0 {
		errs = append(errs, fmt.Errorf("ingest config: MaxClockSkew must not be negative, got %v", c.MaxClockSkew))
	}
	if c.Clock == nil {
		errs = append(errs, errors.New("ingest config: no Clock"))
	}
	return errors.Join(errs...)
}

package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/client/ingest"
)

// options are the parsed command line.
type options struct {
	ingest    ingest.Config
	client    client.Config
	tokenFile string
	http      string
	logLevel  string
	logFormat string
	session   time.Duration
}

// parseFlags reads the command line. Every flag may also come from the
// environment variable named beside it; a flag wins.
func parseFlags(args []string, getenv func(string) string, out io.Writer) (*options, error) {
	o := &options{
		ingest: ingest.DefaultConfig(nil),
		client: client.DefaultConfig(),
	}
	fs := flag.NewFlagSet("fcapingest", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.Usage = func() {
		fmt.Fprintf(out, "fcapingest consumes impressions from Kafka into an fcap cluster, at least once.\n\nUsage: fcapingest --brokers host:9092 --topics impressions --seeds node:7000 [flags]\n\n")
		fs.PrintDefaults()
	}
	env := func(name, def string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return def
	}
	var (
		ack                                      string
		brokers, topics, seeds, fromTime, scopes string
		tlsCA, tlsCert, tlsKey                   string
		kafkaTLS                                 bool
		kafkaCA, kafkaCert, kafkaKey             string
		errs                                     []error
	)
	fs.StringVar(&brokers, "brokers", env("FCAP_INGEST_BROKERS", ""), "Kafka seed brokers, comma-separated (FCAP_INGEST_BROKERS); required")
	fs.StringVar(&topics, "topics", env("FCAP_INGEST_TOPICS", ""), "topics to consume, comma-separated (FCAP_INGEST_TOPICS); required")
	fs.StringVar(&seeds, "seeds", env("FCAP_INGEST_SEEDS", ""), "data-plane addresses of fcap nodes, comma-separated (FCAP_INGEST_SEEDS); required")
	fs.StringVar(&o.ingest.Group, "group", env("FCAP_INGEST_GROUP", o.ingest.Group), "Kafka consumer group (FCAP_INGEST_GROUP)")
	fs.StringVar(&o.ingest.DeadLetterTopic, "dead-letter-topic", env("FCAP_INGEST_DEAD_LETTER_TOPIC", ""), "topic receiving bad records with the reason in the fcap-dead-letter-reason header (FCAP_INGEST_DEAD_LETTER_TOPIC); empty: count and log them only")
	fs.StringVar(&ack, "ack", env("FCAP_INGEST_ACK", "replicated"), "when an impression counts as acknowledged and its offset may be committed: replicated (every owner of its viewer applied it: a node's death loses nothing committed) or owner (its owner applied it; a soft impression can be lost with its owner) (FCAP_INGEST_ACK)")
	fs.StringVar(&o.ingest.InstanceID, "instance-id", env("FCAP_INGEST_INSTANCE_ID", getenv("POD_NAME")), "static group membership: a stable id of this ingester (its pod name), so a restart or kill -9 gets its partitions back at once instead of after --session-timeout; each ingester its own; empty: a dynamic member (FCAP_INGEST_INSTANCE_ID, default $POD_NAME)")
	fs.StringVar(&fromTime, "from-time", env("FCAP_INGEST_FROM_TIME", ""), "rebuild: before joining, rewind the group on every partition to the first record at or after this time (RFC 3339 or Unix milliseconds); the group must have no active member (FCAP_INGEST_FROM_TIME)")
	intFlag := func(p *int, name, envName, usage string) {
		fs.Func(name, fmt.Sprintf("%s (%s) (default %d)", usage, envName, *p), func(s string) error {
			n, err := strconv.Atoi(s)
			*p = n
			return err
		})
		if v := getenv(envName); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", envName, err))
			}
			*p = n
		}
	}
	durFlag := func(p *time.Duration, name, envName, usage string) {
		if v := getenv(envName); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", envName, err))
			}
			*p = d
		}
		fs.DurationVar(p, name, *p, fmt.Sprintf("%s (%s)", usage, envName))
	}
	fs.StringVar(&scopes, "scopes", env("FCAP_SCOPES", ""), `cap scopes the cluster accepts, comma-separated, or "*" for any: as fcapd --scopes; a record naming another is bad ("invalid") (FCAP_SCOPES) (default creative,campaign,advertiser)`)
	intFlag(&o.ingest.Limits.MaxIDLength, "max-id-length", "FCAP_MAX_ID_LENGTH", "longest viewer, cap and impression id the cluster accepts, in bytes: as fcapd --max-id-length; 0: fcapd's default")
	intFlag(&o.ingest.Workers, "workers", "FCAP_INGEST_WORKERS", "batches recorded at once; poll-records plus workers times batch-records bounds the records in flight")
	intFlag(&o.ingest.BatchRecords, "batch-records", "FCAP_INGEST_BATCH_RECORDS", "records recorded as one batch")
	intFlag(&o.ingest.PollRecords, "poll-records", "FCAP_INGEST_POLL_RECORDS", "records taken from Kafka in one poll")
	durFlag(&o.ingest.CommitInterval, "commit-interval", "FCAP_INGEST_COMMIT_INTERVAL", "how often acknowledged offsets are committed")
	durFlag(&o.ingest.MaxClockSkew, "max-clock-skew", "FCAP_INGEST_MAX_CLOCK_SKEW", "how far ahead of this clock an impression's time may be; keep it at most fcapd's")
	durFlag(&o.ingest.ShutdownTimeout, "shutdown-timeout", "FCAP_INGEST_SHUTDOWN_TIMEOUT", "on SIGTERM, how long the batches in flight get to be acknowledged and committed")
	o.session = 45 * time.Second
	durFlag(&o.session, "session-timeout", "FCAP_INGEST_SESSION_TIMEOUT", "Kafka group session timeout: how soon a dead ingester's partitions move to another")
	o.client.RecordTimeout = time.Second
	durFlag(&o.client.RecordTimeout, "record-timeout", "FCAP_INGEST_RECORD_TIMEOUT", "deadline of one request to a node; a request past it is retried")
	o.client.DialTimeout = time.Second
	durFlag(&o.client.DialTimeout, "dial-timeout", "FCAP_INGEST_DIAL_TIMEOUT", "deadline to connect to a node")
	fs.StringVar(&o.tokenFile, "token-file", env("FCAP_INGEST_TOKEN_FILE", ""), "file holding the token presented to nodes started with a tokens file (a role allowed to record) (FCAP_INGEST_TOKEN_FILE)")
	fs.StringVar(&tlsCA, "tls-ca", env("FCAP_INGEST_TLS_CA", ""), "PEM CA file verifying the nodes' certificates: connect to nodes over TLS (FCAP_INGEST_TLS_CA)")
	fs.StringVar(&tlsCert, "tls-cert", env("FCAP_INGEST_TLS_CERT", ""), "PEM client certificate for nodes started with --tls-client-ca (FCAP_INGEST_TLS_CERT)")
	fs.StringVar(&tlsKey, "tls-key", env("FCAP_INGEST_TLS_KEY", ""), "PEM key of --tls-cert (FCAP_INGEST_TLS_KEY)")
	fs.BoolVar(&kafkaTLS, "kafka-tls", env("FCAP_INGEST_KAFKA_TLS", "") == "true", "connect to the brokers over TLS (FCAP_INGEST_KAFKA_TLS=true)")
	fs.StringVar(&kafkaCA, "kafka-tls-ca", env("FCAP_INGEST_KAFKA_TLS_CA", ""), "PEM CA file verifying the brokers (implies --kafka-tls; empty: the system's roots) (FCAP_INGEST_KAFKA_TLS_CA)")
	fs.StringVar(&kafkaCert, "kafka-tls-cert", env("FCAP_INGEST_KAFKA_TLS_CERT", ""), "PEM client certificate for the brokers (FCAP_INGEST_KAFKA_TLS_CERT)")
	fs.StringVar(&kafkaKey, "kafka-tls-key", env("FCAP_INGEST_KAFKA_TLS_KEY", ""), "PEM key of --kafka-tls-cert (FCAP_INGEST_KAFKA_TLS_KEY)")
	fs.StringVar(&o.http, "http", env("FCAP_INGEST_HTTP", "127.0.0.1:9102"), "address serving /metrics and /healthz (FCAP_INGEST_HTTP)")
	fs.StringVar(&o.logLevel, "log-level", env("FCAP_LOG_LEVEL", "info"), "debug, info, warn or error (FCAP_LOG_LEVEL)")
	fs.StringVar(&o.logFormat, "log-format", env("FCAP_LOG_FORMAT", "text"), "text or json (FCAP_LOG_FORMAT)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		errs = append(errs, fmt.Errorf("unexpected arguments: %q", fs.Args()))
	}
	o.ingest.Brokers, o.ingest.Topics, o.client.Seeds = split(brokers), split(topics), split(seeds)
	if a, err := ingest.ParseAckMode(ack); err != nil {
		errs = append(errs, fmt.Errorf("--ack: %w", err))
	} else {
		o.ingest.Ack = a
	}
	if fromTime != "" {
		t, err := parseTime(fromTime)
		if err != nil {
			errs = append(errs, fmt.Errorf("--from-time: %w", err))
		}
		o.ingest.FromTime = t
	}
	switch scopes {
	case "":
	case "*":
		o.ingest.Limits.AnyScope = true
	default:
		o.ingest.Limits.Scopes = split(scopes)
	}
	o.client.Limits = o.ingest.Limits
	if o.session <= 0 {
		errs = append(errs, fmt.Errorf("--session-timeout must be positive, got %v", o.session))
	}
	o.ingest.KafkaOptions = append(o.ingest.KafkaOptions, kgo.SessionTimeout(o.session), kgo.ClientID("fcapingest"))
	if tlsCA != "" || tlsCert != "" || tlsKey != "" {
		cfg, err := client.LoadTLS(tlsCA, tlsCert, tlsKey)
		if err != nil {
			errs = append(errs, fmt.Errorf("--tls-*: %w", err))
		}
		o.client.TLS = cfg
	}
	if kafkaTLS || kafkaCA != "" || kafkaCert != "" || kafkaKey != "" {
		cfg, err := client.LoadTLS(kafkaCA, kafkaCert, kafkaKey)
		if err != nil {
			errs = append(errs, fmt.Errorf("--kafka-tls-*: %w", err))
		} else {
			o.ingest.KafkaOptions = append(o.ingest.KafkaOptions, kgo.DialTLSConfig(cfg))
		}
	}
	if o.tokenFile != "" {
		b, err := os.ReadFile(o.tokenFile)
		if err != nil {
			errs = append(errs, fmt.Errorf("--token-file: %w", err))
		}
		o.client.Token = strings.TrimSpace(string(b))
	}
	errs = append(errs, o.ingest.Validate(), o.client.Validate())
	return o, errors.Join(errs...)
}

// parseTime reads RFC 3339 or Unix milliseconds.
func parseTime(s string) (time.Time, error) {
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.UnixMilli(ms), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is neither RFC 3339 nor Unix milliseconds", s)
	}
	return t, nil
}

func split(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

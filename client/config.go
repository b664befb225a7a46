package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/proto"
)

// Config configures a Client. Every zero field means its documented
// default, so Config{Seeds: seeds} is a complete configuration;
// DefaultConfig spells the defaults out. A negative duration or count is
// an error (but Margin and HedgeBudget, where negative means "none").
type Config struct {
	// Seeds are data-plane addresses ("host:port") of any fcap nodes. The
	// client learns the whole topology from the first that answers (a
	// seed that is down or never answers is passed over within 100ms)
	// and keeps it current from every member; it never joins gossip.
	// Required.
	Seeds []string

	// Timeout is the deadline of every call, retries included, unless
	// the call's context is shorter. Default 5ms: the cap check sits on
	// the hottest path of the ad decision.
	Timeout time.Duration

	// Margin is how long before its deadline a call stops waiting for the
	// cluster and decides by the failure policy. When a timer fires, the
	// Go runtime and the OS may run the waiting goroutine late: a fraction
	// of a millisecond on an idle machine, several on a busy one. Giving
	// up that much early is what hands the verdict back by the deadline
	// rather than after it. A call never gives up more than a tenth of
	// its budget early. Default 0: Timeout/10, at most 5ms (0.5ms for the
	// default Timeout). Negative: no
	// margin (wait for the deadline itself).
	Margin time.Duration

	// HedgeBudget bounds hedged reads: a soft check whose owner has not
	// answered after the hedge delay (the 99th percentile of that owner's
	// recent latencies, a quarter of the call's budget until it has
	// enough, between 200µs and half the call's budget) is also sent to a backup owner, and the first
	// answer wins. At most this share of the checks that could hedge
	// do, over the long run (up to 10 saved up), so a sick cluster is
	// not sent twice its load. Default 0: 0.05 (5%). Negative: never
	// hedge (the owner keeps the whole deadline). At most 1.
	HedgeBudget float64

	// DialTimeout bounds connecting to a node. Default 250ms. A call
	// waits, within its own deadline, only for a node's first dial (the
	// one started when the node entered the topology); after that calls
	// never wait for a dial: a node that lost its connections fails over
	// at once while they are remade in the background.
	DialTimeout time.Duration

	// Dial, when set, opens every connection to a node instead of a
	// net.Dialer; addr is the node's data-plane address as the topology
	// names it, and ctx carries DialTimeout. Tests use it to route
	// through fault-injecting proxies; most programs leave it nil.
	// Default nil.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)

	// ConnsPerNode is how many multiplexed connections the client keeps to
	// each node. Default 2.
	ConnsPerNode int

	// SoftFailClosed decides a soft cap's verdict when the cluster
	// cannot answer in time: false (the default) allows the ad and marks
	// the verdict FailOpen; true denies it and marks it FailClosed.
	SoftFailClosed bool

	// StrictFailOpen decides a strict cap's verdict when the cluster
	// cannot answer in time: false (the default) denies the ad and marks
	// the verdict FailClosed, for caps where an overshoot is billed; true
	// allows it and marks it FailOpen.
	StrictFailOpen bool

	// RefreshInterval is how often the topology is refreshed even when no
	// response says it changed. Default 10s.
	RefreshInterval time.Duration

	// RecordQueue bounds the impressions waiting to be sent; past it
	// Record drops and counts. Default 65536.
	RecordQueue int

	// RecordBatch is the most impressions sent in one request. Default 256.
	RecordBatch int

	// RecordLinger is how long the sender waits to fill a batch. Default 1ms.
	RecordLinger time.Duration

	// RecordTimeout is the deadline of one batch send. Default 250ms:
	// impressions are off the ad decision's path.
	RecordTimeout time.Duration

	// RecordRetryMin and RecordRetryMax bound the exponential backoff
	// between attempts at a failed impression (half fixed, half
	// jittered). Defaults 10ms and 5s.
	RecordRetryMin, RecordRetryMax time.Duration

	// RecordAttempts is how many times an impression is tried before it is
	// dropped and counted. Default 20: 30-60 s of backoff in all, enough
	// to ride out a node's death and the failover after it.
	RecordAttempts int

	// RecordSenders is how many batches may be in flight at once.
	// Default 4.
	RecordSenders int

	// TLS, if not nil, connects to the nodes over TLS with this config:
	// RootCAs verify the nodes' certificates (their data-plane address
	// must be in them), Certificates hold the client certificate nodes
	// started with --tls-client-ca require. LoadTLS builds one from
	// files. Default nil: plaintext.
	TLS *tls.Config

	// Token, if not empty, is presented once on every new connection
	// (a Hello, before any request) to nodes started with a tokens file;
	// its role decides what the client may ask (an ad server's token:
	// check, allow, record, reserve, release). A connection the node
	// refuses is not used: calls fail open or closed as for a node that
	// is down, and the refusal is logged. Default empty: no token.
	Token string

	// TokenFunc, if not nil, is asked for the token each new connection
	// presents, in place of Token: for a caller whose token rotates
	// (each fcap node's JSON API follows its tokens file so). Default nil.
	TokenFunc func() string

	// MaxFrame bounds response frames. Default proto.DefaultMaxFrame.
	MaxFrame int

	// ResolveCacheSize bounds the device resolutions the client caches
	// (calls with the Device option). Default 100,000; past it, entries
	// are evicted at random.
	ResolveCacheSize int

	// ResolveTTL is how long a cached resolution is trusted: a device
	// linked or unlinked elsewhere may be counted under its old identity
	// for up to this long. Default 30s.
	ResolveTTL time.Duration

	// Logger receives the client's logs. Default slog.Default().
	Logger *slog.Logger

	// OnGiveBack, if set, is told of every late strict grant the client
	// tried to give back (see Undo in the package doc): the viewer, how
	// it went and when. It runs on the client's one give-back goroutine
	// and must not block. For an audit trail, or a test's history: a
	// returned grant is a slot freed after a call that failed closed.
	OnGiveBack func(GiveBack)

	// Limits are the cluster's request limits (fcapd --scopes,
	// --max-id-length): Record refuses at once, with an error naming the
	// field and the values accepted, an impression that breaks them,
	// rather than queue one the owner would drop. Every zero field means
	// fcapd's default (fcap.Limits), so a client of a cluster started with
	// other --scopes must say so here (AnyScope accepts every scope and
	// leaves the judgement to the nodes). Default: fcap.Limits{}.
	Limits fcap.Limits

	// Registerer receives the client's metrics (the ad server's own
	// registry). Default: none; the metrics still count, see Stats.
	Registerer prometheus.Registerer

	// MetricsNamespace, when set, prefixes every metric's name:
	// "ns_fcap_client_calls_total" instead of "fcap_client_calls_total".
	// Default empty.
	MetricsNamespace string

	// MetricsLabels are constant labels added to every metric, so several
	// clients can register on one Registerer (each with its own label
	// values, {"cluster": "eu"} and {"cluster": "us"}, say). Default none.
	MetricsLabels prometheus.Labels
}

// DefaultConfig returns the defaults for the given seeds, spelled out:
// the same client as Config{Seeds: seeds}.
func DefaultConfig(seeds ...string) Config {
	return Config{
		Seeds:            seeds,
		Timeout:          5 * time.Millisecond,
		DialTimeout:      250 * time.Millisecond,
		ConnsPerNode:     2,
		RefreshInterval:  10 * time.Second,
		RecordQueue:      65536,
		RecordBatch:      256,
		RecordLinger:     time.Millisecond,
		RecordTimeout:    250 * time.Millisecond,
		RecordRetryMin:   10 * time.Millisecond,
		RecordRetryMax:   5 * time.Second,
		RecordAttempts:   20,
		RecordSenders:    4,
		MaxFrame:         proto.DefaultMaxFrame,
		ResolveCacheSize: 100_000,
		ResolveTTL:       30 * time.Second,
	}
}

// withDefaults returns c with every zero field set to its default.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	setDuration := func(f *time.Duration, def time.Duration) {
		if *f == 0 {
			*f = def
		}
	}
	setInt := func(f *int, def int) {
		if *f == 0 {
			*f = def
		}
	}
	setDuration(&c.Timeout, d.Timeout)
	setDuration(&c.DialTimeout, d.DialTimeout)
	setDuration(&c.RefreshInterval, d.RefreshInterval)
	setDuration(&c.RecordLinger, d.RecordLinger)
	setDuration(&c.RecordTimeout, d.RecordTimeout)
	setDuration(&c.RecordRetryMin, d.RecordRetryMin)
	setDuration(&c.RecordRetryMax, d.RecordRetryMax)
	setDuration(&c.ResolveTTL, d.ResolveTTL)
	setInt(&c.ConnsPerNode, d.ConnsPerNode)
	setInt(&c.RecordQueue, d.RecordQueue)
	setInt(&c.RecordBatch, d.RecordBatch)
	setInt(&c.RecordAttempts, d.RecordAttempts)
	setInt(&c.RecordSenders, d.RecordSenders)
	setInt(&c.MaxFrame, d.MaxFrame)
	setInt(&c.ResolveCacheSize, d.ResolveCacheSize)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Validate checks every field, a zero field standing for its default,
// and returns every fault it finds (errors.Join), each an error wrapping
// ErrBadConfig that names the field and the value at fault: no Seeds, a
// seed that is not host:port with a port in 1-65535, a seed given twice,
// a negative duration or count. New calls it.
func (c *Config) Validate() error {
	r := c.withDefaults()
	return r.validate()
}

func (c *Config) validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrBadConfig}, args...)...))
	}
	if len(c.Seeds) == 0 {
		bad("no Seeds: give the data-plane address (host:port, fcapd --data) of one node or more")
	}
	seen := make(map[string]int, len(c.Seeds))
	for i, s := range c.Seeds {
		key, err := seedKey(s)
		if err != nil {
			bad("Seeds[%d] %q: %v", i, s, err)
			continue
		}
		if j, dup := seen[key]; dup {
			bad("Seeds[%d] %q repeats Seeds[%d] %q", i, s, j, c.Seeds[j])
			continue
		}
		seen[key] = i
	}
	for _, f := range []struct {
		name string
		d    time.Duration
	}{
		{"Timeout", c.Timeout}, {"DialTimeout", c.DialTimeout}, {"RefreshInterval", c.RefreshInterval},
		{"RecordLinger", c.RecordLinger}, {"RecordTimeout", c.RecordTimeout},
		{"RecordRetryMin", c.RecordRetryMin}, {"RecordRetryMax", c.RecordRetryMax}, {"ResolveTTL", c.ResolveTTL},
	} {
		if f.d <= 0 {
			bad("%s must be positive (0 means the default), got %v", f.name, f.d)
		}
	}
	if c.RecordRetryMax < c.RecordRetryMin {
		bad("RecordRetryMax (%v) is below RecordRetryMin (%v)", c.RecordRetryMax, c.RecordRetryMin)
	}
	if c.ConnsPerNode < 1 || c.ConnsPerNode > 64 {
		bad("ConnsPerNode must be in [1, 64], got %d", c.ConnsPerNode)
	}
	for _, f := range []struct {
		name string
		n    int
	}{
		{"RecordQueue", c.RecordQueue}, {"RecordAttempts", c.RecordAttempts}, {"RecordSenders", c.RecordSenders},
	} {
		if f.n < 1 {
			bad("%s must be positive (0 means the default), got %d", f.name, f.n)
		}
	}
	if c.RecordBatch < 1 || c.RecordBatch > proto.MaxRecordItems {
		bad("RecordBatch must be in [1, %d], got %d", proto.MaxRecordItems, c.RecordBatch)
	}
	if math.IsNaN(c.HedgeBudget) || c.HedgeBudget > 1 {
		bad("HedgeBudget must be at most 1, got %v", c.HedgeBudget)
	}
	if c.MaxFrame < 1024 {
		bad("MaxFrame must be at least 1024, got %d", c.MaxFrame)
	}
	if c.ResolveCacheSize < 1 {
		bad("ResolveCacheSize must be positive, got %d", c.ResolveCacheSize)
	}
	return errors.Join(errs...)
}

// seedKey checks that a seed is a data-plane address a dial can use,
// host:port with a numeric port, and returns it in the form duplicates
// compare by (the host in lower case).
func seedKey(s string) (string, error) {
	if strings.Contains(s, "://") {
		return "", errors.New("a URL, not an address: give host:port")
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return "", fmt.Errorf("not host:port (%v)", err)
	}
	if host == "" {
		return "", errors.New("no host before the port")
	}
	if strings.ContainsAny(host, " \t\r\n/?#@") {
		return "", fmt.Errorf("host %q is not a host name or IP address", host)
	}
	n, err := strconv.Atoi(port)
	if err != nil || strings.HasPrefix(port, "+") {
		return "", fmt.Errorf("port %q is not a number", port)
	}
	if n < 1 || n > 65535 {
		return "", fmt.Errorf("port %d is out of range (1-65535)", n)
	}
	return net.JoinHostPort(strings.ToLower(host), strconv.Itoa(n)), nil
}

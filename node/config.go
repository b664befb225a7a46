package node

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fcap-io/fcap/node/engine"
	"github.com/fcap-io/fcap/node/gossip"
	"github.com/fcap-io/fcap/node/quorum"
	"github.com/fcap-io/fcap/node/region"
	"github.com/fcap-io/fcap/node/replication"
	"github.com/fcap-io/fcap/node/security"
	"github.com/fcap-io/fcap/node/storage"
	"github.com/fcap-io/fcap/proto"
	"github.com/fcap-io/fcap/ring"
)

// Config configures a Node. Start from DefaultConfig or DefaultLocalConfig.
type Config struct {
	// Name is the node's stable name: it places the node on the ring, so
	// a restarted node keeps its partitions. Default: the host name.
	Name string

	// DataAddr is where the data plane (the msgpack protocol) listens.
	// Default 127.0.0.1:7700.
	DataAddr string

	// AdvertiseDataAddr is the data-plane address other nodes and clients
	// are told. Default: the address DataAddr bound (port 0 resolved).
	AdvertiseDataAddr string

	// HTTPAddr is where metrics (/metrics) and health (/healthz, /readyz)
	// are served. Empty disables HTTP. Default 127.0.0.1:7780.
	HTTPAddr string

	// Membership configures gossip and the ring. Its nested memberlist
	// config holds the gossip bind address (default 127.0.0.1:7946). Self
	// is filled in by the node.
	Membership gossip.Config

	// Engine configures the cap engine.
	Engine engine.Config

	// MaxFrame is the largest request frame accepted; a larger length
	// prefix closes the connection before anything is allocated for it.
	// Default proto.DefaultMaxFrame (1 MiB).
	MaxFrame int

	// MaxConns bounds open data-plane connections; past it new ones are
	// told ErrOverloaded and closed. Default 4096.
	MaxConns int

	// MaxPendingConns bounds the connections that have not yet
	// authenticated: with Tokens, those that have not said a valid
	// Hello; without, those that have not sent a complete first request.
	// When a new connection finds this many waiting, or MaxConns full
	// with some of them waiting, the oldest waiting one is told
	// ErrOverloaded and closed to make room: idle or half-open
	// connections cannot lock a new client out, and at least MaxConns -
	// MaxPendingConns places are always left for connections that have
	// authenticated. 0 means a quarter of MaxConns. Default 0.
	MaxPendingConns int

	// HandshakeTimeout is how long a connection that has not
	// authenticated has to do so. With Tokens: from its accept (and TLS
	// handshake) to a valid Hello. Without: from its first byte to the
	// header of its first request (before the first byte, a connection
	// is idle and IdleTimeout applies, as a client's spare connections
	// are; the body, up to MaxFrame, is read as any request's). Until it
	// has authenticated, its frames are limited to 4 KiB with Tokens (a
	// Hello is a token) and its read buffer to 1 KiB. Default 2s.
	HandshakeTimeout time.Duration

	// IdleTimeout closes a connection that sends nothing for this long.
	// Default 5m.
	IdleTimeout time.Duration

	// WriteTimeout closes a connection whose peer does not read its
	// responses for this long (a slow reader must not pin memory).
	// Default 10s.
	WriteTimeout time.Duration

	// Clock returns the node's time in milliseconds, for requests that
	// omit theirs. It is the authority on what "now" is: the engine runs
	// on it (engine.Config.Clock is set from it), so no time a caller, a
	// peer, the log or a snapshot gives moves the node's state past it.
	// Default: Unix milliseconds of the wall clock.
	Clock func() int64

	// MaxClockSkew is how far ahead of Clock a caller's time (Check,
	// Allow and Reserve's now, an impression's time, a link's time) may
	// be. A request beyond it is refused with proto.ErrFutureTime and
	// changes nothing; a peer's or the log's high-water mark beyond it
	// is clamped to Clock and counted (fcap_time_clamped_total). The past
	// is bounded by each cap's window, as ever: an impression older than
	// its longest window is Stale. It overrides Engine.MaxFuture.
	// Default 1m.
	MaxClockSkew time.Duration

	// Logger receives the node's logs. Default slog.Default().
	Logger *slog.Logger

	// Registerer receives the node's metrics. Default: a new registry
	// of the node's own, served on /metrics.
	Registerer prometheus.Registerer

	// Gatherer serves /metrics. Default: the Registerer when it is a
	// *prometheus.Registry.
	Gatherer prometheus.Gatherer

	// HTTPAPI serves the JSON API that API starts under /v1/ on the HTTP
	// address. Default true.
	HTTPAPI bool
	// API starts the JSON API once the data plane listens (cmd/fcapd
	// passes client/httpapi's Start; see APIEnv). nil: no JSON API.
	// Default nil.
	API func(APIEnv) (API, error)
	// APITimeout bounds each JSON API call to the cluster unless the
	// request asks for less. Default 20 ms (JSON callers are not in
	// process: they pay for HTTP too).
	APITimeout time.Duration
	// APIMaxBody limits JSON API request bodies. Default 1 MiB.
	APIMaxBody int64

	// Pprof serves Go's profiles under /debug/pprof/ on the HTTP address.
	// Default false: they expose internals and cost CPU while running.
	Pprof bool

	// MaxDevicesPerViewer bounds the devices linked to one viewer
	// (identity). Default 32.
	MaxDevicesPerViewer int

	// StrictTimeout is how long a strict write waits for every backup to
	// apply it before answering with an error (the client then fails
	// closed). Default 1s.
	StrictTimeout time.Duration

	// DrainTimeout bounds a graceful leave's hand-over (Drain, SIGTERM);
	// past it the node leaves anyway. Default 60s.
	DrainTimeout time.Duration

	// Linger is how long a node that left keeps answering NotOwner, so
	// clients move to the new owners without a failed call. Default 2s.
	Linger time.Duration

	// Replication paces and bounds replication and partition moves
	// (Timeout, TransferRate, DropGrace, SyncTimeout); the node fills in
	// the rest. Default replication.DefaultConfig().
	Replication replication.Config

	// Quorum paces the majority check that strict writes need (Interval,
	// Lease); the node fills in Self and Logger. Default
	// quorum.DefaultConfig: each peer asked every 200ms, a confirmation
	// counting for 1s, so a node cut off from the majority stops granting
	// strict writes within 1s of the cut.
	Quorum quorum.Config

	// Security is what the data plane trusts: TLS, and the tokens of
	// its connections. Default: plaintext, no authentication.
	Security security.Config

	// Bootstrap lets a node given seeds (Membership.Seeds) form a new
	// cluster alone when, after SyncTimeout, it has joined none of them.
	// Without it such a node waits for its seeds however long it takes,
	// unready and saying why, so a typo in --join cannot split a cluster.
	// A node without seeds always forms its own. Default false.
	Bootstrap bool

	// Storage makes the node durable when its DataDir is set: a
	// write-ahead log, snapshots, and their load at start. Default
	// storage.DefaultConfig(): memory only.
	Storage storage.Config

	// Region names this node's region and the peer regions it ships
	// its soft changes to (ARCHITECTURE.md, "Regions"). Default
	// region.DefaultConfig(): a single region, nothing shipped.
	Region region.Config
}

// DefaultConfig returns a production configuration: a one-node cluster
// on loopback with the default ports, LAN gossip timings and production
// engine limits.
func DefaultConfig() Config {
	name, err := os.Hostname()
	if err != nil || name == "" {
		name = "fcap"
	}
	c := Config{
		Name:         name,
		DataAddr:     "127.0.0.1:7700",
		HTTPAddr:     "127.0.0.1:7780",
		Membership:   gossip.DefaultConfig(ring.Member{Name: name}),
		Engine:       engine.DefaultConfig(),
		MaxFrame:     proto.DefaultMaxFrame,
		MaxConns:     4096,
		IdleTimeout:  5 * time.Minute,
		WriteTimeout: 10 * time.Second,

		HandshakeTimeout:    2 * time.Second,
		MaxClockSkew:        time.Minute,
		StrictTimeout:       time.Second,
		MaxDevicesPerViewer: 32,
		DrainTimeout:        60 * time.Second,
		Linger:              2 * time.Second,

		HTTPAPI:     true,
		APITimeout:  20 * time.Millisecond,
		APIMaxBody:  1 << 20, // httpapi.DefaultMaxBody
		Storage:     storage.DefaultConfig(),
		Replication: replication.DefaultConfig(),
		Quorum:      quorum.DefaultConfig(""),
		Region:      region.DefaultConfig(),
	}
	c.Membership.Memberlist.BindAddr = "127.0.0.1"
	c.Membership.Memberlist.BindPort = 7946
	c.Membership.Memberlist.AdvertisePort = 7946
	return c
}

// DefaultLocalConfig returns a configuration for tests and loopback
// clusters: every port 0 (chosen by the kernel), loopback gossip timings,
// a small engine.
func DefaultLocalConfig(name string) Config {
	c := DefaultConfig()
	c.Name = name
	c.DataAddr = "127.0.0.1:0"
	c.HTTPAddr = "127.0.0.1:0"
	c.Membership = gossip.DefaultLocalConfig(ring.Member{Name: name})
	c.Membership.Memberlist.BindAddr = "127.0.0.1"
	c.Membership.Memberlist.BindPort = 0
	c.Membership.Memberlist.AdvertisePort = 0
	c.Engine = engine.DefaultLocalConfig()
	c.DrainTimeout = 20 * time.Second
	c.Linger = 500 * time.Millisecond
	c.Replication.DropGrace = 5 * time.Second
	return c
}

// Validate checks every field and how they fit together.
func (c *Config) Validate() error {
	var errs []error
	if c.Name == "" {
		errs = append(errs, errors.New("node config: Name is empty"))
	}
	if _, _, err := net.SplitHostPort(c.DataAddr); err != nil {
		errs = append(errs, fmt.Errorf("node config: DataAddr %q: %w", c.DataAddr, err))
	}
	if c.AdvertiseDataAddr != "" {
		if _, _, err := net.SplitHostPort(c.AdvertiseDataAddr); err != nil {
			errs = append(errs, fmt.Errorf("node config: AdvertiseDataAddr %q: %w", c.AdvertiseDataAddr, err))
		}
	}
	if c.HTTPAddr != "" {
		if _, _, err := net.SplitHostPort(c.HTTPAddr); err != nil {
			errs = append(errs, fmt.Errorf("node config: HTTPAddr %q: %w", c.HTTPAddr, err))
		}
	}
	if c.Membership.Memberlist == nil {
		errs = append(errs, errors.New("node config: Membership.Memberlist is nil"))
	}
	if c.MaxFrame < 1024 || c.MaxFrame > 1<<30 {
		errs = append(errs, fmt.Errorf("node config: MaxFrame must be in [1 KiB, 1 GiB], got %d", c.MaxFrame))
	}
	if c.HTTPAPI && (c.APITimeout <= 0 || c.APIMaxBody <= 0) {
		errs = append(errs, fmt.Errorf("node config: APITimeout (%v) and APIMaxBody (%d) must be positive with HTTPAPI", c.APITimeout, c.APIMaxBody))
	}
	if c.MaxConns < 1 {
		errs = append(errs, fmt.Errorf("node config: MaxConns must be positive, got %d", c.MaxConns))
	}
	if c.MaxPendingConns < 0 || c.MaxPendingConns > c.MaxConns {
		errs = append(errs, fmt.Errorf("node config: MaxPendingConns must be in [0, MaxConns %d], got %d", c.MaxConns, c.MaxPendingConns))
	}
	if c.HandshakeTimeout <= 0 {
		errs = append(errs, fmt.Errorf("node config: HandshakeTimeout must be positive, got %v", c.HandshakeTimeout))
	}
	if c.IdleTimeout <= 0 || c.WriteTimeout <= 0 {
		errs = append(errs, fmt.Errorf("node config: IdleTimeout (%v) and WriteTimeout (%v) must be positive", c.IdleTimeout, c.WriteTimeout))
	}
	if c.MaxClockSkew < 0 {
		errs = append(errs, fmt.Errorf("node config: MaxClockSkew must not be negative, got %v", c.MaxClockSkew))
	}
	if c.MaxDevicesPerViewer < 1 {
		errs = append(errs, fmt.Errorf("node config: MaxDevicesPerViewer must be at least 1, got %d", c.MaxDevicesPerViewer))
	}
	if c.StrictTimeout <= 0 || c.DrainTimeout <= 0 || c.Linger < 0 {
		errs = append(errs, errors.New("node config: StrictTimeout and DrainTimeout must be positive, Linger not negative"))
	}
	if c.Replication.DropGrace > 0 && c.StrictTimeout >= c.Replication.DropGrace {
		// A strict write that fails takes its grant back on the copy of
		// every owner since the grant's ring, the old one's included: it
		// must still be there when the wait ends.
		errs = append(errs, fmt.Errorf("node config: StrictTimeout %v must be shorter than Replication.DropGrace %v: a strict write that times out takes its grant back on the copies a ring change left behind, kept for DropGrace", c.StrictTimeout, c.Replication.DropGrace))
	}
	if err := c.Security.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.Quorum.Lease < 0 || c.Quorum.Interval < 0 || (c.Quorum.Lease > 0 && c.Quorum.Interval >= c.Quorum.Lease) {
		errs = append(errs, fmt.Errorf("node config: Quorum.Interval %v must be shorter than Quorum.Lease %v (both positive), or a lease lapses between two confirmations", c.Quorum.Interval, c.Quorum.Lease))
	}
	if err := c.Replication.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Storage.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Engine.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Region.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func wallClockMillis() int64 { return time.Now().UnixMilli() }

package main

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/fcap-io/fcap/node"
	"github.com/fcap-io/fcap/node/gossip"
	"github.com/fcap-io/fcap/ring"
)

var errHelp = errors.New("help requested")

// errVersion: --version was given; the build is printed instead of a node
// started.
var errVersion = errors.New("version requested")

// options are fcapd's flags after parsing.
type options struct {
	name, data, advertiseData, gossip, advertiseGossip, http string
	join                                                     []string
	replicas, partitions                                     int
	memoryLimit, goMemLimit, transferRate                    int64
	gossipProfile                                            string
	scopes                                                   string
	maxIDLength, antiEntropyViewers                          int
	logLevel, logFormat                                      string
	shutdownTimeout                                          time.Duration
	pprof                                                    bool
	bootstrap                                                bool
	httpAPI                                                  bool
	apiTimeout                                               time.Duration
	maxClockSkew                                             time.Duration
	antiEntropy                                              time.Duration
	syncTimeout                                              time.Duration

	// Limits on what one client connection may hold (see node.Config).
	maxConns, maxFrame                  int
	maxPendingConns                     int
	handshakeTimeout                    time.Duration
	maxDevices                          int
	idleTimeout, writeTimeout           time.Duration
	gossipKey, gossipKeyFile            string
	tlsCert, tlsKey, tlsClientCA, tlsCA string
	tls                                 *tlsFiles // set by loadTLS when the data plane is TLS; reloaded on SIGHUP
	tokensFile                          string
	durable                             durableOptions
	region                              regionOptions
}

// parseFlags reads flags, each defaulting to its FCAP_* environment
// variable and then to the built-in default.
func parseFlags(args []string, getenv func(string) string, stderr io.Writer) (*options, error) {
	def := node.DefaultConfig()
	o := &options{}
	fs := flag.NewFlagSet("fcapd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	f := &envFlags{fs: fs, getenv: getenv}
	f.str(&o.name, "name", "FCAP_NAME", def.Name, "stable node name; it places the node on the ring")
	f.str(&o.data, "data", "FCAP_DATA_ADDR", def.DataAddr, "data-plane listen address")
	f.str(&o.advertiseData, "advertise-data", "FCAP_ADVERTISE_DATA_ADDR", "", "data-plane address told to clients and peers (default: the bound address)")
	f.str(&o.gossip, "gossip", "FCAP_GOSSIP_ADDR", "127.0.0.1:7946", "gossip listen address (TCP and UDP)")
	f.str(&o.advertiseGossip, "advertise-gossip", "FCAP_ADVERTISE_GOSSIP_ADDR", "", "gossip address told to peers (default: the bound address)")
	f.str(&o.http, "http", "FCAP_HTTP_ADDR", def.HTTPAddr, `metrics and health listen address ("" disables)`)
	var join, memLimit, transferRate string
	f.str(&join, "join", "FCAP_JOIN", "", "comma-separated gossip addresses of nodes to join (joining a cluster is this one flag); a node given seeds waits for them and never forms a cluster alone, unless --bootstrap")
	fs.BoolVar(&o.bootstrap, "bootstrap", getenv("FCAP_BOOTSTRAP") == "true", "with --join: form a new cluster alone if no seed answers within the sync timeout (give it to one node of a new cluster, never to all) (env FCAP_BOOTSTRAP=true)")
	rdef := ring.DefaultConfig()
	f.int(&o.replicas, "replicas", "FCAP_REPLICAS", rdef.Replicas, "owners per partition (primary + backups)")
	f.int(&o.partitions, "partitions", "FCAP_PARTITIONS", rdef.Partitions, "partitions of the keyspace, a prime; every node must agree")
	f.str(&memLimit, "memory-limit", "FCAP_MEMORY_LIMIT", "", "bytes of counter state past which new counters are refused, e.g. 4GiB (default: half the memory of the machine or cgroup)")
	f.str(&transferRate, "transfer-rate", "FCAP_TRANSFER_RATE", "64MiB", "bytes per second a node sends when it moves whole partitions (joins, re-replication); 0 for no limit")
	f.duration(&o.antiEntropy, "anti-entropy", "FCAP_ANTI_ENTROPY", def.Replication.AntiEntropyInterval, "how often a partition's primary compares its copy with each backup's and merges the viewers that differ both ways; 0 turns it off")
	f.int(&o.antiEntropyViewers, "anti-entropy-viewers", "FCAP_ANTI_ENTROPY_VIEWERS", def.Replication.AntiEntropyViewers, "viewers one anti-entropy round digests at most (here and on each backup): partitions are compared in turn, a sweep of every partition taking (viewers this node is primary of) / this rounds; 0 compares every partition every round")
	f.duration(&o.syncTimeout, "sync-timeout", "FCAP_SYNC_TIMEOUT", def.Replication.SyncTimeout, "how long a node waits for a partition's hand-over before it serves the partition with what it holds (the sender's last writes may be missing), and how long a node given --join waits for its seeds before it declines to form a cluster alone (or, with --bootstrap, forms one); shorter than the default is for tests")
	f.str(&o.gossipProfile, "gossip-profile", "FCAP_GOSSIP_PROFILE", "lan", "gossip timings: lan, wan or local (loopback tests)")
	f.str(&o.scopes, "scopes", "FCAP_SCOPES", strings.Join(def.Engine.Scopes, ","), `comma-separated cap scopes accepted, or "*" for any`)
	f.int(&o.maxIDLength, "max-id-length", "FCAP_MAX_ID_LENGTH", def.Engine.MaxIDLength, "longest viewer id, cap scope and id, and impression id accepted, in bytes (tell clients and fcapingest the same: their Limits, --max-id-length)")
	f.str(&o.gossipKey, "gossip-key", "FCAP_GOSSIP_KEY", "", "base64 16, 24 or 32-byte AES key that encrypts and authenticates gossip; every node needs it (prefer --gossip-key-file: flags show in ps)")
	f.str(&o.gossipKeyFile, "gossip-key-file", "FCAP_GOSSIP_KEY_FILE", "", "file holding the base64 gossip key (see --gossip-key)")
	f.str(&o.tlsCert, "tls-cert", "FCAP_TLS_CERT", "", "PEM certificate (chain) of the data plane: with --tls-key, serve it over TLS only, and present it to peers as client certificate")
	f.str(&o.tlsKey, "tls-key", "FCAP_TLS_KEY", "", "PEM private key of --tls-cert")
	f.str(&o.tlsClientCA, "tls-client-ca", "FCAP_TLS_CLIENT_CA", "", "PEM CA certificates: when set, every data-plane client (ad servers, fcapctl, peers) must present a certificate they signed")
	f.str(&o.tlsCA, "tls-ca", "FCAP_TLS_CA", "", "PEM CA certificates that verify peers' data-plane certificates (default: the system's roots)")
	f.str(&o.tokensFile, "tokens-file", "FCAP_TOKENS_FILE", "", `file of "role token" lines (roles adserver, operator, peer): every data-plane connection must then present a token; the last peer token is the one this node presents to the others`)
	f.str(&o.logLevel, "log-level", "FCAP_LOG_LEVEL", "info", "debug, info, warn or error")
	f.str(&o.logFormat, "log-format", "FCAP_LOG_FORMAT", "text", "text or json")
	fs.BoolVar(&o.pprof, "pprof", getenv("FCAP_PPROF") == "true", "serve Go profiles under /debug/pprof/ on the HTTP address (env FCAP_PPROF=true)")
	fs.BoolVar(&o.httpAPI, "http-api", getenv("FCAP_HTTP_API") != "false", "serve the JSON API under /v1/ on the HTTP address (env FCAP_HTTP_API=false turns it off)")
	f.duration(&o.apiTimeout, "api-timeout", "FCAP_API_TIMEOUT", def.APITimeout, "deadline of a JSON API call to the cluster, unless the request sets its own with the X-Fcap-Timeout-Ms header")
	f.duration(&o.maxClockSkew, "max-clock-skew", "FCAP_MAX_CLOCK_SKEW", def.MaxClockSkew, "how far ahead of this node's clock a caller's time (a check's now, an impression's time) may be; beyond it the request is refused, and a peer's or the log's time beyond it is clamped (see SECURITY.md)")
	f.duration(&o.shutdownTimeout, "shutdown-timeout", "FCAP_SHUTDOWN_TIMEOUT", 30*time.Second, "how long a graceful stop may take")
	f.int(&o.maxConns, "max-conns", "FCAP_MAX_CONNS", def.MaxConns, "data-plane connections served at once; past it new ones are told overloaded and closed")
	f.int(&o.maxPendingConns, "max-pending-conns", "FCAP_MAX_PENDING_CONNS", def.MaxPendingConns, "data-plane connections that have not authenticated (said Hello, or without tokens sent a first request) held at once; past it the oldest is closed to make room (0: a quarter of --max-conns)")
	f.duration(&o.handshakeTimeout, "handshake-timeout", "FCAP_HANDSHAKE_TIMEOUT", def.HandshakeTimeout, "close a data-plane connection that has not authenticated within this long (with tokens: from connect to Hello; without: from its first byte to its first request's header)")
	f.int(&o.maxDevices, "max-devices", "FCAP_MAX_DEVICES", def.MaxDevicesPerViewer, "devices that may be linked to one viewer (identity); a link past it is refused")
	var maxFrame string
	f.str(&maxFrame, "max-frame", "FCAP_MAX_FRAME", strconv.Itoa(def.MaxFrame), "largest request frame accepted, e.g. 1MiB; a longer length prefix closes the connection")
	f.duration(&o.idleTimeout, "idle-timeout", "FCAP_IDLE_TIMEOUT", def.IdleTimeout, "close a data-plane connection that sends no complete request for this long (bounds slowloris clients)")
	f.duration(&o.writeTimeout, "write-timeout", "FCAP_WRITE_TIMEOUT", def.WriteTimeout, "close a data-plane connection that does not read its responses for this long (bounds slow readers)")
	o.durable.define(f, def)
	o.region.define(f)
	version := fs.Bool("version", false, "print the build (version, revision, Go release) and exit")
	if f.err != nil {
		return nil, f.err
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, errHelp
		}
		return nil, err
	}
	if *version {
		return nil, errVersion
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	for _, s := range strings.Split(join, ",") {
		if s = strings.TrimSpace(s); s != "" {
			o.join = append(o.join, s)
		}
	}
	var err error
	mem := physicalMemory()
	o.goMemLimit = mem * 9 / 10
	if memLimit == "" {
		o.memoryLimit = mem / 2
	} else if o.memoryLimit, err = parseBytes(memLimit); err != nil {
		return nil, fmt.Errorf("--memory-limit: %w", err)
	}
	if o.transferRate, err = parseBytes(transferRate); err != nil {
		return nil, fmt.Errorf("--transfer-rate: %w", err)
	}
	mf, err := parseBytes(maxFrame)
	if err != nil || mf > 1<<30 {
		return nil, fmt.Errorf("--max-frame: not a byte size up to 1GiB: %q", maxFrame)
	}
	o.maxFrame = int(mf)
	return o, nil
}

// config turns the options into a node configuration.
func (o *options) config(logger *slog.Logger) (node.Config, error) {
	cfg := node.DefaultConfig()
	cfg.Name = o.name
	cfg.DataAddr = o.data
	cfg.AdvertiseDataAddr = o.advertiseData
	cfg.HTTPAddr = o.http
	cfg.Logger = logger
	cfg.Pprof = o.pprof
	cfg.HTTPAPI = o.httpAPI
	cfg.API = startAPI
	cfg.APITimeout = o.apiTimeout
	cfg.MaxClockSkew = o.maxClockSkew
	cfg.Engine.MemoryLimit = o.memoryLimit
	cfg.Engine.MaxIDLength = o.maxIDLength
	cfg.Replication.TransferRate = o.transferRate
	cfg.Replication.AntiEntropyInterval = o.antiEntropy
	cfg.Replication.AntiEntropyViewers = o.antiEntropyViewers
	cfg.Replication.SyncTimeout = o.syncTimeout
	cfg.MaxConns, cfg.MaxFrame = o.maxConns, o.maxFrame
	cfg.MaxPendingConns, cfg.HandshakeTimeout = o.maxPendingConns, o.handshakeTimeout
	cfg.MaxDevicesPerViewer = o.maxDevices
	cfg.IdleTimeout, cfg.WriteTimeout = o.idleTimeout, o.writeTimeout
	if err := o.durable.apply(&cfg); err != nil {
		return cfg, err
	}
	if err := o.region.apply(&cfg); err != nil {
		return cfg, err
	}
	if o.scopes == "*" {
		cfg.Engine.AnyScope = true
	} else {
		cfg.Engine.Scopes = nil
		for _, s := range strings.Split(o.scopes, ",") {
			if s = strings.TrimSpace(s); s != "" {
				cfg.Engine.Scopes = append(cfg.Engine.Scopes, s)
			}
		}
	}
	self := ring.Member{Name: o.name}
	switch o.gossipProfile {
	case "lan":
		cfg.Membership = gossip.DefaultConfig(self)
	case "local":
		cfg.Membership = gossip.DefaultLocalConfig(self)
	case "wan":
		cfg.Membership = gossip.DefaultConfig(self)
		cfg.Membership.Memberlist = wanConfig()
	default:
		return cfg, fmt.Errorf("--gossip-profile must be lan, wan or local, got %q", o.gossipProfile)
	}
	ml := cfg.Membership.Memberlist
	host, port, err := splitHostPort(o.gossip)
	if err != nil {
		return cfg, fmt.Errorf("--gossip: %w", err)
	}
	ml.BindAddr, ml.BindPort = host, port
	ml.AdvertiseAddr, ml.AdvertisePort = "", port
	if o.advertiseGossip != "" {
		if ml.AdvertiseAddr, ml.AdvertisePort, err = splitHostPort(o.advertiseGossip); err != nil {
			return cfg, fmt.Errorf("--advertise-gossip: %w", err)
		}
	}
	if key, err := o.readGossipKey(); err != nil {
		return cfg, err
	} else if key != nil {
		if err := gossip.Encrypt(ml, key); err != nil {
			return cfg, err
		}
	}
	if cfg.Security.TLS, cfg.Security.PeerTLS, err = o.loadTLS(); err != nil {
		return cfg, err
	}
	if o.tokensFile != "" {
		if cfg.Security.Tokens, cfg.Security.PeerToken, err = readTokens(o.tokensFile); err != nil {
			return cfg, err
		}
	}
	cfg.Membership.Seeds = o.join
	cfg.Bootstrap = o.bootstrap
	cfg.Membership.Ring.Replicas = o.replicas
	cfg.Membership.Ring.Partitions = o.partitions
	if err := cfg.Membership.Ring.Validate(); err != nil {
		return cfg, err
	}
	return cfg, cfg.Validate()
}

// readGossipKey returns the key of --gossip-key or --gossip-key-file,
// nil when neither is set.
func (o *options) readGossipKey() ([]byte, error) {
	text := o.gossipKey
	switch {
	case o.gossipKey != "" && o.gossipKeyFile != "":
		return nil, errors.New("--gossip-key and --gossip-key-file are exclusive")
	case o.gossipKeyFile != "":
		b, err := os.ReadFile(o.gossipKeyFile)
		if err != nil {
			return nil, fmt.Errorf("--gossip-key-file: %w", err)
		}
		text = string(b)
	case text == "":
		return nil, nil
	}
	key, err := gossip.ParseKey(text)
	if err != nil {
		return nil, fmt.Errorf("--gossip-key: %w", err)
	}
	return key, nil
}

// loadTLS builds the data plane's server config and the config that
// dials peers from the --tls-* flags; both nil when no flag is set. Both
// read the files' material at each handshake, so reloadTLS (SIGHUP)
// renews them in place.
func (o *options) loadTLS() (server, peer *tls.Config, err error) {
	if o.tlsCert == "" && o.tlsKey == "" {
		if o.tlsClientCA != "" || o.tlsCA != "" {
			return nil, nil, errors.New("--tls-client-ca and --tls-ca need --tls-cert and --tls-key")
		}
		return nil, nil, nil
	}
	if o.tlsCert == "" || o.tlsKey == "" {
		return nil, nil, errors.New("--tls-cert and --tls-key go together")
	}
	o.tls = &tlsFiles{cert: o.tlsCert, key: o.tlsKey, clientCA: o.tlsClientCA, ca: o.tlsCA}
	if err := o.tls.load(); err != nil {
		return nil, nil, err
	}
	return o.tls.server(), o.tls.peer(), nil
}

func splitHostPort(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("bad port in %q", addr)
	}
	return host, port, nil
}

// parseBytes reads "123", "64MiB", "4GiB", "1.5GB" and the like.
func parseBytes(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   float64
	}{
		{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
		{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1},
	}
	s = strings.TrimSpace(s)
	mult := 1.0
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSpace(strings.TrimSuffix(s, u.suffix)), u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("not a byte size: %q", s)
	}
	return int64(v * mult), nil
}

// physicalMemory is the memory this process may use: the cgroup limit
// when there is one, else the machine's; 4 GiB when neither can be read.
func physicalMemory() int64 {
	mem := int64(4 << 30)
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			var kb int64
			if _, err := fmt.Sscanf(line, "MemTotal: %d kB", &kb); err == nil && kb > 0 {
				mem = kb << 10
				break
			}
		}
	}
	for _, path := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		if b, err := os.ReadFile(path); err == nil {
			if v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && v > 0 && v < mem {
				mem = v
			}
		}
	}
	return mem
}

package gossip

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/fcap-io/fcap/ring"
	"github.com/hashicorp/memberlist"
)

// Config configures a Membership. Start from
// DefaultConfig or DefaultLocalConfig.
type Config struct {
	// Memberlist is memberlist's own config, nested, not copied: bind and
	// advertise addresses, timings, keyring. Its Name must equal
	// Self.Name. It must not set Delegate or Events: Membership sets
	// them, and its Logger (clearing LogOutput), on a copy it gives to
	// memberlist, so the caller's Config is left as it was. Default
	// LANMemberlistConfig() (gossip on 0.0.0.0:7946).
	Memberlist *memberlist.Config

	// Self is our own metadata, gossiped to the cluster: State is usually
	// Joining (a node that must pull its partitions' state first) or
	// Active. Addr must not be empty.
	Self ring.Member

	// Seeds are the gossip addresses ("host:port", or "host" for
	// Memberlist.BindPort) of other nodes to join. They may include our
	// own address, which is ignored. A node with no seeds starts a
	// cluster of its own and waits for others to join it. Default none.
	Seeds []string

	// Ring configures the rings Membership builds; every node must use
	// the same. Default DefaultConfig().
	Ring ring.Config

	// JoinBackoffMin is the first retry delay while no seed answers.
	// Each failed round doubles it, up to JoinBackoffMax, and each delay
	// is jittered (half fixed, half random) so nodes started together do
	// not retry in lockstep. Default 100ms.
	JoinBackoffMin time.Duration

	// JoinBackoffMax caps the retry delay. Default 5s.
	JoinBackoffMax time.Duration

	// ReconcileInterval is how often (jittered by ±25%) a node that has
	// joined re-joins the seeds that are not members, which merges
	// clusters that formed apart. Default 10s.
	ReconcileInterval time.Duration

	// ReconnectInterval is how often (jittered by ±25%) a node tries to
	// reach a few of its failed members again at their last gossip
	// address (reconnect.go): memberlist itself never probes a member it
	// declared dead, so without this two sides of a healed cut that
	// declared each other dead could wait for ReconcileInterval, or
	// longer when neither lists the other as a seed. Each try dials for
	// at most this long first. Default 500ms.
	ReconnectInterval time.Duration

	// UpdateTimeout bounds how long SetState waits for memberlist to
	// send the new state to some other node. Default 5s; 0 means the
	// default.
	UpdateTimeout time.Duration

	// Coalesce is how long a ring change that drops a failed member
	// (not a drained one, which leaves at once) or adds a member waits
	// for others, so that one cut (or its heal) that takes several
	// members away (or brings them back) makes one ring, not several in
	// a row. Each ring between moves partitions to owners that never
	// receive them whole, and a partition that passes through one and
	// back finds no current copy (the partition suite's 3/2 split: its
	// two minority nodes were declared dead 20 ms to 1 s apart, and came
	// back 50-140 ms apart). It adds to failover and to a join; default
	// 150ms; 0 turns it off.
	Coalesce time.Duration

	// OnChange, if not nil, is called after each new ring is swapped in,
	// with the ring it replaced, from Membership's own goroutine (never
	// from a memberlist callback). Rings change only when their epoch
	// does. Calls never overlap; while one runs, further changes
	// coalesce into the next call. It must not call Shutdown (which
	// waits for it). Default nil.
	OnChange func(old, new *ring.Ring)

	// OnForget, if not nil, is called after a failed member was
	// forgotten: through this node (Forget, on the caller's goroutine) or
	// through another, as gossip brought the news (on memberlist's
	// goroutine: it must not block).
	OnForget func(name string)

	// OnRetireRegion, if not nil, is called when gossip brings the news
	// that an operator retired a peer region (retired.go) this node has
	// not retired yet, on memberlist's goroutine: it applies the retire
	// and returns its time (the node's clock, ms), or false to ignore
	// the name (not a peer region here). Default nil: such news is
	// ignored.
	OnRetireRegion func(name string) (at int64, ok bool)

	// Logger receives Membership's logs and memberlist's (at the level
	// memberlist gives them). Default slog.Default().
	Logger *slog.Logger
}

// defaultCoalesce is the default Config.Coalesce.
const defaultCoalesce = 150 * time.Millisecond

// defaultUpdateTimeout is the default Config.UpdateTimeout.
const defaultUpdateTimeout = 5 * time.Second

// DefaultConfig returns the production defaults for the node
// self, on LANMemberlistConfig() with Name set to self.Name.
func DefaultConfig(self ring.Member) Config {
	ml := LANMemberlistConfig()
	ml.Name = self.Name
	return Config{
		Memberlist:        ml,
		Self:              self,
		Ring:              ring.DefaultConfig(),
		JoinBackoffMin:    100 * time.Millisecond,
		JoinBackoffMax:    5 * time.Second,
		ReconcileInterval: 10 * time.Second,
		ReconnectInterval: 500 * time.Millisecond,
		UpdateTimeout:     defaultUpdateTimeout,
		Coalesce:          defaultCoalesce,
		Logger:            slog.Default(),
	}
}

// LANMemberlistConfig is memberlist.DefaultLANConfig() with failure
// detection tuned for an fcap cluster: a few to a few dozen nodes on one
// LAN (round trips well under a millisecond), where a dead node's viewers
// fail over only once gossip declares it dead, and the design asks for
// that within 2 s. memberlist's LAN defaults take 5-8 s for it: a probe
// every 1 s that waits the whole interval for an ack, then a suspicion
// of 4 probe intervals (for clusters under 10 nodes; log10(n) times
// more above).
//
// Here a node probes one member every 200 ms (each probe waits that
// long for a direct, indirect or TCP ack; the direct ack gets 100 ms
// before indirect probes go out), and a suspected member has 2 probe
// intervals (400 ms, scaled by log10(n) past 10 nodes) to refute before
// it is declared dead; gossip goes out every 100 ms so the suspicion
// reaches it, and its refutation comes back, within that. A dead
// member of a 3-node cluster is out of every ring about 0.6-1.2 s after
// it died.
//
// The cost is false positives: a live node that answers nothing for
// about 600 ms (a stop-the-world stall, a host starved of CPU, a network
// hiccup longer than that) is declared dead. It refutes and comes back
// by itself, but its partitions move away and back (whole transfers,
// strict caps of those partitions fail closed meanwhile). memberlist's
// Lifeguard awareness (AwarenessMaxMultiplier, 8) stretches the probes
// of a node that itself misses acks, so an overloaded prober accuses
// slower. With SuspicionMult 2 memberlist expects no independent
// confirmations (k = SuspicionMult - 2 = 0): the suspicion timeout is
// its minimum at every cluster size. Where pauses of that length are
// normal, start from memberlist.DefaultLANConfig() instead (fcapd
// --gossip-profile wan is slower still).
func LANMemberlistConfig() *memberlist.Config {
	ml := memberlist.DefaultLANConfig()
	ml.ProbeInterval = 200 * time.Millisecond
	ml.ProbeTimeout = 100 * time.Millisecond
	ml.SuspicionMult = 2
	ml.GossipInterval = 100 * time.Millisecond
	ml.EnableCompression = false // see uncompressed
	return ml
}

// uncompressed: memberlist compresses every packet it sends by default,
// with a fresh LZW writer each time (about 10 KB of garbage a packet).
// Gossip packets are small and a LAN's bandwidth is not scarce; the
// garbage was half of what an idle node of a 3-node cluster allocated
// (1.8 MB/s), and the GC cycles it paid for run on the core that
// answers checks: with one core, the GC's mark worker holds it for up to
// a few milliseconds at a time (Go execution traces, docs/bench/BENCHMARKS.md,
// issue 21). Nodes still read compressed packets, so a cluster can mix
// nodes with and without it.

// DefaultLocalConfig returns defaults for tests and local runs:
// memberlist.DefaultLocalConfig() bound to 127.0.0.1 on a port the kernel
// picks (see Membership.GossipAddr), with faster probes, gossip and
// push-pull, more retransmissions (so news reaches every node of a small
// cluster by gossip, not only by the next push-pull), and short join and
// reconcile delays.
func DefaultLocalConfig(self ring.Member) Config {
	ml := memberlist.DefaultLocalConfig()
	ml.Name = self.Name
	ml.BindAddr = "127.0.0.1"
	ml.BindPort = 0
	ml.AdvertisePort = 0
	ml.ProbeInterval = 400 * time.Millisecond
	ml.GossipInterval = 50 * time.Millisecond
	ml.RetransmitMult = 4
	ml.PushPullInterval = time.Second
	ml.GossipToTheDeadTime = 2 * time.Second
	ml.EnableCompression = false // see uncompressed
	c := DefaultConfig(self)
	c.Memberlist = ml
	c.JoinBackoffMin = 20 * time.Millisecond
	c.JoinBackoffMax = 500 * time.Millisecond
	c.ReconcileInterval = time.Second
	c.UpdateTimeout = time.Second
	return c
}

// Validate checks every field and how they fit together.
func (c *Config) Validate() error {
	var errs []error
	if c.Memberlist == nil {
		errs = append(errs, fmt.Errorf("%w: Memberlist is nil", ring.ErrConfig))
	} else {
		if c.Memberlist.Name != c.Self.Name {
			errs = append(errs, fmt.Errorf("%w: Memberlist.Name %q differs from Self.Name %q", ring.ErrConfig, c.Memberlist.Name, c.Self.Name))
		}
		if c.Memberlist.Delegate != nil || c.Memberlist.Events != nil {
			errs = append(errs, fmt.Errorf("%w: Memberlist.Delegate and Memberlist.Events must be nil: Membership sets them", ring.ErrConfig))
		}
	}
	if err := c.Self.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("%w: Self: %w", ring.ErrConfig, err))
	}
	if _, err := c.Self.MarshalMeta(); err != nil {
		errs = append(errs, fmt.Errorf("%w: Self: %w", ring.ErrConfig, err))
	}
	for i, s := range c.Seeds {
		if s == "" {
			errs = append(errs, fmt.Errorf("%w: Seeds[%d] is empty", ring.ErrConfig, i))
		}
	}
	if err := c.Ring.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.JoinBackoffMin <= 0 || c.JoinBackoffMax < c.JoinBackoffMin {
		errs = append(errs, fmt.Errorf("%w: JoinBackoffMin (%v) must be positive and at most JoinBackoffMax (%v)", ring.ErrConfig, c.JoinBackoffMin, c.JoinBackoffMax))
	}
	if c.ReconcileInterval <= 0 {
		errs = append(errs, fmt.Errorf("%w: ReconcileInterval must be positive, got %v", ring.ErrConfig, c.ReconcileInterval))
	}
	if c.ReconnectInterval <= 0 || c.ReconnectInterval > time.Minute {
		errs = append(errs, fmt.Errorf("%w: ReconnectInterval must be within (0, 1m], got %v", ring.ErrConfig, c.ReconnectInterval))
	}
	if c.Coalesce < 0 || c.Coalesce > 5*time.Second {
		errs = append(errs, fmt.Errorf("%w: Coalesce must be within [0, 5s], got %v", ring.ErrConfig, c.Coalesce))
	}
	if c.UpdateTimeout < 0 {
		errs = append(errs, fmt.Errorf("%w: UpdateTimeout must not be negative, got %v", ring.ErrConfig, c.UpdateTimeout))
	}
	return errors.Join(errs...)
}

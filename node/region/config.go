package region

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/fcap-io/fcap/proto"
)

// MaxNameLen is the longest region name.
const MaxNameLen = 32

// Config configures the links of a node to the fcap clusters of other
// regions. The zero Config (no Name, no Peers) is a single region: no
// link, no queue, nothing on the request path.
type Config struct {
	// Name is this node's region, 1-32 of [a-z0-9-]; every node of a
	// cluster names the same. Empty: a single region (then Peers must be
	// empty too). Default empty.
	Name string

	// Peers are the other regions this node ships its soft changes to,
	// each by name and the data-plane addresses of some of its nodes.
	// Default none.
	Peers []Peer

	// BatchInterval is how long a shipper gathers changed viewers before
	// it sends them (sooner when BatchViewers are waiting). Default 25ms.
	BatchInterval time.Duration

	// BatchViewers is the most viewers one shipping round takes from the
	// queue. Default 1024.
	BatchViewers int

	// QueueViewers bounds the changed viewers waiting per peer region.
	// Past it a change is not queued but counted
	// (fcap_region_overflow_total) and a digest catch-up compares the
	// viewers of the partitions this node is primary of with the peer
	// region and queues those that differ. Default 1<<20.
	QueueViewers int

	// CatchUpRate is how many viewers per second a digest catch-up
	// digests (and a catch-up that cannot compare queues) at most.
	// Default 20000.
	CatchUpRate int

	// Timeout bounds one call to a peer region's node (a RegionMerge, a
	// topology request). Default 5s.
	Timeout time.Duration

	// RetryMin and RetryMax bound the backoff after a failed shipping
	// round (doubling, with jitter). Default 100ms and 5s.
	RetryMin, RetryMax time.Duration

	// TopologyInterval is how often a link asks the peer region for its
	// ring even when nothing says it changed. Default 10s.
	TopologyInterval time.Duration

	// DigestInterval is how often, on average (jittered between half
	// and one and a half times it), a link compares every partition
	// this node is primary of with the peer region by digest and ships
	// the viewers that differ (digest.go). 0 turns the periodic
	// comparison off; catch-ups after an overflow, a restart or an
	// outage still compare. Default 5m.
	DigestInterval time.Duration
}

// Peer is another region: its name and seed addresses (data plane).
type Peer struct {
	// Name is the region's name (Config.Name of its nodes).
	Name string
	// Seeds are data-plane addresses (host:port) of some of its nodes:
	// the link learns the region's ring from the first that answers.
	Seeds []string
}

// String writes the peer as ParsePeer reads it.
func (p Peer) String() string { return p.Name + "=" + strings.Join(p.Seeds, ",") }

// DefaultConfig returns a single region with the production defaults
// of the link settings.
func DefaultConfig() Config {
	return Config{
		BatchInterval:    25 * time.Millisecond,
		BatchViewers:     1024,
		QueueViewers:     1 << 20,
		CatchUpRate:      20000,
		Timeout:          5 * time.Second,
		RetryMin:         100 * time.Millisecond,
		RetryMax:         5 * time.Second,
		TopologyInterval: 10 * time.Second,
		DigestInterval:   5 * time.Minute,
	}
}

// Enabled reports whether this node ships to any peer region.
func (c *Config) Enabled() bool { return len(c.Peers) > 0 }

// ValidName checks a region name: 1-32 of [a-z0-9-].
func ValidName(name string) error {
	if len(name) == 0 || len(name) > MaxNameLen {
		return fmt.Errorf("%w: %q", ErrName, name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return fmt.Errorf("%w: %q", ErrName, name)
		}
	}
	return nil
}

// ParsePeer reads "NAME=host:port[,host:port...]".
func ParsePeer(s string) (Peer, error) {
	name, seeds, ok := strings.Cut(strings.TrimSpace(s), "=")
	if !ok {
		return Peer{}, fmt.Errorf("%w: %q has no '='", ErrPeerSpec, s)
	}
	p := Peer{Name: strings.TrimSpace(name)}
	if err := ValidName(p.Name); err != nil {
		return Peer{}, err
	}
	for _, a := range strings.Split(seeds, ",") {
		if a = strings.TrimSpace(a); a != "" {
			p.Seeds = append(p.Seeds, a)
		}
	}
	if err := p.validateSeeds(); err != nil {
		return Peer{}, err
	}
	return p, nil
}

func (p Peer) validateSeeds() error {
	if len(p.Seeds) == 0 {
		return fmt.Errorf("%w: region %q has no seed address", ErrPeerSpec, p.Name)
	}
	for _, a := range p.Seeds {
		host, port, err := net.SplitHostPort(a)
		if err != nil || host == "" || port == "" {
			return fmt.Errorf("%w: region %q: seed %q is not host:port", ErrPeerSpec, p.Name, a)
		}
	}
	return nil
}

// Validate checks every field and how they fit together.
func (c *Config) Validate() error {
	var errs []error
	if c.Name != "" {
		if err := ValidName(c.Name); err != nil {
			errs = append(errs, err)
		}
	}
	if len(c.Peers) > 0 && c.Name == "" {
		errs = append(errs, ErrNoRegion)
	}
	if len(c.Peers) > proto.MaxPeerRegions {
		errs = append(errs, fmt.Errorf("region config: %d peer regions, at most %d", len(c.Peers), proto.MaxPeerRegions))
	}
	seen := map[string]bool{}
	for _, p := range c.Peers {
		if err := ValidName(p.Name); err != nil {
			errs = append(errs, err)
			continue
		}
		switch {
		case p.Name == c.Name:
			errs = append(errs, fmt.Errorf("%w: %q", ErrOwnName, p.Name))
		case seen[p.Name]:
			errs = append(errs, fmt.Errorf("%w: %q", ErrDuplicate, p.Name))
		}
		seen[p.Name] = true
		if err := p.validateSeeds(); err != nil {
			errs = append(errs, err)
		}
	}
	if c.DigestInterval < 0 {
		errs = append(errs, fmt.Errorf("region config: DigestInterval (%v) must not be negative (0: no periodic comparison)", c.DigestInterval))
	}
	if c.Enabled() {
		if c.BatchInterval <= 0 || c.Timeout <= 0 || c.RetryMin <= 0 || c.RetryMax < c.RetryMin || c.TopologyInterval <= 0 {
			errs = append(errs, fmt.Errorf("region config: BatchInterval (%v), Timeout (%v), RetryMin (%v) and TopologyInterval (%v) must be positive, RetryMax (%v) at least RetryMin", c.BatchInterval, c.Timeout, c.RetryMin, c.TopologyInterval, c.RetryMax))
		}
		if c.BatchViewers < 1 || c.QueueViewers < c.BatchViewers || c.CatchUpRate < 1 {
			errs = append(errs, fmt.Errorf("region config: BatchViewers (%d) and CatchUpRate (%d) must be positive, QueueViewers (%d) at least BatchViewers", c.BatchViewers, c.CatchUpRate, c.QueueViewers))
		}
	}
	return errors.Join(errs...)
}

package engine

import (
	"errors"
	"fmt"
	"time"

	"github.com/fcap-io/fcap"
)

// DefaultScopes are the scopes a cap may name unless Config.Scopes says
// otherwise (fcap.DefaultScopes).
var DefaultScopes = fcap.DefaultScopes

// Config configures an Engine. Start from DefaultConfig.
type Config struct {
	// Stripes is the number of independently locked shards the viewers
	// are spread over by hash. A power of two. Default 1024.
	Stripes int

	// Partitions is the partition count of the ring the engine's owner
	// routes by, a key's partition being key % Partitions (as
	// ring.PartitionOf). When set, the stripes are laid out by
	// partition, so PartitionKeys and PartitionSizes visit only the
	// stripes of the partitions asked for instead of every viewer. 0
	// (the default): stripes by the key's low bits, and those walks
	// visit every viewer.
	Partitions int

	// Buckets is the number of sub-buckets of a Buckets cap. Default 10:
	// a 1-hour window then counts in 6-minute buckets.
	Buckets int

	// MaxIDLength bounds viewer ids, cap scopes and ids, and impression
	// ids, in bytes. Default 256.
	MaxIDLength int

	// Scopes lists the scope names a cap may use. Default DefaultScopes.
	Scopes []string

	// AnyScope accepts every non-empty scope name, ignoring Scopes.
	// Default false.
	AnyScope bool

	// MaxCapsPerCandidate bounds the caps of one candidate (and of one
	// Allow, Reserve or impression). Default 16.
	MaxCapsPerCandidate int

	// MaxCandidates bounds the candidates of one Check. Default 1000.
	MaxCandidates int

	// MaxKeysPerViewer bounds the counters one viewer may hold. Default
	// 4096.
	MaxKeysPerViewer int

	// MaxReservationsPerViewer bounds one viewer's live reservations.
	// Default 64.
	MaxReservationsPerViewer int

	// MaxDedupePerViewer bounds the impression ids one viewer remembers
	// for idempotency. Past it the ids closest to expiry are forgotten
	// first, so a viewer with more impressions than this inside its
	// longest window (a bot, far past any cap) may double count a
	// redelivered impression. Default 4096.
	MaxDedupePerViewer int

	// MemoryLimit is the estimated bytes of state past which new viewers
	// and counters are refused with ErrMemoryLimit. 0 means no limit.
	// Default 1 GiB.
	MemoryLimit int64

	// SweepInterval is how often Run takes a sweep step. Default 50ms.
	SweepInterval time.Duration

	// SweepPass is the target time for the sweeper to visit every viewer
	// once; each step's budget is sized from it. Default 30s.
	SweepPass time.Duration

	// SweepBatch is the most viewer slots one step visits under one
	// stripe lock, so a step never stalls requests for long. Default 256.
	SweepBatch int

	// Clock, when not nil, is the engine's own time, in the ticks of the
	// times it is given (Unix milliseconds for a node). It makes the
	// engine the authority on what "now" is: a time more than MaxFuture
	// ahead of Clock is refused with ErrFutureTime, and the high-water
	// mark (the engine's "now", by which it ages and sweeps) never passes
	// Clock, whatever time a request, a replica or a log hands it. A node
	// sets it to its clock; a test sets a clock it moves by hand. Default
	// nil: every time in [0, MaxTime] is taken as given and the
	// high-water mark is the newest of them, for tests and replays that
	// drive the engine by explicit ticks alone.
	Clock func() int64

	// MaxFuture is how many ticks ahead of Clock a given time may be
	// (the callers' clock skew). It is used only with Clock. Default 0;
	// a node sets it from its MaxClockSkew (one minute).
	MaxFuture int64

	// Shares, if not nil, is this region's place among the regions that
	// split strict caps (escrow.go): Allow, Reserve and Check judge a
	// strict cap against the region's share of its limit, and LendWrite
	// and CreditWrite move units of it. Default nil: a single region,
	// the caps' limits.
	Shares *Shares
}

// DefaultConfig returns the production defaults.
func DefaultConfig() Config {
	return Config{
		Stripes:                  1024,
		Buckets:                  10,
		MaxIDLength:              fcap.DefaultMaxIDLength,
		Scopes:                   DefaultScopes,
		MaxCapsPerCandidate:      fcap.DefaultMaxCaps,
		MaxCandidates:            fcap.DefaultMaxCandidates,
		MaxKeysPerViewer:         4096,
		MaxReservationsPerViewer: 64,
		MaxDedupePerViewer:       4096,
		MemoryLimit:              1 << 30,
		SweepInterval:            50 * time.Millisecond,
		SweepPass:                30 * time.Second,
		SweepBatch:               256,
	}
}

// DefaultLocalConfig returns defaults for tests and small local runs:
// fewer stripes and a 256 MiB memory limit.
func DefaultLocalConfig() Config {
	c := DefaultConfig()
	c.Stripes = 64
	c.MemoryLimit = 256 << 20
	return c
}

// Limits returns the bounds of a request the configuration sets: what a
// client or the JSON API checks before a request reaches the engine.
func (c *Config) Limits() fcap.Limits {
	return fcap.Limits{
		Scopes:        append([]string(nil), c.Scopes...),
		AnyScope:      c.AnyScope,
		MaxIDLength:   c.MaxIDLength,
		MaxCaps:       c.MaxCapsPerCandidate,
		MaxCandidates: c.MaxCandidates,
	}
}

// Validate checks every field and how they fit together.
func (c *Config) Validate() error {
	var errs []error
	if c.Stripes < 1 || c.Stripes&(c.Stripes-1) != 0 || c.Stripes > 1<<16 {
		errs = append(errs, fmt.Errorf("config: Stripes must be a power of two in [1, 65536], got %d", c.Stripes))
	}
	if c.Partitions < 0 || c.Partitions > 1<<16 {
		errs = append(errs, fmt.Errorf("config: Partitions must be in [0, 65536], got %d", c.Partitions))
	}
	if c.Buckets < 1 || c.Buckets > 1024 {
		errs = append(errs, fmt.Errorf("config: fcap.Buckets must be in [1, 1024], got %d", c.Buckets))
	}
	if c.MaxIDLength < 1 || c.MaxIDLength > 1<<16 {
		errs = append(errs, fmt.Errorf("config: MaxIDLength must be in [1, 65536], got %d", c.MaxIDLength))
	}
	if !c.AnyScope && len(c.Scopes) == 0 {
		errs = append(errs, errors.New("config: Scopes is empty and AnyScope is false: no cap could be valid"))
	}
	for _, s := range c.Scopes {
		if s == "" {
			errs = append(errs, errors.New("config: Scopes holds an empty name"))
		}
	}
	if c.MaxCapsPerCandidate < 1 || c.MaxCapsPerCandidate > 256 {
		errs = append(errs, fmt.Errorf("config: MaxCapsPerCandidate must be in [1, 256], got %d", c.MaxCapsPerCandidate))
	}
	if c.MaxCandidates < 1 || c.MaxCandidates*max(c.MaxCapsPerCandidate, 1) > 1<<16 {
		errs = append(errs, fmt.Errorf("config: MaxCandidates must be positive and MaxCandidates*MaxCapsPerCandidate at most 65536, got %d*%d", c.MaxCandidates, c.MaxCapsPerCandidate))
	}
	if c.MaxKeysPerViewer < c.MaxCapsPerCandidate || c.MaxKeysPerViewer > 1<<20 {
		errs = append(errs, fmt.Errorf("config: MaxKeysPerViewer must be in [MaxCapsPerCandidate, 1<<20], got %d", c.MaxKeysPerViewer))
	}
	if c.MaxReservationsPerViewer < 1 {
		errs = append(errs, fmt.Errorf("config: MaxReservationsPerViewer must be positive, got %d", c.MaxReservationsPerViewer))
	}
	if c.MaxDedupePerViewer < 2 {
		errs = append(errs, fmt.Errorf("config: MaxDedupePerViewer must be at least 2, got %d", c.MaxDedupePerViewer))
	}
	if c.MemoryLimit < 0 {
		errs = append(errs, fmt.Errorf("config: MemoryLimit must not be negative, got %d", c.MemoryLimit))
	}
	if c.SweepInterval <= 0 || c.SweepPass < c.SweepInterval {
		errs = append(errs, fmt.Errorf("config: SweepInterval (%v) must be positive and no longer than SweepPass (%v)", c.SweepInterval, c.SweepPass))
	}
	if c.MaxFuture < 0 || c.MaxFuture > fcap.MaxTime {
		errs = append(errs, fmt.Errorf("config: MaxFuture must be in [0, %d], got %d", int64(fcap.MaxTime), c.MaxFuture))
	}
	if c.Shares != nil {
		if err := c.Shares.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("config: %w", err))
		}
	}
	if c.SweepBatch < 1 {
		errs = append(errs, fmt.Errorf("config: SweepBatch must be positive, got %d", c.SweepBatch))
	}
	return errors.Join(errs...)
}

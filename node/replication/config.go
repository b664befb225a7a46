package replication

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fcap-io/fcap/proto"
	"github.com/fcap-io/fcap/ring"
)

// Config configures a Replicator. Start from DefaultConfig; the node
// fills in Name, Ring, Joins and Logger.
type Config struct {
	// Timeout bounds one replication message to a peer: its write and
	// its answer. Default 10s.
	Timeout time.Duration
	// TransferRate caps the bytes per second this node sends in
	// whole-partition transfers (joins, re-replication after a crash),
	// over all peers, so moving partitions does not starve the data
	// plane. Changes and hand-overs are not throttled. 0 means
	// unlimited. Default 64 MiB/s.
	TransferRate int64
	// DropGrace is how long the state of a partition this node no
	// longer owns is kept before it is dropped. Default 60s.
	DropGrace time.Duration
	// SyncTimeout is how long a node waits for a partition's hand-over
	// before it serves the partition with what it holds (the sender
	// failed in the middle; its last writes may be missing). Default 10s.
	SyncTimeout time.Duration
	// AntiEntropyInterval is how often this node compares its copy of
	// each partition it is primary of with each backup's (digests, as
	// fcapctl verify compares them) and merges the viewers that differ
	// both ways, so copies that drifted apart (a batch lost after it
	// was acknowledged, a sender's queue dropped while gossip lost the
	// peer, a stand-in write its owner never heard of) converge within
	// about one interval once they are compared. A round compares the
	// partitions that differed when last compared, then others in turn,
	// while their viewers fit AntiEntropyViewers: every partition is
	// compared once a sweep, of (viewers this node is primary of) /
	// AntiEntropyViewers rounds. A backup with changes still queued
	// for it is skipped until its sender is idle. 0 turns anti-entropy
	// off. Default 3s.
	AntiEntropyInterval time.Duration
	// AntiEntropyViewers bounds the viewers a round digests, on this
	// node and on each backup it compares with (one partition a round
	// past it; a partition is digested whole). It bounds what
	// anti-entropy costs a node as its state grows: each viewer digest
	// is a few microseconds of CPU. 0 compares every partition every
	// round. Default 20000.
	AntiEntropyViewers int

	// Name is this node's member name. Set by the node.
	Name string
	// Ring configures the rings this node builds (the future ring, with
	// Joining members Active and Leaving ones gone); its Partitions is
	// the number of partitions tracked. Set by the node.
	Ring ring.Config
	// Joins says the node was told to join others (it has seeds): it
	// bootstraps a fresh cluster only once its ring holds them. Set by
	// the node.
	Joins bool
	// Bootstrap lets a node that Joins, has never had a peer and whose
	// ring holds only itself claim the partitions it waited SyncTimeout
	// for: form a new cluster alone. Without it such a node waits. Set
	// by the node (its Config.Bootstrap).
	Bootstrap bool
	// Logger receives the replicator's logs. Set by the node.
	Logger *slog.Logger
}

// DefaultConfig returns the production defaults.
func DefaultConfig() Config {
	return Config{Timeout: 10 * time.Second, TransferRate: 64 << 20, DropGrace: 60 * time.Second, SyncTimeout: 10 * time.Second, AntiEntropyInterval: 3 * time.Second, AntiEntropyViewers: 20000}
}

// Validate checks the fields a caller sets.
func (c *Config) Validate() error {
	if c.Timeout <= 0 || c.DropGrace <= 0 || c.SyncTimeout <= 0 || c.TransferRate < 0 || c.AntiEntropyInterval < 0 || c.AntiEntropyViewers < 0 {
		return fmt.Errorf("replication config: Timeout (%v), DropGrace (%v) and SyncTimeout (%v) must be positive, TransferRate (%d), AntiEntropyInterval (%v) and AntiEntropyViewers (%d) not negative", c.Timeout, c.DropGrace, c.SyncTimeout, c.TransferRate, c.AntiEntropyInterval, c.AntiEntropyViewers)
	}
	return nil
}

// Deps are what a Replicator needs of the node.
type Deps struct {
	Engine  Engine
	Log     Log
	Peers   Peers
	Metrics Metrics
	Hooks   Hooks
	// Clock is the time the partition bookkeeping reads: how long a
	// partition has been awaited (pulls, claims), how old an early
	// hand-over is, when a lost partition may be dropped. nil means
	// time.Now; tests pass their own to step through timeouts.
	Clock func() time.Time
}

// Engine is what replication needs of the cap engine (engine.Engine).
type Engine interface {
	// Keys calls fn with every viewer key held until fn returns false.
	Keys(fn func(key uint64) bool)
	// PartitionKeys calls fn with every viewer key held in the
	// partitions want marks (key % len(want)) until fn returns false.
	PartitionKeys(want []bool, fn func(key uint64) bool)
	// PartitionSizes counts the viewers held in each of parts partitions.
	PartitionSizes(parts int) []int
	// Export appends a viewer's state to dst.
	Export(key uint64, dst []byte) []byte
	// MergeAll merges exported states into what the engine holds, all
	// or none, accepting those accept allows.
	MergeAll(data []byte, accept func(key uint64) bool) (applied, refused int, err error)
	// DeleteViewer drops a viewer.
	DeleteViewer(key uint64)
	// HighWater is the newest time the engine has seen.
	HighWater() int64
	// Digest digests what a viewer counts at now (0: nothing), as
	// fcapctl verify compares copies (anti-entropy).
	Digest(key uint64, now int64) (sum uint64, counters int)
}

// Log is the node's write-ahead log; merged states are logged as client
// writes are.
type Log interface {
	// Changed logs a viewer's current state and returns its record's
	// sequence number, 0 when the node keeps no log.
	Changed(key uint64) uint64
	// Wait returns once record seq is as durable as the node promises.
	Wait(seq uint64)
}

// Peers reaches other nodes' data planes (client.Admin, with the peer
// TLS config and token).
type Peers interface {
	// Dial opens a connection for a series of calls.
	Dial(ctx context.Context, addr string) (Conn, error)
	// Call sends one request on a connection of its own.
	Call(ctx context.Context, addr string, req, resp proto.Message) error
}

// Conn is one connection to a peer, used by one goroutine at a time.
type Conn interface {
	// Call sends req and decodes the answer into resp; an Error answer
	// comes back as a *proto.Error, and the connection stays usable.
	Call(ctx context.Context, req, resp proto.Message) error
	Close() error
}

// Metrics are the node's replication counters; the node registers them.
type Metrics struct {
	Transfers       prometheus.Counter // whole partitions and hand-overs sent
	ReplicatedBytes prometheus.Counter // state bytes peers acknowledged
	Errors          prometheus.Counter // failed sends (retried)
	Refused         prometheus.Counter // states a peer refused (it is their primary)
	Claimed         prometheus.Counter // partitions claimed without a hand-over

	AntiEntropyRounds   prometheus.Counter // anti-entropy rounds run
	DifferingPartitions prometheus.Counter // partitions whose copies differed from a backup's
	RepairedViewers     prometheus.Counter // viewers anti-entropy merged both ways
}

// Hooks are the node's callbacks. Each may be nil.
type Hooks struct {
	// Left reports whether the node has left the gossip pool (a drain):
	// only then does it answer requests for a hand-over again.
	Left func() bool
	// HoldingsChanged is called when partitions arrived or were claimed:
	// the node replans and may turn Active. It must not block.
	HoldingsChanged func()
	// ObserveHighWater sees the high-water mark of each Replicate
	// applied, before its states are merged.
	ObserveHighWater func(int64)
	// Failed counts the members that vanished without leaving and were
	// not forgotten: a partition claimed while any is counted may miss
	// their acknowledged writes (Replicator.Claimed).
	Failed func() int
	// Quorum reports whether the node holds the quorum of strict writes
	// for the ring of this epoch (node/quorum). A claimed partition is
	// collected from every member's copy only while it does: then no
	// other node grants strict writes on it. Nil: it always does (tests).
	Quorum func(epoch uint64) bool
}

// ErrOtherRing: a peer acknowledged a batch from a ring other than the
// sender's. Strict writes waiting for it fail closed.
var ErrOtherRing = errors.New("replication: the peer routes by another ring")

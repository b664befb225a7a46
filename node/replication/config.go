package replication

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fcap-io/fcap/proto"
	"github.com/fcap-io/fcap/ring"
)

// Config configures a Replicator. The node fills it from its own Config.
type Config struct {
	// Name is this node's member name.
	Name string
	// Ring configures the rings this node builds (the future ring, with
	// Joining members Active and Leaving ones gone). Its Partitions is
	// the number of partitions tracked.
	Ring ring.Config
	// Joins says the node was told to join others (it has seeds): it
	// bootstraps a fresh cluster only once its ring holds them.
	Joins bool
	// Bootstrap lets a node that Joins, has never had a peer and whose
	// ring holds only itself claim the partitions it waited SyncTimeout
	// for: form a new cluster alone. Without it such a node waits.
	Bootstrap bool
	// TransferRate caps the bytes per second sent in whole-partition
	// transfers, over all peers; 0 means unlimited.
	TransferRate int64
	// Timeout bounds one replication message: its write and its answer.
	Timeout time.Duration
	// DropGrace is how long the state of a partition this node no
	// longer owns is kept before Run drops it.
	DropGrace time.Duration
	// SyncTimeout is how long a partition's hand-over is awaited before
	// Run claims the partition with what this node holds.
	SyncTimeout time.Duration
	// Logger receives the replicator's logs.
	Logger *slog.Logger
}

// Deps are what a Replicator needs of the node.
type Deps struct {
	Engine  Engine
	Log     Log
	Peers   Peers
	Metrics Metrics
	Hooks   Hooks
}

// Engine is what replication needs of the cap engine (engine.Engine).
type Engine interface {
	// Keys calls fn with every viewer key held until fn returns false.
	Keys(fn func(key uint64) bool)
	// Export appends a viewer's state to dst.
	Export(key uint64, dst []byte) []byte
	// MergeAll merges exported states into what the engine holds, all
	// or none, accepting those accept allows.
	MergeAll(data []byte, accept func(key uint64) bool) (applied, refused int, err error)
	// DeleteViewer drops a viewer.
	DeleteViewer(key uint64)
	// HighWater is the newest time the engine has seen.
	HighWater() int64
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
}

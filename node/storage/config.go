package storage

import (
	"fmt"
	"time"

	"github.com/fcap-io/fcap/node/wal"
)

// Config configures a node's storage.
type Config struct {
	// DataDir, when set, makes the node durable: it logs every write to
	// a write-ahead log there, snapshots its state, and loads both at
	// start before it serves. Empty: memory only. Default empty.
	DataDir string

	// Fsync is when the log fsyncs: wal.Always acknowledges a write only
	// once it is on disk (group commit), wal.Interval fsyncs every
	// FsyncInterval, wal.Never leaves it to the kernel. Under every
	// policy a write is acknowledged only once its record is written to
	// the OS, so a process crash loses nothing acknowledged. Default
	// Interval.
	Fsync wal.Policy

	// FsyncInterval is how often the log fsyncs under wal.Interval.
	// Default 10ms.
	FsyncInterval time.Duration

	// SegmentSize is the size of a log segment file. Default 64 MiB.
	SegmentSize int64

	// SnapshotInterval is how often the node snapshots its state into
	// DataDir, so a restart replays only the log after it. 0 disables
	// snapshots. Default 5m.
	SnapshotInterval time.Duration

	// PruneInterval is how often log segments no longer needed (covered
	// by a snapshot, or aged out) are deleted. Default 30s.
	PruneInterval time.Duration
}

// DefaultConfig returns the defaults: memory only (no DataDir), and for
// a DataDir, fsync every 10ms, 64 MiB segments, a snapshot every 5
// minutes.
func DefaultConfig() Config {
	return Config{
		Fsync:            wal.Interval,
		FsyncInterval:    10 * time.Millisecond,
		SegmentSize:      64 << 20,
		SnapshotInterval: 5 * time.Minute,
		PruneInterval:    30 * time.Second,
	}
}

// Validate checks the fields that matter with a DataDir.
func (c *Config) Validate() error {
	if c.DataDir == "" {
		return nil
	}
	if c.Fsync > wal.Never || c.FsyncInterval <= 0 || c.SegmentSize < 4096 || c.SnapshotInterval < 0 || c.PruneInterval <= 0 {
		return fmt.Errorf("storage config: with a DataDir, Fsync must be a wal policy, FsyncInterval and PruneInterval positive, SegmentSize at least 4 KiB, SnapshotInterval not negative")
	}
	return nil
}

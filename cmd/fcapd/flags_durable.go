package main

import (
	"fmt"
	"time"

	"github.com/fcap-io/fcap/node"
	"github.com/fcap-io/fcap/node/wal"
)

// durableOptions are the flags of the data dir (issue 9).
type durableOptions struct {
	dir              string
	fsync            string
	fsyncInterval    time.Duration
	snapshotInterval time.Duration
}

func (d *durableOptions) define(f *envFlags, def node.Config) {
	f.str(&d.dir, "data-dir", "FCAP_DATA_DIR", "", "directory for the write-ahead log and snapshots; empty keeps counters in memory only")
	f.str(&d.fsync, "fsync", "FCAP_FSYNC", def.Storage.Fsync.String(), "when the log fsyncs: always (a write is acknowledged once on disk, group commit), interval, or never")
	f.duration(&d.fsyncInterval, "fsync-interval", "FCAP_FSYNC_INTERVAL", def.Storage.FsyncInterval, "how often --fsync interval fsyncs the log")
	f.duration(&d.snapshotInterval, "snapshot-interval", "FCAP_SNAPSHOT_INTERVAL", def.Storage.SnapshotInterval, "how often to snapshot the counters into --data-dir; 0 disables")
}

func (d *durableOptions) apply(cfg *node.Config) error {
	p, err := wal.ParsePolicy(d.fsync)
	if err != nil {
		return fmt.Errorf("--fsync: %w", err)
	}
	cfg.Storage.DataDir = d.dir
	cfg.Storage.Fsync = p
	cfg.Storage.FsyncInterval = d.fsyncInterval
	cfg.Storage.SnapshotInterval = d.snapshotInterval
	return nil
}

// describe says at start what survives a restart.
func (d *durableOptions) describe() string {
	if d.dir == "" {
		return "memory only: counters live in RAM and on replicas"
	}
	return fmt.Sprintf("durable: log and snapshots in %s, fsync %s", d.dir, d.fsync)
}

package main

import (
	"flag"
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

func (d *durableOptions) define(fs *flag.FlagSet, getenv func(string) string, def node.Config) error {
	env := func(name, fallback string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return fallback
	}
	dur := func(p *time.Duration, flagName, envName string, fallback time.Duration, usage string) error {
		v := fallback
		if s := getenv(envName); s != "" {
			x, err := time.ParseDuration(s)
			if err != nil {
				return fmt.Errorf("%s=%q: %w", envName, s, err)
			}
			v = x
		}
		fs.DurationVar(p, flagName, v, usage+" (env "+envName+")")
		return nil
	}
	fs.StringVar(&d.dir, "data-dir", env("FCAP_DATA_DIR", ""), "directory for the write-ahead log and snapshots; empty keeps counters in memory only (env FCAP_DATA_DIR)")
	fs.StringVar(&d.fsync, "fsync", env("FCAP_FSYNC", def.Storage.Fsync.String()), "when the log fsyncs: always (a write is acknowledged once on disk, group commit), interval, or never (env FCAP_FSYNC)")
	if err := dur(&d.fsyncInterval, "fsync-interval", "FCAP_FSYNC_INTERVAL", def.Storage.FsyncInterval, "how often --fsync interval fsyncs the log"); err != nil {
		return err
	}
	return dur(&d.snapshotInterval, "snapshot-interval", "FCAP_SNAPSHOT_INTERVAL", def.Storage.SnapshotInterval, "how often to snapshot the counters into --data-dir; 0 disables")
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

package wal

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Policy says when the log fsyncs what it wrote.
type Policy uint8

const (
	// Interval writes each record to the OS before Wait returns and
	// fsyncs at most every Config.FsyncInterval: a crash of the process
	// loses nothing acknowledged, a crash of the machine up to that much.
	Interval Policy = iota
	// Always fsyncs before Wait returns: a write is acknowledged only
	// once it is on disk. Concurrent writers share each fsync (group
	// commit).
	Always
	// Never writes each record to the OS before Wait returns and leaves
	// flushing to the kernel: a process crash loses nothing acknowledged,
	// a machine crash loses what the kernel held.
	Never
)

var policyNames = [...]string{Interval: "interval", Always: "always", Never: "never"}

func (p Policy) String() string {
	if int(p) < len(policyNames) {
		return policyNames[p]
	}
	return fmt.Sprintf("policy(%d)", uint8(p))
}

// ParsePolicy reads "always", "interval" or "never".
func ParsePolicy(s string) (Policy, error) {
	for p, name := range policyNames {
		if s == name {
			return Policy(p), nil
		}
	}
	return 0, fmt.Errorf("fsync policy must be always, interval or never, got %q", s)
}

// Config configures a Log.
type Config struct {
	// Dir holds the segment files. It is created if missing.
	Dir string

	// SegmentSize is the size past which the log starts a new segment
	// file. Default 64 MiB.
	SegmentSize int64

	// Fsync is the fsync policy. Default Interval.
	Fsync Policy

	// FsyncInterval is how often Interval fsyncs. Under every policy the
	// writer hands records to the kernel as soon as they are appended
	// (writers arriving during a write share the next one). Default 10ms.
	FsyncInterval time.Duration

	// MaxBuffer bounds the bytes of records waiting for the writer; past
	// it new records are dropped and counted (the disk cannot keep up or
	// fails). Default 256 MiB.
	MaxBuffer int

	// Logger receives the log's reports. Default slog.Default().
	Logger *slog.Logger

	// ObserveFsync, when set, is told how long each fsync took.
	ObserveFsync func(time.Duration)
}

// DefaultConfig returns the defaults for a log in dir.
func DefaultConfig(dir string) Config {
	return Config{
		Dir:           dir,
		SegmentSize:   64 << 20,
		Fsync:         Interval,
		FsyncInterval: 10 * time.Millisecond,
		MaxBuffer:     256 << 20,
	}
}

// Validate checks the fields.
func (c *Config) Validate() error {
	var errs []error
	if c.Dir == "" {
		errs = append(errs, errors.New("wal config: Dir is empty"))
	}
	if c.SegmentSize < 4096 {
		errs = append(errs, fmt.Errorf("wal config: SegmentSize must be at least 4 KiB, got %d", c.SegmentSize))
	}
	if c.Fsync > Never {
		errs = append(errs, fmt.Errorf("wal config: unknown fsync policy %d", c.Fsync))
	}
	if c.FsyncInterval <= 0 {
		errs = append(errs, fmt.Errorf("wal config: FsyncInterval must be positive, got %v", c.FsyncInterval))
	}
	if c.MaxBuffer < 1<<20 {
		errs = append(errs, fmt.Errorf("wal config: MaxBuffer must be at least 1 MiB, got %d", c.MaxBuffer))
	}
	return errors.Join(errs...)
}

package storage

import (
	"encoding/binary"
	"fmt"
	"path/filepath"

	"github.com/fcap-io/fcap/node/engine"
	"github.com/fcap-io/fcap/node/wal"
)

// What a verification (fcapctl verify) reads of the log.

// Replay loads the newest loadable snapshot and the log up to a cut made
// now into a new engine, keeping only the viewers accept takes, and
// returns it with the cut. It changes nothing on disk, and holds off
// snapshots (which delete old files) while it reads.
func (d *Store) Replay(cfg engine.Config, accept func(key uint64) bool) (*engine.Engine, uint64, error) {
	cfg.MemoryLimit = 0 // a copy of what the node holds, whatever its limit
	e, err := engine.New(cfg)
	if err != nil {
		return nil, 0, err
	}
	apply := func(p []byte) {
		if len(p) < 9 || p[0] != logState {
			return
		}
		e.Observe(int64(binary.LittleEndian.Uint64(p[1:])))
		e.ImportIf(p[9:], accept)
	}
	d.snapMu.Lock()
	defer d.snapMu.Unlock()
	cut := d.log.Rotate()
	snaps, err := wal.Snapshots(d.snapDir())
	if err != nil {
		return nil, 0, err
	}
	from := uint64(0) // no snapshot loads: the whole log
	for _, s := range snaps {
		if s.From > cut {
			continue
		}
		if _, err := wal.LoadSnapshot(s.Path, apply); err == nil {
			from = s.From
			break
		}
		// Half loaded: start again from nothing.
		if e, err = engine.New(cfg); err != nil {
			return nil, 0, err
		}
	}
	if _, err := d.log.ReadSegments(from, cut, apply); err != nil {
		return nil, 0, fmt.Errorf("read the log in %s: %w", filepath.Join(d.cfg.DataDir, "wal"), err)
	}
	return e, cut, nil
}

// ChangedSince cuts the log again and returns the viewers logged since
// cut: written while a verification ran.
func (d *Store) ChangedSince(cut uint64) (map[uint64]bool, error) {
	changed := map[uint64]bool{}
	_, err := d.log.ReadSegments(cut, d.log.Rotate(), func(p []byte) {
		if len(p) >= 9 && p[0] == logState {
			if key, ok := engine.StateKey(p[9:]); ok {
				changed[key] = true
			}
		}
	})
	return changed, err
}

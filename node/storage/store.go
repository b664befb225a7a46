// Package storage makes a node durable (Config.DataDir): a write-ahead
// log of the states writes leave viewers in, periodic snapshots, and the
// load of both at start.
package storage

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fcap-io/fcap/node/engine"
	"github.com/fcap-io/fcap/node/wal"
)

// The node logs state, not operations, the way it replicates: after a
// write changes a viewer (a client's Record, Allow, Reserve or Release,
// or a state applied from replication), it appends the viewer's whole
// exported state to the write-ahead log. Replaying imports each state in
// log order, so the last one of each viewer wins: replaying a record
// twice, or a record a snapshot already holds, counts nothing twice.
// A state is appended under its viewer's stripe lock, by the write that
// produced it (engine.Write, engine.LogState), which keeps each viewer's
// states in the log in the order they happened.
//
// States applied from replication are logged too, so a node's disk holds
// what its RAM held, backups included: a whole cluster killed at once
// comes back with every partition, and a node that was a backup serves
// what it held if it must (the usual catch-up rules still apply, see
// node/replication: a restarted node that has peers waits for their
// push).
//
// Without a data dir none of this exists: the node has no Store and the
// request path pays one nil check.

// Record kinds of the node's log payloads (append only).
const (
	logState byte = 1 // high-water uint64, then an engine state
)

// Store is a node's log and snapshots.
type Store struct {
	cfg     Config
	log     *wal.Log
	eng     *engine.Engine
	logger  *slog.Logger
	observe func(fromSnapshot bool, highWater int64)

	keepFrom atomic.Uint64 // log segments below this id are covered by a snapshot

	snapMu sync.Mutex // one snapshot at a time

	snapSeconds prometheus.Histogram
	snapBytes   atomic.Int64 // size of the last snapshot
	snapErrors  atomic.Int64

	fsyncSeconds prometheus.Histogram
	badRecords   atomic.Int64 // records that decoded but did not import
}

// Open opens the data dir, loads what it holds into eng and starts the
// log. It runs before the node serves anything. observe, if not nil, sees
// the high-water mark of every state loaded, in order, and must advance
// eng's (engine.Observe) as it sees fit; nil advances it unchecked. Its
// metrics register on reg.
func Open(cfg Config, eng *engine.Engine, logger *slog.Logger, reg prometheus.Registerer, observe func(fromSnapshot bool, highWater int64)) (*Store, error) {
	if observe == nil {
		observe = func(_ bool, hw int64) { eng.Observe(hw) }
	}
	d := &Store{cfg: cfg, eng: eng, logger: logger, observe: observe}
	d.fsyncSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "fcap_log_fsync_seconds",
		Help:    "Time each fsync of the write-ahead log took.",
		Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16),
	})
	d.snapSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "fcap_snapshot_seconds",
		Help:    "Time each snapshot of the node's state took to write.",
		Buckets: prometheus.ExponentialBuckets(0.01, 2, 14),
	})
	wc := wal.DefaultConfig(filepath.Join(cfg.DataDir, "wal"))
	wc.Fsync = cfg.Fsync
	wc.FsyncInterval = cfg.FsyncInterval
	wc.SegmentSize = cfg.SegmentSize
	wc.Logger = logger
	wc.ObserveFsync = func(t time.Duration) { d.fsyncSeconds.Observe(t.Seconds()) }
	l, err := wal.Open(wc)
	if err != nil {
		return nil, err
	}
	d.log = l
	start := time.Now()
	// On every core: the snapshot's states, then the log's, each viewer's
	// in order on one goroutine (load.go).
	ld := newLoader(runtime.GOMAXPROCS(0), d.apply)
	from, snapshots := d.loadSnapshot(d.observing(true, ld.add))
	st, err := l.Replay(from, d.observing(false, ld.add))
	ld.wait()
	if err != nil {
		return nil, err
	}
	if err := l.Start(); err != nil {
		return nil, err
	}
	es := eng.Stats()
	logger.Info("storage: loaded the data dir", "dir", cfg.DataDir, "fsync", cfg.Fsync.String(),
		"snapshot_from", from, "snapshot_records", snapshots,
		"log_segments", st.Segments, "log_records", st.Records, "log_bytes", st.Bytes,
		"dropped_bytes", st.DroppedBytes, "bad_records", d.badRecords.Load(),
		"viewers", es.Viewers, "took", time.Since(start).Round(time.Millisecond))
	if err := d.register(reg); err != nil {
		l.Close()
		return nil, err
	}
	return d, nil
}

// observing returns add preceded by advancing the engine's high-water
// mark to each payload's, read in order on the caller's goroutine so a
// mark is counted by its source. A mark beyond the node's clock (a log
// written by a node that took callers' times on trust, or whose clock
// ran ahead) is clamped and counted.
func (d *Store) observing(fromSnapshot bool, add func([]byte)) func([]byte) {
	return func(p []byte) {
		if len(p) >= 9 && p[0] == logState {
			d.observe(fromSnapshot, int64(binary.LittleEndian.Uint64(p[1:])))
		}
		add(p)
	}
}

// apply loads one logged payload's state into the engine (its
// high-water mark was observed as it was read). Bad bytes are counted
// and skipped, never fatal.
func (d *Store) apply(p []byte) {
	if len(p) < 9 || p[0] != logState {
		d.badRecords.Add(1)
		return
	}
	if _, _, err := d.eng.Import(p[9:]); err != nil {
		if d.badRecords.Add(1) == 1 {
			d.logger.Warn("storage: skipping a logged state that does not import", "err", err)
		}
	}
}

// Append logs one viewer state the engine gives it (engine.Journal),
// under the viewer's stripe lock: the payload is the log record kind, the
// engine's high-water mark, then the state. It returns the record's
// sequence number for Wait.
func (d *Store) Append(st engine.State) uint64 {
	return d.log.Append(func(b []byte) ([]byte, int64) {
		b = append(b, logState)
		b = binary.LittleEndian.AppendUint64(b, uint64(d.eng.HighWater()))
		return st.AppendTo(b)
	})
}

// Run prunes the log and takes snapshots until ctx is done.
func (d *Store) Run(ctx context.Context) {
	t := time.NewTicker(d.cfg.PruneInterval)
	defer t.Stop()
	var snap <-chan time.Time
	if d.cfg.SnapshotInterval > 0 {
		st := time.NewTicker(d.cfg.SnapshotInterval)
		defer st.Stop()
		snap = st.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			d.prune()
		case <-snap:
			if err := d.Snapshot(); err != nil {
				d.logger.Error("storage: snapshot failed; the log keeps everything since the last one", "err", err)
			}
		}
	}
}

func (d *Store) snapDir() string { return filepath.Join(d.cfg.DataDir, "snapshots") }

// loadSnapshot gives apply the states of the newest snapshot that loads
// whole, and returns the log segment to replay from (0, everything, when
// none does) and the number of states it held.
func (d *Store) loadSnapshot(apply func([]byte)) (from, records uint64) {
	snaps, err := wal.Snapshots(d.snapDir())
	if err != nil {
		d.logger.Error("storage: cannot list snapshots; replaying the whole log", "err", err)
		return 0, 0
	}
	for i, s := range snaps {
		n, err := wal.LoadSnapshot(s.Path, apply)
		if err != nil {
			d.snapErrors.Add(1)
			d.logger.Error("storage: snapshot does not load; falling back to an older one or the whole log", "path", s.Path, "err", err)
			continue
		}
		if i+1 < len(snaps) {
			d.keepFrom.Store(snaps[i+1].From) // what its fallback needs
		}
		return s.From, n
	}
	return 0, 0
}

// Snapshot writes every viewer's state to a new snapshot while writes go
// on, then deletes what it makes useless. The log is cut first: every
// write logged after the cut replays after the snapshot, and replaying a
// state the snapshot already holds changes nothing.
func (d *Store) Snapshot() error {
	d.snapMu.Lock()
	defer d.snapMu.Unlock()
	start := time.Now()
	from := d.log.Rotate()
	w, err := wal.CreateSnapshot(d.snapDir(), from)
	if err != nil {
		d.snapErrors.Add(1)
		return err
	}
	var buf []byte
	d.eng.Keys(func(key uint64) bool {
		buf = append(buf[:0], logState)
		buf = binary.LittleEndian.AppendUint64(buf, uint64(d.eng.HighWater()))
		buf = d.eng.Export(key, buf)
		w.Add(buf)
		return true
	})
	size, err := w.Commit()
	if err != nil {
		d.snapErrors.Add(1)
		return err
	}
	took := time.Since(start)
	d.snapSeconds.Observe(took.Seconds())
	d.snapBytes.Store(size)
	// Keep this snapshot and the one before it (the fallback should this
	// one not load), and the log from the older one's cut on.
	snaps, _ := wal.Snapshots(d.snapDir())
	keep := uint64(0) // the first snapshot: its fallback is the whole log
	for i, s := range snaps {
		switch {
		case i == 1:
			keep = s.From
		case i > 1:
			os.Remove(s.Path)
		}
	}
	d.keepFrom.Store(keep)
	d.prune()
	d.logger.Info("storage: snapshot written", "from_segment", from, "bytes", size, "took", took.Round(time.Millisecond))
	return nil
}

// prune deletes log segments that a snapshot covers or whose every state
// has aged out of its longest window.
func (d *Store) prune() {
	if n := d.log.Prune(d.eng.HighWater(), d.keepFrom.Load()); n > 0 {
		d.logger.Debug("storage: deleted log segments", "segments", n)
	}
}

// Close writes and fsyncs what the log holds and closes it.
func (d *Store) Close() error { return d.log.Close() }

// Wait returns once the record numbered seq (Append) is as durable as the
// fsync policy promises.
func (d *Store) Wait(seq uint64) { d.log.Wait(seq) }

func (d *Store) register(reg prometheus.Registerer) error {
	stat := func(f func(wal.Stats) float64) func() float64 {
		return func() float64 { return f(d.log.Stats()) }
	}
	cs := []prometheus.Collector{
		d.fsyncSeconds,
		d.snapSeconds,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fcap_snapshot_bytes", Help: "Size of the last snapshot written."},
			func() float64 { return float64(d.snapBytes.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "fcap_snapshot_errors_total", Help: "Snapshots that failed to write or to load."},
			func() float64 { return float64(d.snapErrors.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fcap_log_bytes", Help: "Bytes of write-ahead log segments on disk."},
			stat(func(s wal.Stats) float64 { return float64(s.Bytes) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fcap_log_segments", Help: "Write-ahead log segment files."},
			stat(func(s wal.Stats) float64 { return float64(s.Segments) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fcap_log_healthy", Help: "1 while the write-ahead log's last write succeeded, 0 while the disk refuses writes (they are served from RAM and replicated, not logged)."},
			stat(func(s wal.Stats) float64 {
				if s.Healthy {
					return 1
				}
				return 0
			})),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "fcap_log_write_errors_total", Help: "Failed writes or fsyncs of the write-ahead log."},
			stat(func(s wal.Stats) float64 { return float64(s.WriteErrors) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "fcap_log_dropped_records_total", Help: "Records lost to the write-ahead log (write errors, or a disk that cannot keep up); the writes were still served."},
			stat(func(s wal.Stats) float64 { return float64(s.DroppedRecords) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "fcap_log_replayed_records_total", Help: "Log records replayed at start."},
			stat(func(s wal.Stats) float64 { return float64(s.Replayed) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "fcap_log_dropped_bytes_total", Help: "Bytes of torn or corrupt log tails truncated at start."},
			stat(func(s wal.Stats) float64 { return float64(s.DroppedBytes) })),
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("register storage metrics: %w", err)
		}
	}
	return nil
}

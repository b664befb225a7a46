// Package wal is fcap's write-ahead log: checksummed records appended to
// segment files by one writer goroutine, with group commit and a choice
// of fsync policy. Callers append under a short lock into a buffer; the
// writer takes the whole buffer, writes it and (per policy) fsyncs it,
// so concurrent writers share each write and each fsync.
//
// Each record carries an "until" time: once the caller's high-water mark
// reaches it, the record no longer matters. A segment remembers the
// latest until of its records, so whole segments can be deleted from the
// oldest on (Prune). Snapshots (snapshot.go) cover a prefix of segments.
//
// The log never panics on what it reads back: a record cut short or
// failing its checksum ends its segment; the segment is truncated there
// and the bytes dropped are reported.
package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

const segmentExt = ".wal"

var errInjected = errors.New("injected write error")

// segment is one segment file.
type segment struct {
	id    uint64
	size  int64
	until int64 // latest until of its records
}

// Log is a write-ahead log. Open it, Replay what it holds, then Start it;
// Append and Wait from any goroutine; Close it once.
type Log struct {
	cfg Config
	log *slog.Logger

	mu sync.Mutex
	// The fields below, up to the blank line, are guarded by mu.
	buf    []byte // records waiting for the writer
	spare  []byte // the writer's last buffer, for reuse
	seq    uint64 // records appended so far
	until  int64  // latest until of the records in buf
	cutAt  int    // where in buf a new segment must start, -1 for none
	cutReq uint64 // cuts asked for so far
	nextID uint64 // id of the next segment to create
	closed bool

	syncMu sync.Mutex
	// synced is the sequence number of the last record written to the
	// OS (and fsynced under Always); cutDone the cuts made so far and cutID the
	// segment the last one opened. Guarded by syncMu, signalled by
	// syncCond.
	synced   uint64
	cutDone  uint64
	cutID    uint64
	syncCond *sync.Cond

	segMu sync.Mutex
	// segs are the segment files, oldest first; the last is the one
	// being written once the log is started. Guarded by segMu.
	segs []segment

	kick chan struct{}
	stop chan struct{}
	done chan struct{}

	// Owned by the writer goroutine.
	f        *os.File
	lastSync time.Time
	unsynced bool

	// failWrites, for tests, makes writes fail while it holds true.
	failWrites atomic.Bool

	bytes        atomic.Int64 // bytes of segment files
	writeErrors  atomic.Int64
	droppedRecs  atomic.Int64 // records lost to write errors or a full buffer
	healthy      atomic.Bool
	replayed     atomic.Int64
	droppedBytes atomic.Int64 // bytes truncated from torn or corrupt segments
}

// Open lists the segments in cfg.Dir (creating it if needed). It neither
// reads nor writes them: call Replay, then Start.
func Open(cfg Config) (*Log, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("wal: %w", err)
	}
	l := &Log{
		cfg:   cfg,
		log:   cfg.Logger,
		cutAt: -1,
		until: math.MinInt64,
		kick:  make(chan struct{}, 1),
		stop:  make(chan struct{}),
		done:  make(chan struct{}),
	}
	l.syncCond = sync.NewCond(&l.syncMu)
	l.healthy.Store(true)
	ents, err := os.ReadDir(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("wal: %w", err)
	}
	for _, e := range ents {
		name := e.Name()
		if !strings.HasSuffix(name, segmentExt) {
			continue
		}
		id, err := strconv.ParseUint(strings.TrimSuffix(name, segmentExt), 10, 64)
		if err != nil {
			continue
		}
		if !e.Type().IsRegular() {
			// Never read a device or a link as a segment: /dev/zero
			// would never end.
			l.log.Warn("wal: ignoring a segment name that is not a regular file", "path", filepath.Join(cfg.Dir, name))
			continue
		}
		info, err := e.Info()
		if err != nil {
			return nil, fmt.Errorf("wal: %w", err)
		}
		l.segs = append(l.segs, segment{id: id, size: info.Size(), until: math.MaxInt64})
		l.bytes.Add(info.Size())
	}
	slices.SortFunc(l.segs, func(a, b segment) int { return cmpU64(a.id, b.id) })
	l.nextID = 1
	if len(l.segs) > 0 {
		l.nextID = l.segs[len(l.segs)-1].id + 1
	}
	return l, nil
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func (l *Log) path(id uint64) string {
	return filepath.Join(l.cfg.Dir, fmt.Sprintf("%020d%s", id, segmentExt))
}

// ReplayStats says what Replay read.
type ReplayStats struct {
	Segments     int
	Records      int64
	Bytes        int64
	DroppedBytes int64 // truncated from torn or corrupt segments
}

// Replay calls apply with the payload of every record in segments from
// id from on, oldest first, in the order they were appended. Segments
// before from are left alone (a snapshot covers them; Prune deletes
// them). A segment whose records stop decoding is truncated at its last
// good record, the rest of it is dropped and reported, and replay goes on
// with the next segment. Call it before Start.
func (l *Log) Replay(from uint64, apply func(payload []byte)) (ReplayStats, error) {
	var st ReplayStats
	l.segMu.Lock()
	defer l.segMu.Unlock()
	for i := range l.segs {
		s := &l.segs[i]
		if s.id < from {
			continue
		}
		b, err := os.ReadFile(l.path(s.id))
		if err != nil {
			return st, fmt.Errorf("wal: %w", err)
		}
		st.Segments++
		until := int64(math.MinInt64)
		good, scanErr := Scan(b, func(p []byte) {
			if len(p) < 8 {
				return
			}
			until = max(until, int64(binary.LittleEndian.Uint64(p)))
			st.Records++
			apply(p[8:])
		})
		st.Bytes += int64(good)
		s.until = until
		if scanErr != nil {
			drop := int64(len(b) - good)
			st.DroppedBytes += drop
			l.log.Error("wal: dropping a torn or corrupt tail", "segment", filepath.Base(l.path(s.id)), "offset", good, "dropped_bytes", drop, "err", scanErr)
			if err := os.Truncate(l.path(s.id), int64(good)); err != nil {
				return st, fmt.Errorf("wal: truncate: %w", err)
			}
			l.bytes.Add(-drop)
			s.size = int64(good)
		}
	}
	l.replayed.Add(st.Records)
	l.droppedBytes.Add(st.DroppedBytes)
	return st, nil
}

// Start creates a fresh segment for new records and starts the writer.
func (l *Log) Start() error {
	l.mu.Lock()
	id := l.nextID
	l.nextID++
	l.mu.Unlock()
	if err := l.openSegment(id); err != nil {
		return err
	}
	l.lastSync = time.Now()
	go l.run()
	return nil
}

// Append adds one record. fill appends the record's payload to dst and
// returns it with the record's until time. It runs under the log's lock,
// so records are in the log in the order their fill ran. Append returns
// the record's sequence number, for Wait.
func (l *Log) Append(fill func(dst []byte) ([]byte, int64)) uint64 {
	l.mu.Lock()
	if l.closed || len(l.buf) >= l.cfg.MaxBuffer {
		// Not logged: the write is served from RAM all the same, and
		// there is nothing to wait for (0 never waits).
		if !l.closed {
			l.droppedRecs.Add(1)
		}
		l.mu.Unlock()
		return 0
	}
	b, start := beginRecord(l.buf)
	b = append(b, 0, 0, 0, 0, 0, 0, 0, 0)
	b, until := fill(b)
	binary.LittleEndian.PutUint64(b[start+headerSize:], uint64(until))
	endRecord(b, start)
	l.buf = b
	l.until = max(l.until, until)
	l.seq++
	seq := l.seq
	l.mu.Unlock()
	select {
	case l.kick <- struct{}{}:
	default:
	}
	return seq
}

// Wait returns once the record with sequence number seq is written to
// the OS (a write syscall returned: a crash of the process no longer
// loses it) and, under Always, fsynced. A record the disk refused counts
// as written: writes are served from RAM whether or not the log has them
// (Healthy reports it).
func (l *Log) Wait(seq uint64) {
	l.syncMu.Lock()
	for l.synced < seq {
		l.syncCond.Wait()
	}
	l.syncMu.Unlock()
}

// Rotate makes every record appended after it returns land in a segment
// with the returned id or a later one, and every record appended before
// it in segments below that id, written (to the OS, not necessarily
// fsynced) by the time it returns: ReadSegments up to the id sees them
// all. Snapshots use it to mark where their replay starts. The writer
// names the new segment when it gets to the cut, after the segments the
// records before it filled: ids follow the order records were appended
// in, which is the order Replay applies them in.
func (l *Log) Rotate() uint64 {
	l.mu.Lock()
	if l.closed {
		id := l.nextID
		l.mu.Unlock()
		return id
	}
	if l.cutAt < 0 {
		l.cutAt = len(l.buf)
		l.cutReq++
	}
	want := l.cutReq
	l.mu.Unlock()
	select {
	case l.kick <- struct{}{}:
	default:
	}
	l.syncMu.Lock()
	defer l.syncMu.Unlock()
	for l.cutDone < want {
		l.syncCond.Wait()
	}
	return l.cutID
}

// Close writes and fsyncs what is buffered and stops the writer. It is
// safe to call twice.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	close(l.stop)
	<-l.done
	if l.f != nil {
		return l.f.Close()
	}
	return nil
}

func (l *Log) run() {
	defer close(l.done)
	t := time.NewTicker(l.cfg.FsyncInterval)
	defer t.Stop()
	for {
		select {
		case <-l.kick:
			l.flush(false)
		case <-t.C:
			l.flush(false)
		case <-l.stop:
			l.flush(true)
			return
		}
	}
}

// flush writes what is buffered, rotating segments as needed, and
// fsyncs it when the policy says so.
func (l *Log) flush(final bool) {
	l.mu.Lock()
	buf, seq, until, cutAt, cutReq := l.buf, l.seq, l.until, l.cutAt, l.cutReq
	l.buf, l.spare = l.spare[:0], nil
	l.until, l.cutAt = math.MinInt64, -1
	l.mu.Unlock()

	var err error
	var cutID uint64
	if len(buf) > 0 || cutAt >= 0 {
		if cutAt >= 0 {
			err = l.write(buf[:cutAt], until)
			var err2 error
			if cutID, err2 = l.rotate(); err == nil {
				err = err2
			}
			buf = buf[cutAt:]
		}
		if err == nil && len(buf) > 0 {
			err = l.write(buf, until)
		}
	}
	if err == nil && l.cfg.Fsync != Always && !final {
		// Written to the OS is what Interval and Never promise before an
		// acknowledgement: release the waiters before a due fsync, which
		// they need not wait for.
		l.setSynced(seq)
	}
	if err == nil && l.unsynced && (final || l.cfg.Fsync == Always ||
		(l.cfg.Fsync == Interval && time.Since(l.lastSync) >= l.cfg.FsyncInterval)) {
		err = l.sync()
	}
	if err != nil {
		l.failed(err, seq)
	} else if !l.healthy.Load() && len(buf) > 0 {
		l.healthy.Store(true)
		l.log.Info("wal: writing again after errors", "dir", l.cfg.Dir)
	}

	l.mu.Lock()
	if cap(buf) <= 4<<20 {
		l.spare = buf[:0]
	}
	l.mu.Unlock()
	l.syncMu.Lock()
	l.synced = seq
	if cutAt >= 0 {
		l.cutDone, l.cutID = cutReq, cutID
	}
	l.syncMu.Unlock()
	l.syncCond.Broadcast()
}

// setSynced releases the waiters of records up to seq.
func (l *Log) setSynced(seq uint64) {
	l.syncMu.Lock()
	l.synced = seq
	l.syncMu.Unlock()
	l.syncCond.Broadcast()
}

// write appends whole records to segments, starting a new one whenever
// the next record would take the current one past SegmentSize (a
// segment holds at least one record, however large).
func (l *Log) write(b []byte, until int64) error {
	for len(b) > 0 {
		if l.f == nil {
			if _, err := l.rotate(); err != nil {
				return err
			}
		}
		l.segMu.Lock()
		size := l.segs[len(l.segs)-1].size
		l.segMu.Unlock()
		n := 0 // bytes of whole records that fit
		for n < len(b) {
			rec := headerSize + int(binary.LittleEndian.Uint32(b[n:]))
			if size+int64(n+rec) > l.cfg.SegmentSize && (n > 0 || size > 0) {
				break
			}
			n += rec
		}
		if n == 0 {
			if _, err := l.rotate(); err != nil {
				return err
			}
			continue
		}
		if err := l.writeSegment(b[:n], until); err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// writeSegment appends whole records to the current segment.
func (l *Log) writeSegment(b []byte, until int64) error {
	var n int
	var err error
	if l.failWrites.Load() {
		err = errInjected
	} else {
		n, err = l.f.Write(b)
	}
	l.bytes.Add(int64(n))
	l.segMu.Lock()
	s := &l.segs[len(l.segs)-1]
	s.size += int64(n)
	s.until = max(s.until, until)
	l.segMu.Unlock()
	if n > 0 {
		l.unsynced = true
	}
	if err != nil {
		// Part of a record may be on disk: never write after it.
		l.closeSegment()
		return fmt.Errorf("wal: write: %w", err)
	}
	return nil
}

// rotate closes the current segment (fsyncing it unless the policy is
// Never) and opens the next one, whose id it returns (allocated even when
// it fails).
func (l *Log) rotate() (uint64, error) {
	l.mu.Lock()
	id := l.nextID
	l.nextID++
	l.mu.Unlock()
	if l.f != nil && l.unsynced && l.cfg.Fsync != Never {
		if err := l.sync(); err != nil {
			l.closeSegment()
			return id, err
		}
	}
	l.closeSegment()
	return id, l.openSegment(id)
}

func (l *Log) closeSegment() {
	if l.f != nil {
		l.f.Close()
		l.f = nil
	}
	l.unsynced = false
}

func (l *Log) openSegment(id uint64) error {
	f, err := os.OpenFile(l.path(id), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("wal: open segment: %w", err)
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("wal: open segment: %w", err)
	}
	if l.cfg.Fsync != Never {
		syncDir(l.cfg.Dir)
	}
	l.f = f
	l.segMu.Lock()
	l.segs = append(l.segs, segment{id: id, size: info.Size(), until: math.MinInt64})
	l.segMu.Unlock()
	l.bytes.Add(info.Size())
	return nil
}

func (l *Log) sync() error {
	start := time.Now()
	err := l.f.Sync()
	if l.cfg.ObserveFsync != nil {
		l.cfg.ObserveFsync(time.Since(start))
	}
	l.lastSync = time.Now()
	if err != nil {
		l.closeSegment()
		return fmt.Errorf("wal: fsync: %w", err)
	}
	l.unsynced = false
	return nil
}

// failed reports a write or fsync error. The records of the failed batch
// are lost to the log (the node still holds them in RAM); the next batch
// goes to a fresh segment.
func (l *Log) failed(err error, seq uint64) {
	n := l.writeErrors.Add(1)
	if l.healthy.Swap(false) || n%1000 == 0 {
		l.log.Error("wal: cannot write the log; writes are served from RAM and replicated but not durable here until the disk recovers",
			"dir", l.cfg.Dir, "err", err, "errors", n, "seq", seq)
	}
	l.droppedRecs.Add(1)
}

// syncDir fsyncs a directory so a file created or removed in it
// survives a crash.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}

// Prune deletes segments from the oldest on while each is fully covered:
// its id is below keepFrom (a snapshot holds it) or every record in it
// matters only until horizon or earlier. The segment being written is
// never deleted. It returns how many it deleted.
func (l *Log) Prune(horizon int64, keepFrom uint64) int {
	l.segMu.Lock()
	defer l.segMu.Unlock()
	n := 0
	for n < len(l.segs)-1 {
		s := l.segs[n]
		if s.id >= keepFrom && s.until > horizon {
			break
		}
		if err := os.Remove(l.path(s.id)); err != nil && !os.IsNotExist(err) {
			l.log.Warn("wal: remove segment", "err", err)
			break
		}
		l.bytes.Add(-s.size)
		n++
	}
	if n > 0 {
		l.segs = slices.Delete(l.segs, 0, n)
		syncDir(l.cfg.Dir)
	}
	return n
}

// Stats are the log's figures.
type Stats struct {
	Bytes          int64 // bytes of segment files
	Segments       int
	WriteErrors    int64
	DroppedRecords int64 // records lost to write errors or a full buffer
	Healthy        bool  // the last write succeeded
	Replayed       int64 // records replayed at start
	DroppedBytes   int64 // bytes truncated from torn or corrupt segments at start
}

// Stats returns current figures.
func (l *Log) Stats() Stats {
	l.segMu.Lock()
	segs := len(l.segs)
	l.segMu.Unlock()
	return Stats{
		Bytes:          l.bytes.Load(),
		Segments:       segs,
		WriteErrors:    l.writeErrors.Load(),
		DroppedRecords: l.droppedRecs.Load(),
		Healthy:        l.healthy.Load(),
		Replayed:       l.replayed.Load(),
		DroppedBytes:   l.droppedBytes.Load(),
	}
}

// ReadSegments calls apply with the payload of every record in the
// segments with ids in [from, to), oldest first, without changing
// anything: a torn or corrupt tail is skipped, not truncated, and a
// segment deleted meanwhile (Prune) is skipped. It returns the number of
// records read. Safe while the log runs, for segments below a Rotate's id.
func (l *Log) ReadSegments(from, to uint64, apply func(payload []byte)) (int64, error) {
	l.segMu.Lock()
	var ids []uint64
	for _, s := range l.segs {
		if s.id >= from && s.id < to {
			ids = append(ids, s.id)
		}
	}
	l.segMu.Unlock()
	var n int64
	for _, id := range ids {
		b, err := os.ReadFile(l.path(id))
		if err != nil {
			if os.IsNotExist(err) {
				continue
			}
			return n, fmt.Errorf("wal: %w", err)
		}
		Scan(b, func(p []byte) {
			if len(p) >= 8 {
				n++
				apply(p[8:])
			}
		})
	}
	return n, nil
}

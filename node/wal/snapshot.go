package wal

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// A snapshot is a file of records (record.go): a header record naming
// the log segment its replay starts from, one record per payload the
// caller added, and a trailer record with their count. It is written to
// a temporary file, fsynced and renamed, so a snapshot file either is
// whole or fails to load; a crash in the middle leaves only a temporary
// file, removed at the next Snapshots call.

const (
	snapPrefix = "snap-"
	snapExt    = ".snap"
	tmpExt     = ".tmp"
)

var (
	snapMagic = []byte("FCAPSNAP\x01")
	snapEnd   = []byte("FCAPEND\x01")
)

// ErrBadSnapshot reports a snapshot that does not load: cut short,
// failing a checksum or without its trailer.
var ErrBadSnapshot = errors.New("wal: bad snapshot")

// Snapshot is a snapshot file.
type Snapshot struct {
	Path string
	// From is the first log segment to replay after loading it.
	From uint64
}

func snapPath(dir string, from uint64) string {
	return filepath.Join(dir, fmt.Sprintf("%s%020d%s", snapPrefix, from, snapExt))
}

// Snapshots lists the snapshots in dir, newest first, and removes
// temporary files left by a snapshot that never finished.
func Snapshots(dir string) ([]Snapshot, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("wal: %w", err)
	}
	var out []Snapshot
	for _, e := range ents {
		name := e.Name()
		if !strings.HasPrefix(name, snapPrefix) {
			continue
		}
		if strings.HasSuffix(name, tmpExt) {
			os.Remove(filepath.Join(dir, name))
			continue
		}
		id, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(name, snapPrefix), snapExt), 10, 64)
		if err != nil || !strings.HasSuffix(name, snapExt) {
			continue
		}
		out = append(out, Snapshot{Path: filepath.Join(dir, name), From: id})
	}
	slices.SortFunc(out, func(a, b Snapshot) int { return cmpU64(b.From, a.From) })
	return out, nil
}

// SnapshotWriter writes one snapshot. Add payloads, then Commit, or
// Abort.
type SnapshotWriter struct {
	dir, tmp string
	from     uint64
	f        *os.File
	w        *bufio.Writer
	rec      []byte
	count    uint64
	bytes    int64
	err      error
}

// CreateSnapshot starts a snapshot in dir whose replay continues at log
// segment from (Log.Rotate).
func CreateSnapshot(dir string, from uint64) (*SnapshotWriter, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("wal: %w", err)
	}
	tmp := snapPath(dir, from) + tmpExt
	f, err := os.Create(tmp)
	if err != nil {
		return nil, fmt.Errorf("wal: snapshot: %w", err)
	}
	s := &SnapshotWriter{dir: dir, tmp: tmp, from: from, f: f, w: bufio.NewWriterSize(f, 1<<20)}
	s.put(binary.LittleEndian.AppendUint64(append([]byte(nil), snapMagic...), from))
	return s, nil
}

func (s *SnapshotWriter) put(payload []byte) {
	if s.err != nil {
		return
	}
	s.rec = AppendRecord(s.rec[:0], payload)
	n, err := s.w.Write(s.rec)
	s.bytes += int64(n)
	s.err = err
}

// Add appends one payload.
func (s *SnapshotWriter) Add(payload []byte) {
	s.put(payload)
	s.count++
}

// Commit writes the trailer, fsyncs and renames the snapshot into place.
// It returns the snapshot's size.
func (s *SnapshotWriter) Commit() (int64, error) {
	s.put(binary.LittleEndian.AppendUint64(append([]byte(nil), snapEnd...), s.count))
	if s.err == nil {
		s.err = s.w.Flush()
	}
	if s.err == nil {
		s.err = s.f.Sync()
	}
	if err := s.f.Close(); s.err == nil {
		s.err = err
	}
	if s.err == nil {
		s.err = os.Rename(s.tmp, snapPath(s.dir, s.from))
	}
	if s.err != nil {
		os.Remove(s.tmp)
		return 0, fmt.Errorf("wal: snapshot: %w", s.err)
	}
	syncDir(s.dir)
	return s.bytes, nil
}

// Abort drops an unfinished snapshot.
func (s *SnapshotWriter) Abort() {
	s.f.Close()
	os.Remove(s.tmp)
}

// LoadSnapshot checks a whole snapshot first, then calls apply with each
// payload in order: a snapshot that is cut short, fails a checksum or
// lacks its trailer is reported (wrapping ErrBadSnapshot) before apply
// sees anything. It returns the number of payloads.
func LoadSnapshot(path string, apply func(payload []byte)) (uint64, error) {
	if _, err := readSnapshot(path, nil); err != nil {
		return 0, err
	}
	return readSnapshot(path, apply)
}

func readSnapshot(path string, apply func([]byte)) (uint64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("wal: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("wal: %w", err)
	}
	return DecodeSnapshot(bufio.NewReaderSize(f, 1<<20), st.Size(), apply)
}

// DecodeSnapshot reads a snapshot of size bytes from r, calling apply
// (when not nil) with each payload. It never panics, and allocates no
// more than the largest record that fits in size.
func DecodeSnapshot(r io.Reader, size int64, apply func([]byte)) (uint64, error) {
	var hdr [headerSize]byte
	var buf []byte
	left := size
	next := func() ([]byte, error) {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadSnapshot, err)
		}
		left -= headerSize
		n := binary.LittleEndian.Uint32(hdr[:])
		if n == 0 || n > MaxRecord || int64(n) > left {
			return nil, fmt.Errorf("%w: record of %d bytes with %d left", ErrBadSnapshot, n, left)
		}
		if cap(buf) < int(n) {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadSnapshot, err)
		}
		left -= int64(n)
		if crc32.Checksum(buf, castagnoli) != binary.LittleEndian.Uint32(hdr[4:]) {
			return nil, fmt.Errorf("%w: checksum mismatch", ErrBadSnapshot)
		}
		return buf, nil
	}
	p, err := next()
	if err != nil {
		return 0, err
	}
	if !bytes.HasPrefix(p, snapMagic) || len(p) != len(snapMagic)+8 {
		return 0, fmt.Errorf("%w: no header", ErrBadSnapshot)
	}
	var count uint64
	for {
		p, err := next()
		if err != nil {
			return 0, err
		}
		if bytes.HasPrefix(p, snapEnd) && len(p) == len(snapEnd)+8 {
			if binary.LittleEndian.Uint64(p[len(snapEnd):]) != count || left != 0 {
				return 0, fmt.Errorf("%w: trailer says %d records, read %d, %d bytes after it", ErrBadSnapshot,
					binary.LittleEndian.Uint64(p[len(snapEnd):]), count, left)
			}
			return count, nil
		}
		if apply != nil {
			apply(p)
		}
		count++
	}
}

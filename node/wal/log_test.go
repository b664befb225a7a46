package wal

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

func testConfig(t *testing.T, p Policy) Config {
	c := DefaultConfig(t.TempDir())
	c.Fsync = p
	c.SegmentSize = 4096
	c.FsyncInterval = time.Millisecond
	return c
}

func open(t *testing.T, c Config) (*Log, []string, ReplayStats) {
	t.Helper()
	l, err := Open(c)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	st, err := l.Replay(0, func(p []byte) { got = append(got, string(p)) })
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, got, st
}

func appendStr(l *Log, s string, until int64) uint64 {
	return l.Append(func(b []byte) ([]byte, int64) { return append(b, s...), until })
}

func TestAppendReplayInOrder(t *testing.T) {
	for _, p := range []Policy{Always, Interval, Never} {
		t.Run(p.String(), func(t *testing.T) {
			c := testConfig(t, p)
			l, got, _ := open(t, c)
			if len(got) != 0 {
				t.Fatalf("fresh log replayed %d records", len(got))
			}
			var want []string
			for i := range 500 {
				s := fmt.Sprintf("record-%04d", i)
				want = append(want, s)
				l.Wait(appendStr(l, s, int64(i)))
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			if st := l.Stats(); st.Segments < 2 {
				t.Fatalf("500 records in 4 KiB segments made %d segments", st.Segments)
			}
			_, got, st := open(t, c)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("replayed %d records, want %d in order", len(got), len(want))
			}
			if st.DroppedBytes != 0 {
				t.Fatalf("dropped %d bytes of a clean log", st.DroppedBytes)
			}
		})
	}
}

// Concurrent writers under Always: every record whose Wait returned is
// on disk, and writers share fsyncs.
func TestGroupCommit(t *testing.T) {
	c := testConfig(t, Always)
	c.SegmentSize = 1 << 20
	var fsyncs int
	var mu sync.Mutex
	c.ObserveFsync = func(time.Duration) { mu.Lock(); fsyncs++; mu.Unlock() }
	l, _, _ := open(t, c)
	const writers, each = 8, 200
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				l.Wait(appendStr(l, fmt.Sprintf("w%d-%d", w, i), 0))
			}
		})
	}
	wg.Wait()
	l.Close()
	mu.Lock()
	if fsyncs >= writers*each {
		t.Logf("no fsync was shared: %d fsyncs for %d records", fsyncs, writers*each)
	}
	mu.Unlock()
	_, got, _ := open(t, c)
	if len(got) != writers*each {
		t.Fatalf("replayed %d records, want %d", len(got), writers*each)
	}
}

func lastSegment(t *testing.T, dir string) string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, "*"+segmentExt))
	var last string
	for _, p := range m {
		if st, _ := os.Stat(p); st.Size() > 0 {
			last = p
		}
	}
	if last == "" {
		t.Fatal("no non-empty segment")
	}
	return last
}

func TestTornAndCorruptTails(t *testing.T) {
	cases := []struct {
		name    string
		damage  func(b []byte) []byte
		lost    int // records lost from the last segment's end
		dropped func(b []byte) int64
	}{
		{"short header", func(b []byte) []byte { return b[:len(b)-len("record-0099")-5] }, 1, nil},
		{"short payload", func(b []byte) []byte { return b[:len(b)-3] }, 1, nil},
		{"bit flip in last payload", func(b []byte) []byte { b[len(b)-2] ^= 0x10; return b }, 1, nil},
		{"zero fill after", func(b []byte) []byte { return append(b, make([]byte, 100)...) }, 0, nil},
		{"garbage length", func(b []byte) []byte { return binary.LittleEndian.AppendUint32(b, 0xFFFFFFF0) }, 0, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := testConfig(t, Always)
			c.SegmentSize = 1 << 20
			l, _, _ := open(t, c)
			for i := range 100 {
				l.Wait(appendStr(l, fmt.Sprintf("record-%04d", i), 0))
			}
			l.Close()
			seg := lastSegment(t, c.Dir)
			b, _ := os.ReadFile(seg)
			before := len(b)
			b = tc.damage(b)
			os.WriteFile(seg, b, 0o644)
			_, got, st := open(t, c)
			if len(got) != 100-tc.lost {
				t.Fatalf("replayed %d records, want %d", len(got), 100-tc.lost)
			}
			for i, s := range got {
				if s != fmt.Sprintf("record-%04d", i) {
					t.Fatalf("record %d is %q", i, s)
				}
			}
			if st.DroppedBytes == 0 {
				t.Fatal("nothing reported dropped")
			}
			if fi, _ := os.Stat(seg); fi.Size() > int64(before) {
				t.Fatalf("segment not truncated: %d bytes", fi.Size())
			}
			// The truncated log takes new records and replays them all.
			l2, _ := Open(c)
			l2.Replay(0, func([]byte) {})
			l2.Start()
			l2.Wait(appendStr(l2, "after", 0))
			l2.Close()
			_, got, st = open(t, c)
			if len(got) != 101-tc.lost || got[len(got)-1] != "after" || st.DroppedBytes != 0 {
				t.Fatalf("after repair: %d records, last %q, dropped %d", len(got), got[len(got)-1], st.DroppedBytes)
			}
		})
	}
}

func TestPruneByUntilAndSnapshot(t *testing.T) {
	c := testConfig(t, Always)
	l, _, _ := open(t, c)
	for i := range 400 {
		l.Wait(appendStr(l, fmt.Sprintf("record-%04d", i), int64(i)))
	}
	l.Close()
	l, got, _ := open(t, c)
	if len(got) != 400 {
		t.Fatalf("replayed %d", len(got))
	}
	segs := l.Stats().Segments
	if n := l.Prune(199, 0); n == 0 || n >= segs-1 {
		t.Fatalf("pruned %d of %d segments", n, segs)
	}
	l.Close()
	_, got, _ = open(t, c)
	if len(got) == 0 || got[len(got)-1] != "record-0399" {
		t.Fatalf("pruned too much: %d left", len(got))
	}
	// Every record whose until is past the horizon survived.
	first := got[0]
	var idx int
	fmt.Sscanf(first, "record-%d", &idx)
	if idx > 200 {
		t.Fatalf("record %d was deleted though it mattered until after 199", idx-1)
	}
}

func TestRotateSplitsTheLog(t *testing.T) {
	c := testConfig(t, Always)
	c.SegmentSize = 1 << 20
	l, _, _ := open(t, c)
	for i := range 10 {
		appendStr(l, fmt.Sprintf("a%d", i), 0)
	}
	id := l.Rotate()
	for i := range 10 {
		l.Wait(appendStr(l, fmt.Sprintf("b%d", i), 0))
	}
	l.Close()
	l2, _ := Open(c)
	var got []string
	l2.Replay(id, func(p []byte) { got = append(got, string(p)) })
	if len(got) != 10 || got[0] != "b0" {
		t.Fatalf("replay from the rotation got %v", got)
	}
}

func TestWriteErrorsAreReportedAndRecover(t *testing.T) {
	c := testConfig(t, Always)
	c.SegmentSize = 1 << 20
	l, _, _ := open(t, c)
	l.Wait(appendStr(l, "ok", 0))
	l.failWrites.Store(true)
	l.Wait(appendStr(l, "lost", 0))
	if st := l.Stats(); st.Healthy || st.WriteErrors == 0 {
		t.Fatalf("after a failed write: %+v", st)
	}
	l.failWrites.Store(false)
	l.Wait(appendStr(l, "again", 0))
	if st := l.Stats(); !st.Healthy {
		t.Fatalf("did not recover: %+v", st)
	}
	l.Close()
	_, got, _ := open(t, c)
	if fmt.Sprint(got) != "[ok again]" {
		t.Fatalf("replayed %v", got)
	}
}

// TestRotateThenReadWhileRunning: after Rotate, ReadSegments below it sees every
// record appended before the cut, under every policy (Never too: nothing
// waits for an fsync), changes nothing, and never sees a record appended
// after it.
func TestRotateThenReadWhileRunning(t *testing.T) {
	for _, p := range []Policy{Always, Interval, Never} {
		t.Run(p.String(), func(t *testing.T) {
			c := testConfig(t, p)
			c.FsyncInterval = time.Hour // Interval and Never: the writer runs only when kicked
			l, _, _ := open(t, c)
			var want []string
			for i := range 300 {
				s := fmt.Sprintf("before-%03d", i)
				want = append(want, s)
				appendStr(l, s, int64(i))
			}
			cut := l.Rotate()
			for i := range 10 {
				appendStr(l, fmt.Sprintf("after-%d", i), 0)
			}
			var got []string
			n, err := l.ReadSegments(0, cut, func(p []byte) { got = append(got, string(p)) })
			if err != nil {
				t.Fatal(err)
			}
			if n != int64(len(got)) || fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("read %d records below the cut (n=%d), want the %d appended before it, in order", len(got), n, len(want))
			}
			l.Close()
			// Replay applies segments in id order: the records before the
			// cut filled several segments, and every one of them must
			// sort before the cut's (the newest state of a viewer is the
			// last one replayed).
			_, all, st := open(t, c)
			for i := range 10 {
				want = append(want, fmt.Sprintf("after-%d", i))
			}
			if fmt.Sprint(all) != fmt.Sprint(want) || st.DroppedBytes != 0 {
				t.Fatalf("after reading, the log replays %d records (want %d, in append order), dropped %d bytes", len(all), len(want), st.DroppedBytes)
			}
		})
	}
}

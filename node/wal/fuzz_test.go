package wal

import (
	"bytes"
	"os"
	"testing"
)

// FuzzDecodeRecord: no input panics the decoder, a record it accepts
// re-encodes to the same bytes, and Scan never reads past its input.
func FuzzDecodeRecord(f *testing.F) {
	f.Add(AppendRecord(nil, []byte("payload")))
	f.Add(AppendRecord(AppendRecord(nil, []byte{1}), []byte("second")))
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 1, 2, 3, 4, 5})
	f.Fuzz(func(t *testing.T, b []byte) {
		p, n, err := DecodeRecord(b)
		if err == nil {
			if n > len(b) || !bytes.Equal(AppendRecord(nil, p), b[:n]) {
				t.Fatalf("decoded %d bytes that do not re-encode", n)
			}
		}
		good, _ := Scan(b, func([]byte) {})
		if good > len(b) {
			t.Fatalf("scanned %d of %d bytes", good, len(b))
		}
	})
}

// FuzzDecodeSnapshot: no input panics the snapshot decoder, and one it
// accepts holds what a writer would have written.
func FuzzDecodeSnapshot(f *testing.F) {
	dir := f.TempDir()
	w, err := CreateSnapshot(dir, 7)
	if err != nil {
		f.Fatal(err)
	}
	w.Add([]byte("one"))
	w.Add([]byte("two"))
	if _, err := w.Commit(); err != nil {
		f.Fatal(err)
	}
	good, _ := os.ReadFile(snapPath(dir, 7))
	f.Add(good)
	f.Add(good[:len(good)-4])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		var n uint64
		count, err := DecodeSnapshot(bytes.NewReader(b), int64(len(b)), func([]byte) { n++ })
		if err == nil && count != n {
			t.Fatalf("accepted a snapshot of %d records, applied %d", count, n)
		}
	})
}

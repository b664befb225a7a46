package wal

import (
	"bytes"
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

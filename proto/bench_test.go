package proto

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/fcap-io/fcap"
)

// benchMessage measures encoding m into a reused buffer, decoding its
// body into a reused message, and both in turn.
func benchMessage(b *testing.B, m Message) {
	frame, err := AppendFrame(nil, 1, m)
	if err != nil {
		b.Fatal(err)
	}
	body := frame[HeaderSize:]
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(frame)))
		buf := make([]byte, 0, len(frame))
		for b.Loop() {
			buf, _ = AppendFrame(buf[:0], 1, m)
		}
	})
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(frame)))
		into := NewMessage(m.Type())
		for b.Loop() {
			if err := Decode(body, into); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encode+decode", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(frame)))
		into := NewMessage(m.Type())
		buf := make([]byte, 0, len(frame))
		for b.Loop() {
			buf, _ = AppendFrame(buf[:0], 1, m)
			if err := Decode(buf[HeaderSize:], into); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkCheck: an ad request, 100 candidates of 3 caps each, 160
// distinct caps.
func BenchmarkCheck(b *testing.B) {
	benchMessage(b, &Check{Viewer: "viewer-1234567890", Now: 1_700_000_000_000, HasNow: true, Table: benchTable()})
}

// BenchmarkCheckResult: its 100 verdicts.
func BenchmarkCheckResult(b *testing.B) {
	benchMessage(b, &CheckResult{Epoch: 42, Now: 1_700_000_000_000, Verdicts: manyVerdicts(100)})
}

// BenchmarkAllow: one impression against a creative, campaign and
// advertiser cap.
func BenchmarkAllow(b *testing.B) {
	t := benchTable()
	benchMessage(b, &Allow{Viewer: "viewer-1234567890", Now: 1_700_000_000_000, HasNow: true, Caps: []fcap.Cap{t.Caps[0], t.Caps[100], t.Caps[150]}})
}

// BenchmarkRecord: a batch of 32 impressions of 3 caps each.
func BenchmarkRecord(b *testing.B) {
	t := benchTable()
	m := &Record{Items: make([]RecordItem, 32)}
	for i := range m.Items {
		m.Items[i] = RecordItem{
			Viewer:     fmt.Sprintf("viewer-%010d", i),
			Impression: fcap.Impression{ID: fmt.Sprintf("imp-%016x", i), Time: 1_700_000_000_000 + int64(i), Caps: []fcap.Cap{t.Caps[i], t.Caps[100+i/2], t.Caps[150+i/10]}},
			HasTime:    true,
		}
	}
	benchMessage(b, m)
}

// BenchmarkReaderNext: frames read from a stream, as a connection's
// requests are; the body buffer is reused, so nothing is allocated.
func BenchmarkReaderNext(b *testing.B) {
	t := benchTable()
	frame, err := AppendFrame(nil, 1, &Allow{Viewer: "viewer-1234567890", Now: 1_700_000_000_000, HasNow: true, Caps: []fcap.Cap{t.Caps[0], t.Caps[100], t.Caps[150]}})
	if err != nil {
		b.Fatal(err)
	}
	stream := bytes.Repeat(frame, 1024)
	src := bytes.NewReader(stream)
	r := NewReader(src, 0)
	b.ReportAllocs()
	b.SetBytes(int64(len(frame)))
	for i := 0; b.Loop(); i++ {
		if i%1024 == 0 {
			src.Reset(stream)
		}
		if _, _, err := r.Next(); err != nil {
			b.Fatal(err)
		}
	}
}

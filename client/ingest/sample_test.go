package ingest

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// Bad records are logged a few per reason and interval; the rest are
// summed up in one line when the interval ends.
func TestBadRecordLogIsSampled(t *testing.T) {
	var buf bytes.Buffer
	now := time.Unix(1000, 0)
	b := newBadLog(slog.New(slog.NewTextHandler(&buf, nil)), 10*time.Second, 5, func() time.Time { return now })
	for i := range 1000 {
		b.record("invalid", "offset", i)
		if i%2 == 0 {
			b.record("undecodable", "offset", i)
		}
	}
	lines := strings.Count(buf.String(), "\n")
	if lines != 10 {
		t.Fatalf("%d lines for 1500 bad records of 2 reasons, want 5 examples each:\n%s", lines, buf.String())
	}
	now = now.Add(11 * time.Second)
	buf.Reset()
	b.record("invalid", "offset", 1000)
	out := buf.String()
	if !strings.Contains(out, "bad records not logged") || !strings.Contains(out, "records=995") || !strings.Contains(out, "offset=1000") {
		t.Fatalf("after the interval: want the 995 not shown summed up and the new record shown, got:\n%s", out)
	}
}

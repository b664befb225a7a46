package ingest

import (
	"log/slog"
	"sync"
	"time"
)

// badLog samples the log of bad records: a stream with a share of bad
// records would otherwise write a line for each (one run with 3% bad
// records wrote 14,978). Per reason and interval it logs the first few
// records, each with its source and error, then, when the interval ends
// with the next bad record, one line with how many were not shown. Every
// bad record is still counted (fcap_ingest_bad_records_total) and, with a
// dead-letter topic, kept there.
type badLog struct {
	log      *slog.Logger
	interval time.Duration
	examples int // records logged per reason and interval
	now      func() time.Time

	mu sync.Mutex
	// reasons is guarded by mu.
	reasons map[string]*badReason
}

type badReason struct {
	since   time.Time // the interval's start
	shown   int       // records logged in it
	skipped int       // records counted but not logged in it
}

func newBadLog(log *slog.Logger, interval time.Duration, examples int, now func() time.Time) *badLog {
	return &badLog{log: log, interval: interval, examples: examples, now: now, reasons: map[string]*badReason{}}
}

// record notes one bad record and logs it if it is among its reason's
// first examples in the interval.
func (b *badLog) record(reason string, attrs ...any) {
	now := b.now()
	b.mu.Lock()
	r := b.reasons[reason]
	if r == nil {
		r = &badReason{since: now}
		b.reasons[reason] = r
	}
	var skipped int
	if now.Sub(r.since) >= b.interval {
		skipped, r.since, r.shown, r.skipped = r.skipped, now, 0, 0
	}
	show := r.shown < b.examples
	if show {
		r.shown++
	} else {
		r.skipped++
	}
	b.mu.Unlock()
	if skipped > 0 {
		b.log.Warn("bad records not logged (counted, and dead-lettered when configured)", "reason", reason, "records", skipped, "interval", b.interval)
	}
	if show {
		b.log.Warn("bad record", append([]any{"reason", reason}, attrs...)...)
	}
}

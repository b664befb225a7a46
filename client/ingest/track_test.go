package ingest

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// fetch builds a fetched partition of imps/0 holding offsets [from, to).
func fetch(from, to int64) kgo.FetchTopicPartition {
	p := kgo.FetchTopicPartition{Topic: "imps"}
	p.Partition = 0
	p.HighWatermark = 100
	for o := from; o < to; o++ {
		p.Records = append(p.Records, &kgo.Record{Topic: "imps", Partition: 0, Offset: o})
	}
	return p
}

// committable0 returns the offset committable for imps/0, -1 for none.
func committable0(tr *tracker) int64 {
	if eo, ok := tr.committable(nil)["imps"][0]; ok {
		return eo.Offset
	}
	return -1
}

// TestTrackerFetchWentBack: when the client's position goes back (a
// reset after data loss was detected, an offset out of range), the
// records fetched again come after higher ones in fetch order; the
// committed offset must not pass them before they are acknowledged,
// however the batches finish. A kill -9 at that moment would otherwise
// lose them: the next owner resumes past them.
func TestTrackerFetchWentBack(t *testing.T) {
	tr := newTracker()
	var high, again []*batch
	if f := tr.add(fetch(10, 20), &high, 100); f.first != 10 {
		t.Fatalf("first fetch: %+v, want first 10", f)
	}
	if f := tr.add(fetch(0, 10), &again, 100); f.prev != 20 || f.at != 0 {
		t.Fatalf("fetch back: %+v, want prev 20, at 0", f)
	}
	tr.finish(high[0])
	if got := committable0(tr); got > 0 {
		t.Fatalf("offsets 10-19 acknowledged, 0-9 in flight: committable %d, want at most 0", got)
	}
	tr.finish(again[0])
	if got := committable0(tr); got != 20 {
		t.Fatalf("everything acknowledged: committable %d, want 20", got)
	}
}

// TestTrackerOutOfOrderFinish: batches finishing out of order move the
// committed offset only over the acknowledged prefix; a gap in what was
// fetched is reported and passed.
func TestTrackerOutOfOrderFinish(t *testing.T) {
	tr := newTracker()
	var bs []*batch
	tr.add(fetch(0, 30), &bs, 10)
	if f := tr.add(fetch(35, 40), &bs, 10); f.prev != 30 || f.at != 35 {
		t.Fatalf("gap: %+v, want prev 30, at 35", f)
	}
	if len(bs) != 4 {
		t.Fatalf("%d batches, want 4", len(bs))
	}
	tr.finish(bs[1])
	tr.finish(bs[3])
	if got := committable0(tr); got != -1 {
		t.Fatalf("first batch in flight: committable %d, want none", got)
	}
	tr.finish(bs[0])
	if got := committable0(tr); got != 20 {
		t.Fatalf("committable %d, want 20", got)
	}
	tr.finish(bs[2])
	if got := committable0(tr); got != 40 {
		t.Fatalf("committable %d, want 40", got)
	}
}

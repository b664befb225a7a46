package statuspage

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/fcap-io/fcap/proto"
	"github.com/fcap-io/fcap/ring"
)

// fakeNode is a one-member cluster whose counters the test sets.
type fakeNode struct {
	ring *ring.Ring
	mu   sync.Mutex
	c    Counters
}

func (f *fakeNode) Name() string          { return "recent" }
func (f *fakeNode) Ring() *ring.Ring      { return f.ring }
func (f *fakeNode) Status() *proto.Status { return &proto.Status{Name: "recent"} }
func (f *fakeNode) Counters() Counters {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.c
}

// TestRecentFailOversOnTheStatusPage: events that make ad servers fall
// back show on the status page, step by step.
func TestRecentFailOversOnTheStatusPage(t *testing.T) {
	cfg := ring.DefaultConfig()
	r, err := ring.Build(cfg, []ring.Member{{Name: "recent", Addr: "127.0.0.1:1", State: ring.Active}})
	if err != nil {
		t.Fatal(err)
	}
	src := &fakeNode{ring: r}
	p := New(src, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	p.recent.mu.Lock()
	p.recent.last = p.counters()
	p.recent.mu.Unlock()
	p.sample() // a quiet step
	src.mu.Lock()
	src.c.BackupReads += 3
	src.c.SyncRefusals += 2
	src.mu.Unlock()
	p.sample()
	h := p.history()
	if len(h) != 2 || h[0].total() != 0 || h[1].BackupReads != 3 || h[1].SyncRefusals != 2 {
		t.Fatalf("history %+v, want a quiet step then 3 backup reads and 2 refusals", h)
	}
	d := p.data(context.Background())
	var page strings.Builder
	if err := pageTemplate.Execute(&page, d); err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(page.String(), `fill="#d62728"><title>`); got != 1 {
		t.Errorf("%d bars, want one (the quiet step draws none)", got)
	}
	if !strings.Contains(page.String(), "5 events</span>: 0 JSON API fail-open, 2 refused while syncing,\n3 backup reads") {
		t.Errorf("the page does not sum the recent events:\n%s", page.String())
	}

	// The window keeps the last recentSteps steps.
	for range recentSteps + 5 {
		p.sample()
	}
	if got := len(p.history()); got != recentSteps {
		t.Errorf("%d steps kept, want %d", got, recentSteps)
	}
}

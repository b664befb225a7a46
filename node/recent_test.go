package node

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestRecentFailOversOnTheStatusPage: events that make ad servers fall
// back show on the status page, step by step.
func TestRecentFailOversOnTheStatusPage(t *testing.T) {
	cfg := DefaultLocalConfig("recent")
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	n, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		n.Shutdown(ctx)
	})
	n.recent.mu.Lock()
	n.recent.last = n.recentCounters()
	n.recent.mu.Unlock()
	n.sampleRecent() // a quiet step
	n.metrics.backupReads.Add(3)
	n.metrics.syncingRefusals.Add(2)
	n.sampleRecent()
	h := n.recentHistory()
	if len(h) != 2 || h[0].total() != 0 || h[1].BackupReads != 3 || h[1].SyncRefusals != 2 {
		t.Fatalf("history %+v, want a quiet step then 3 backup reads and 2 refusals", h)
	}
	d := n.pageData(context.Background())
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
		n.sampleRecent()
	}
	if got := len(n.recentHistory()); got != recentSteps {
		t.Errorf("%d steps kept, want %d", got, recentSteps)
	}
}

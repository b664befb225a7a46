package regions

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
)

// Counted returns how many impressions a region counts for viewer under
// cp, as the viewer's owner answers a Check; ok is false when the owner
// did not answer (an error, a fail-open verdict or a backup's stale
// one: none of them is the region's count).
func Counted(ctx context.Context, c *client.Client, viewer string, cp fcap.Cap) (n int, ok bool) {
	res, err := c.Check(ctx, viewer, []fcap.Candidate{{Caps: []fcap.Cap{cp}}})
	if err != nil || len(res.Verdicts) != 1 {
		return 0, false
	}
	v := res.Verdicts[0]
	if v.Failed() || v.Stale {
		return 0, false
	}
	return int(cp.Limit - v.Remaining), true
}

// Record records imps for viewer through c and waits (30 s at most) until
// the region acknowledged every one; it fails the test otherwise.
func Record(t testing.TB, c *client.Client, viewer string, imps ...fcap.Impression) {
	t.Helper()
	items := make([]client.RecordItem, len(imps))
	for i, imp := range imps {
		items[i] = client.RecordItem{Viewer: viewer, Impression: imp}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i, ack := range c.RecordSync(ctx, items) {
		if ack.Err != nil {
			t.Fatalf("record %s for %s: %v", imps[i].ID, viewer, ack.Err)
		}
	}
}

// Impressions returns n impressions of cp with ids prefix-0, prefix-1...
// timed now.
func Impressions(prefix string, n int, cp fcap.Cap) []fcap.Impression {
	out := make([]fcap.Impression, n)
	for i := range out {
		out[i] = fcap.Impression{ID: fmt.Sprintf("%s-%d", prefix, i), Caps: []fcap.Cap{cp}}
	}
	return out
}

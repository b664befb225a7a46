package regions

// The tests of this file need the region link: fcapd's --region and
// --peer-region flags. On an fcapd without them each fails, naming the
// missing flag (RequireRegionFlags).

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/test/cluster"
	"github.com/fcap-io/fcap/test/wanproxy"
)

// linkedBed starts three linked regions of three nodes whose WAN has a
// one-way latency of FCAP_REGIONS_LATENCY ± FCAP_REGIONS_JITTER (40 ms ±
// 5 ms: the 80 ms ± 10 ms round trip), and a client per region.
func linkedBed(t *testing.T) (*Bed, map[string]*client.Client) {
	t.Helper()
	RequireRegionFlags(t)
	l := wanproxy.Link{
		Latency: envDuration(t, "FCAP_REGIONS_LATENCY", 40*time.Millisecond),
		Jitter:  envDuration(t, "FCAP_REGIONS_JITTER", 5*time.Millisecond),
	}
	b := Start(t, Config{Linked: true, Link: l})
	clients := map[string]*client.Client{}
	for _, r := range b.Regions {
		// No hedged reads: a backup's answer is stale (Counted takes it
		// for none), and under load a slow owner's every check was
		// hedged, so the long cut test saw region c answer none of 5,592
		// viewers for a minute. The owner's answer, however late, counts.
		clients[r.Name] = b.Client(t, r.Name, func(c *client.Config) { c.HedgeBudget = -1 })
	}
	return b, clients
}

// softCap is a soft campaign cap whose window outlasts any test and
// whose limit no test reaches.
var softCap = fcap.Cap{Scope: "campaign", ID: "regions", Limit: 1000, Window: time.Hour}

// waitCounts polls region's counts of every viewer of want (60 s at
// most) until each equals want's; a count above want fails at once (an
// impression counted twice, or one nobody recorded).
//
// A viewer seen at its count is not asked again: counts only grow inside
// softCap's window, and with thousands of viewers (a long cut) one check
// failing open under load in every pass would otherwise hold the whole
// wait until its deadline.
func waitCounts(t *testing.T, c *client.Client, region string, want map[string]int) {
	t.Helper()
	var short []string
	seen := make(map[string]bool, len(want))
	cluster.Eventually(t, 60*time.Second, func() bool {
		short = short[:0]
		for v, w := range want {
			if seen[v] {
				continue
			}
			n, ok := Counted(context.Background(), c, v, softCap)
			if ok && n > w {
				t.Fatalf("region %s counts %d for %s, more than the %d recorded", region, n, v, w)
			}
			switch {
			case !ok:
				short = append(short, v+": no answer")
			case n < w:
				short = append(short, fmt.Sprintf("%s: %d of %d", v, n, w))
			default:
				seen[v] = true
			}
		}
		return len(short) == 0
	}, "region %s did not count every impression recorded for %d viewers; short: %v", region, len(want), &short)
	// One more pass: a count that moved after it was seen (an impression
	// merged twice by a later re-ship) fails too.
	for v, w := range want {
		if n, ok := Counted(context.Background(), c, v, softCap); ok && n != w {
			t.Fatalf("region %s counts %d for %s after it counted the %d recorded", region, n, v, w)
		}
	}
}

// TestLinkedSoftRecordReachesEveryRegion (needs the region link): soft
// impressions recorded in region a, some twice (a client's retry), are
// counted in regions b and c, once each, through a WAN of 40 ms ± 5 ms
// one way; the bytes crossed the proxies.
func TestLinkedSoftRecordReachesEveryRegion(t *testing.T) {
	b, c := linkedBed(t)
	want := map[string]int{}
	for i := range 20 {
		v := fmt.Sprintf("soft-%d", i)
		imps := Impressions(v, i%3+1, softCap)
		Record(t, c["a"], v, imps...)
		Record(t, c["a"], v, imps[0]) // a replay: counted once everywhere
		want[v] = len(imps)
	}
	waitCounts(t, c["a"], "a", want)
	for _, r := range []string{"b", "c"} {
		waitCounts(t, c[r], r, want)
		if b.Carried("a", r) == 0 {
			t.Fatalf("region %s counts a's impressions but no byte crossed the a->%s proxies: the link went around the WAN", r, r)
		}
	}
}

// TestLinkedCutLosesNothing (needs the region link): the WAN between
// regions a and b is cut for FCAP_REGIONS_CUT (3 s; the issue's long
// form is 10m) while clients in a and b record soft impressions, each
// acknowledged. During the cut b's checks answer from b (no fail-open),
// a's impressions still reach c, and none reaches b; after the heal every
// region counts every acknowledged impression of every region, once.
// It logs the catch-up (heal to every region counting everything; over
// 60 s after a cut of a minute or more fails) and the checks of every
// region before (long form), during and after the cut, and (long form)
// in a single region after the test, beside an echo floor
// (cutwatch_test.go).
func TestLinkedCutLosesNothing(t *testing.T) {
	cut := envDuration(t, "FCAP_REGIONS_CUT", 3*time.Second)
	b, c := linkedBed(t)

	// The links carry before the cut.
	Record(t, c["a"], "warm-a", Impressions("warm-a", 1, softCap)...)
	Record(t, c["b"], "warm-b", Impressions("warm-b", 1, softCap)...)
	warm := map[string]int{"warm-a": 1, "warm-b": 1}
	for _, r := range []string{"a", "b", "c"} {
		waitCounts(t, c[r], r, warm)
	}

	watch := startCutWatch(t, b, cut) // checks in every region, the catch-up (cutwatch_test.go)
	b.Cut("a", "b")
	want, own := cutWrites(t, c, cut)
	fromA := map[string]int{} // a's viewers alone: b writes the others too
	for v, n := range own["a"] {
		if strings.HasPrefix(v, "cut-a-") {
			fromA[v] = n
		}
	}
	// Still cut: b answers for itself, c has a's impressions, b has none.
	waitCounts(t, c["c"], "c", fromA)
	for v := range fromA {
		n, ok := Counted(context.Background(), c["b"], v, softCap)
		if !ok {
			t.Fatalf("region b did not answer for %s during the cut", v)
		}
		if n != 0 {
			t.Fatalf("region b counts %d for %s during the cut: a's impression crossed a cut link (around the WAN proxies?)", n, v)
		}
	}
	b.Heal("a", "b")
	watch.healed(c, want)
	for _, r := range []string{"a", "b", "c"} {
		waitCounts(t, c[r], r, want)
	}
	watch.singleRegion(b)
}

// TestLinkedSameMillisecond (needs the region link): one viewer gets an
// impression in each of the three regions at the same millisecond, each
// with its own id. Every region must count all three: the issue's "a
// viewer's count in every region equals the union of all regions'
// impressions". A merge that unites sliding counters as timestamp
// multisets (each timestamp as often as the copy holding it more often,
// right for two copies of one history) counts them once; each region's
// impressions are kept in a lane of their own (engine/lane.go) and count
// apart.
func TestLinkedSameMillisecond(t *testing.T) {
	_, c := linkedBed(t)
	at := time.Now().UnixMilli()
	for _, r := range []string{"a", "b", "c"} {
		imp := Impressions("same-ms-"+r, 1, softCap)
		imp[0].Time = at
		Record(t, c[r], "same-ms", imp...)
	}
	for _, r := range []string{"a", "b", "c"} {
		waitCounts(t, c[r], r, map[string]int{"same-ms": 3})
	}
}

// cutWrites records, for d, what TestLinkedCutLosesNothing records during
// its cut: every 100 ms two impressions of a new viewer in region a, one
// of a new viewer in b, and one in each of a and b of a viewer both
// write. It returns every acknowledged impression by viewer (the union
// of the regions) and each region's own.
func cutWrites(t *testing.T, c map[string]*client.Client, d time.Duration) (want map[string]int, own map[string]map[string]int) {
	t.Helper()
	want = map[string]int{}
	own = map[string]map[string]int{"a": {}, "b": {}}
	tick := time.NewTicker(100 * time.Millisecond) // pacing the writers, not waiting
	defer tick.Stop()
	for i, end := 0, time.Now().Add(d); time.Now().Before(end); i++ {
		va, vb := fmt.Sprintf("cut-a-%d", i), fmt.Sprintf("cut-b-%d", i)
		Record(t, c["a"], va, Impressions(va, 2, softCap)...)
		Record(t, c["b"], vb, Impressions(vb, 1, softCap)...)
		// One viewer written on both sides of the cut: its count is the
		// union. a's impressions at even milliseconds, b's at odd ones:
		// two at one millisecond are TestLinkedSameMillisecond's case.
		ia := Impressions(fmt.Sprintf("both-a-%d", i), 1, softCap)
		ib := Impressions(fmt.Sprintf("both-b-%d", i), 1, softCap)
		now := time.Now().UnixMilli()
		ia[0].Time, ib[0].Time = now-now%2, now-now%2+1
		// A new such viewer every 100 rounds keeps its count (200) under
		// softCap's limit in a cut of any length: Counted reads the
		// count off Remaining, which stops at the limit.
		both := fmt.Sprintf("cut-both-%d", i/100)
		Record(t, c["a"], both, ia...)
		Record(t, c["b"], both, ib...)
		want[va], want[vb] = 2, 1
		want[both] += 2
		own["a"][va], own["b"][vb] = 2, 1
		own["a"][both]++
		own["b"][both]++
		<-tick.C
	}
	return want, own
}

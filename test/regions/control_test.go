package regions

import (
	"testing"
	"time"

	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/test/wanproxy"
)

// TestSeparateRegionsUnderCutLoad is the control of
// TestLinkedCutLosesNothing's long form (FCAP_REGIONS_CUT of a minute or
// more; with a shorter one it has nothing to measure and skips): the
// same nine nodes, the same writes (cutWrites) and checks and load
// (FCAP_REGIONS_CUT_LOAD), for as long, but the three regions are not
// linked, so each is a single-region deployment. The issue asks that the
// checks during a cut be within noise of a single-region run; the cut
// test's own single-region phase is 30 s of a fresh bed, while the cut's
// state grows for its whole length on a machine the nine nodes share.
// It logs the checks' figures beside the echo floor, as the cut test
// does, and fails if a region does not count its own writes.
func TestSeparateRegionsUnderCutLoad(t *testing.T) {
	cut := envDuration(t, "FCAP_REGIONS_CUT", 3*time.Second)
	if cut < cutLong {
		t.Skipf("the control of a cut of %v or more (FCAP_REGIONS_CUT=%v)", cutLong, cut)
	}
	b := Start(t, Config{Link: wanproxy.Link{
		Latency: envDuration(t, "FCAP_REGIONS_LATENCY", 40*time.Millisecond),
		Jitter:  envDuration(t, "FCAP_REGIONS_JITTER", 5*time.Millisecond),
	}})
	c := map[string]*client.Client{}
	for _, r := range b.Regions {
		c[r.Name] = b.Client(t, r.Name, func(c *client.Config) { c.HedgeBudget = -1 }) // as linkedBed's
	}
	w := newCutWatch(t, b, cut, startEcho(t), "before (the cut test's 'before the cut')")
	time.Sleep(cutBaseline(cut)) // a window of measurement
	w.setPhase("the cut's length, regions not linked")
	_, own := cutWrites(t, c, cut)
	w.close()
	w.stopLoads()
	w.log()
	for _, r := range []string{"a", "b"} {
		waitCounts(t, c[r], r, own[r])
	}
}

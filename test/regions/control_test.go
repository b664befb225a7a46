package regions

import (
	"testing"
	"time"

	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/test/wanproxy"
)

// The controls of TestLinkedCutLosesNothing's long form (FCAP_REGIONS_CUT
// of a minute or more; with a shorter one they have nothing to measure
// and skip). Each runs the same nine nodes, the same writes (cutWrites),
// checks and load (FCAP_REGIONS_CUT_LOAD), for as long, with no cut:
//
//   - TestSeparateRegionsUnderCutLoad: the regions are not linked, so
//     each is a single-region deployment. The issue asks that the checks
//     during a cut be within noise of a single-region run; the cut
//     test's own single-region phase is 30 s of a fresh bed, while the
//     cut's state grows for its whole length on a machine the nine nodes
//     share.
//   - TestLinkedUncutUnderCutLoad: the regions are linked and the WAN
//     stays whole. Beside the cut test it tells what the cut costs the
//     checks from what linking costs them: on one machine every node of
//     every region also merges the other regions' impressions, cut or
//     not.
//
// Each logs the checks' figures beside the echo floor, as the cut test
// does, and fails if a region does not count its own writes.
func TestSeparateRegionsUnderCutLoad(t *testing.T) { cutControl(t, false) }

// TestLinkedUncutUnderCutLoad: see TestSeparateRegionsUnderCutLoad.
func TestLinkedUncutUnderCutLoad(t *testing.T) { cutControl(t, true) }

// cutControl runs a control of the cut test: linked, or not.
func cutControl(t *testing.T, linked bool) {
	cut := envDuration(t, "FCAP_REGIONS_CUT", 3*time.Second)
	if cut < cutLong {
		t.Skipf("the control of a cut of %v or more (FCAP_REGIONS_CUT=%v)", cutLong, cut)
	}
	var b *Bed
	c := map[string]*client.Client{}
	phase := "the cut's length, regions not linked"
	if linked {
		b, c = linkedBed(t)
		phase = "the cut's length, regions linked, no cut"
	} else {
		b = Start(t, Config{Link: wanproxy.Link{
			Latency: envDuration(t, "FCAP_REGIONS_LATENCY", 40*time.Millisecond),
			Jitter:  envDuration(t, "FCAP_REGIONS_JITTER", 5*time.Millisecond),
		}})
		for _, r := range b.Regions {
			c[r.Name] = b.Client(t, r.Name, func(c *client.Config) { c.HedgeBudget = -1 }) // as linkedBed's
		}
	}
	w := newCutWatch(t, b, cut, startEcho(t), "before (the cut test's 'before the cut')")
	time.Sleep(cutBaseline(cut)) // a window of measurement
	w.setPhase(phase)
	want, own := cutWrites(t, c, cut)
	w.close()
	w.stopLoads()
	w.log()
	if !linked {
		for _, r := range []string{"a", "b"} {
			waitCounts(t, c[r], r, own[r])
		}
		return
	}
	for _, r := range []string{"a", "b", "c"} {
		waitCounts(t, c[r], r, want) // linked: every region counts every region's writes
	}
}

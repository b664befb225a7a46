package gossip

import (
	"math"
	"testing"
	"time"

	"github.com/fcap-io/fcap/ring"
	"github.com/hashicorp/memberlist"
)

// detectionBound is the longest memberlist can take, with the config's
// timings and a healthy prober, to declare a killed member of an n-node
// cluster dead: until a survivor's round-robin probe reaches it (n-1
// probe intervals at most), the probe's own interval, then the
// suspicion timeout with no confirmations expected.
func detectionBound(probe time.Duration, suspicionMult, n int) time.Duration {
	scale := math.Max(1, math.Log10(float64(n)))
	suspicion := time.Duration(float64(suspicionMult) * scale * float64(probe))
	return time.Duration(n-1)*probe + probe + suspicion
}

// TestLANFailureDetectionBudget holds the production gossip timings to
// the failover the design promises (within 2 s of a kill, client
// included): a dead member of a small cluster leaves every ring well
// inside it. memberlist's own LAN defaults need up to 7 s here.
func TestLANFailureDetectionBudget(t *testing.T) {
	ml := DefaultConfig(ring.Member{Name: "n1"}).Memberlist
	if ml.SuspicionMult-2 > 0 {
		// Confirmations expected: the timeout starts at
		// SuspicionMaxTimeoutMult times the minimum until they arrive.
		t.Errorf("SuspicionMult %d expects confirmations; a 3-node cluster has none to give", ml.SuspicionMult)
	}
	if ml.ProbeTimeout >= ml.ProbeInterval {
		t.Errorf("ProbeTimeout %v leaves no time for indirect probes in a %v interval", ml.ProbeTimeout, ml.ProbeInterval)
	}
	if ml.GossipInterval > ml.ProbeInterval {
		t.Errorf("GossipInterval %v: a suspected member hears of it too late to refute", ml.GossipInterval)
	}
	for _, n := range []int{3, 5} {
		if d := detectionBound(ml.ProbeInterval, ml.SuspicionMult, n); d > 1500*time.Millisecond {
			t.Errorf("%d nodes: a dead member may stay in the ring %v", n, d)
		}
	}
	// The suspicion leaves a live member time to refute: gossip out to it
	// and back, twice over.
	if s := time.Duration(ml.SuspicionMult) * ml.ProbeInterval; s < 4*ml.GossipInterval {
		t.Errorf("suspicion %v is under four gossip intervals (%v)", s, ml.GossipInterval)
	}
}

// TestMetaFitsMemberlist: the ring's metadata bound is memberlist's, so
// no metadata the ring accepts makes memberlist panic.
func TestMetaFitsMemberlist(t *testing.T) {
	if ring.MaxMetaSize != memberlist.MetaMaxSize {
		t.Fatalf("ring.MaxMetaSize = %d, memberlist.MetaMaxSize = %d", ring.MaxMetaSize, memberlist.MetaMaxSize)
	}
}

// TestGossipUncompressed: the LAN and local profiles send packets as
// they are; memberlist's default compression makes a fresh LZW writer per
// packet, garbage whose GC cycles stall the core that answers checks.
func TestGossipUncompressed(t *testing.T) {
	self := ring.Member{Name: "n1"}
	for name, ml := range map[string]*memberlist.Config{
		"lan":   DefaultConfig(self).Memberlist,
		"local": DefaultLocalConfig(self).Memberlist,
	} {
		if ml.EnableCompression {
			t.Errorf("%s profile compresses gossip", name)
		}
	}
}

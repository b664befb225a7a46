package gossip

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves a goroutine behind:
// Membership's own, or memberlist's after Shutdown. The one exception is
// a probe memberlist had in flight: its Shutdown does not wait for
// probeNode, which ends at its own timeouts (the TCP fallback's
// included), sometimes after goleak stopped retrying.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/hashicorp/memberlist.(*Memberlist).probeNode"))
}

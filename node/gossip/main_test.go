package gossip

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves a goroutine behind:
// Membership's own, or memberlist's after Shutdown.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

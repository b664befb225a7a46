package regions

import (
	"os"
	"testing"

	"github.com/fcap-io/fcap/test/cluster"
)

// TestMain builds fcapd without the race detector unless
// FCAP_REGIONS_RACE=1: nine race-built nodes on two shared cores answer
// so late that the timings these tests watch mean nothing.
func TestMain(m *testing.M) {
	if os.Getenv("FCAP_REGIONS_RACE") != "1" {
		os.Setenv("FCAP_TEST_NORACE", "1")
	}
	cluster.Main(m)
}

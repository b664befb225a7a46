// Package e2e drives real fcapd processes on loopback through the client
// and fcapctl.
package e2e

import (
	"os"
	"testing"

	"github.com/fcap-io/fcap/test/cluster"
)

func TestMain(m *testing.M) {
	code := m.Run()
	cluster.Cleanup()
	os.Exit(code)
}

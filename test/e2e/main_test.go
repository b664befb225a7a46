// Package e2e drives real fcapd processes on loopback through the client
// and fcapctl.
package e2e

import (
	"testing"

	"github.com/fcap-io/fcap/test/cluster"
)

func TestMain(m *testing.M) { cluster.Main(m) }

// Package security drives real fcapd processes on loopback to show what
// access control refuses: gossip from nodes without the cluster's key,
// and (with fcapctl) key rotation on a running cluster.
package security

import (
	"testing"

	"github.com/fcap-io/fcap/test/cluster"
)

func TestMain(m *testing.M) { cluster.Main(m) }

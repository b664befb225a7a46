// Package hostile_test throws hostile input at a real fcapd process:
// garbage, lying lengths, oversized requests, connection floods, slow
// readers and slowloris writers. Each attack must end in a clear error
// or a closed connection while the node keeps serving a well-behaved
// client and its memory stays bounded.
package hostile_test

import (
	"os"
	"testing"

	"github.com/fcap-io/fcap/test/cluster"
)

func TestMain(m *testing.M) {
	if addr := os.Getenv(attackerEnv); addr != "" {
		runAttacker(addr, os.Getenv(attackerEnv+"_HEAD"))
	}
	cluster.Main(m)
}

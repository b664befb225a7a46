package replication

import (
	"testing"

	"go.uber.org/goleak"
)

// Every sender and loop a test starts is stopped and waited for.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

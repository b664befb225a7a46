package region

import (
	"testing"

	"go.uber.org/goleak"
)

// Every shipper and catch-up a test starts is stopped and waited for.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

package chaos

import (
	"testing"

	"github.com/fcap-io/fcap/test/cluster"
)

func TestMain(m *testing.M) { cluster.Main(m) }

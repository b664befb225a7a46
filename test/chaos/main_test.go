package chaos

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

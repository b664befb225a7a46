//go:build linux

package partition

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/fcap-io/fcap/test/cluster"
)

// The binaries every run uses, built once per test binary on first use
// (the checker's unit tests need none) and removed by TestMain (those
// prebuilt in FCAP_TEST_BIN stay).
var (
	buildOnce sync.Once
	buildDir  string // empty when every binary was prebuilt
	built     binaries
	buildErr  error
)

type binaries struct{ fcapd, fcapctl, driver string }

func TestMain(m *testing.M) {
	// Namespaces a crashed earlier run left behind go first.
	if removed, err := Sweep(); err != nil {
		fmt.Fprintf(os.Stderr, "partition: sweeping stale namespaces: %v\n", err)
	} else if len(removed) > 0 {
		fmt.Fprintf(os.Stderr, "partition: removed stale namespaces %v\n", removed)
	}
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// build compiles fcapd, fcapctl and the driver once, or takes those
// built beforehand in the folder FCAP_TEST_BIN names (cluster.Prebuilt).
// fcapd is built without the race detector unless FCAP_PARTITION_RACE=1:
// on two shared cores the detector's slowdown would turn into timeouts
// the nemesis did not cause.
func build(t *testing.T) binaries {
	t.Helper()
	buildOnce.Do(func() {
		var root string
		// Each from its module's folder, so the build works with the
		// repository's go.work and without it (GOWORK=off).
		for _, b := range []struct {
			dir, pkg, name string
			path           *string
		}{
			{"cmd", "./fcapd", "fcapd", &built.fcapd},
			{"cmd", "./fcapctl", "fcapctl", &built.fcapctl},
			{"test", "./partition/driver", "partition-driver", &built.driver},
		} {
			race := b.name == "fcapd" && os.Getenv("FCAP_PARTITION_RACE") == "1"
			path, ok, err := cluster.Prebuilt(b.name, race)
			if err != nil {
				buildErr = err
				return
			}
			if ok {
				*b.path = path
				continue
			}
			if buildDir == "" {
				if buildDir, buildErr = os.MkdirTemp("", "fcap-partition-bin-"); buildErr != nil {
					return
				}
				if root, buildErr = cluster.RepoRoot(); buildErr != nil {
					return
				}
			}
			*b.path = filepath.Join(buildDir, filepath.Base(b.pkg))
			args := []string{"build", "-o", *b.path}
			if race {
				args = append(args, "-race")
			}
			cmd := exec.Command("go", append(args, b.pkg)...)
			cmd.Dir = filepath.Join(root, b.dir)
			if out, err := cmd.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("go build %s: %v\n%s", b.pkg, err, out)
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return built
}

// requireNetns skips the test, or fails it when FCAP_REQUIRE_NETNS=1
// (CI), unless this process can create network namespaces and cut links
// with tc.
func requireNetns(t *testing.T) {
	t.Helper()
	why := ""
	switch {
	case os.Geteuid() != 0:
		why = "not root"
	default:
		nt, err := NewNet("probe", 2)
		if err != nil {
			why = err.Error()
			break
		}
		if err := nt.SetCuts([]Link{{1, 2}}); err != nil {
			why = err.Error()
		} else if err := nt.Heal(); err != nil {
			why = err.Error()
		}
		if err := nt.Close(); err != nil && why == "" {
			why = err.Error()
		}
	}
	if why == "" {
		return
	}
	msg := "the partition suite needs root, `ip netns` and tc (HTB, u32) to build its test network: " + why
	if os.Getenv("FCAP_REQUIRE_NETNS") == "1" {
		t.Fatal(msg + " (FCAP_REQUIRE_NETNS=1)")
	}
	t.Skip(msg + " (set FCAP_REQUIRE_NETNS=1 to make this a failure)")
}

// Package testwait waits in tests for a condition to hold, polling with a
// deadline instead of sleeping a fixed time. It imports nothing of fcap,
// so the tests of every module (the library's, node's, test/'s) and the
// internal tests of node's own packages can share it without an import
// cycle.
package testwait

import (
	"testing"
	"time"
)

// Eventually polls cond every 20ms until it holds or the deadline passes,
// then fails the test with the message.
func Eventually(t testing.TB, timeout time.Duration, cond func() bool, format string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: "+format, append([]any{timeout}, args...)...)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

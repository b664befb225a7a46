package node_test

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/fcap-io/fcap/node"
	"github.com/fcap-io/fcap/node/nodetest"
)

// TestReadyIsLoggedWhenReady: "fcapd ready" was logged as soon as the
// listeners were bound, before "active: holding every partition it
// owns" (and by a node that never joined). The bound addresses are
// "fcapd listening"; "fcapd ready" follows the activation, once.
func TestReadyIsLoggedWhenReady(t *testing.T) {
	var logs nodetest.LogBuffer
	nodes := nodetest.SettledCluster(t, "order", 2, func(cfg *node.Config) {
		cfg.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	})
	msgs := func(name string) []string {
		var out []string
		for _, line := range strings.Split(logs.String(), "\n") {
			var l struct{ Msg, Node string }
			if json.Unmarshal([]byte(line), &l) == nil && l.Node == name {
				out = append(out, l.Msg)
			}
		}
		return out
	}
	index := func(ms []string, msg string) int {
		for i, m := range ms {
			if m == msg {
				return i
			}
		}
		return -1
	}
	for _, nd := range nodes {
		var ms []string
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if ms = msgs(nd.Name()); index(ms, "fcapd ready") >= 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s never logged fcapd ready, though Ready() is %v:\n%s", nd.Name(), nd.Ready(), strings.Join(ms, "\n"))
			}
		}
		listening, active, ready := index(ms, "fcapd listening"), index(ms, "active: holding every partition it owns"), index(ms, "fcapd ready")
		if listening < 0 || active < 0 || !(listening < active && active < ready) {
			t.Errorf("%s logged fcapd listening at %d, active at %d, fcapd ready at %d; want them in that order:\n%s", nd.Name(), listening, active, ready, strings.Join(ms, "\n"))
		}
		n := 0
		for _, m := range ms {
			if m == "fcapd ready" {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%s logged fcapd ready %d times", nd.Name(), n)
		}
	}
}

// Package clienttest holds the client's tests that need a running node
// (in this process, from node/nodetest). They cannot live beside the
// client: its tests would make the library module require the node
// module. The client's unit tests (against scripted fake nodes) stay in
// client/.
package clienttest

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// generous is the deadline of every call, dial and Record batch a test
// makes unless the test is about deadlines: a busy machine running the
// race detector may take far longer than the client's defaults (a 5 ms
// call, a 250 ms dial or batch) to answer, and a call that fails open
// there is a verdict where the test expects the node's answer.
const generous = 10 * time.Second

// newClient builds a client with generous deadlines (see generous); a
// test about deadlines sets its own in mutate.
func newClient(t testing.TB, mutate func(*client.Config), seeds ...string) *client.Client {
	t.Helper()
	cfg := client.DefaultConfig(seeds...)
	cfg.Logger = quiet
	cfg.Timeout, cfg.DialTimeout, cfg.RecordTimeout = generous, generous, generous
	if mutate != nil {
		mutate(&cfg)
	}
	c, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c.Close(ctx)
	})
	return c
}

var soft = fcap.Cap{Scope: "campaign", ID: "soft", Limit: 3, Window: time.Second}

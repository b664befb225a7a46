package client_test

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
)

// A call the failure policy answered leaves its CallTrace zero: no node
// answered it.
func TestCallTraceOfAFailOpen(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there: no node can answer
	c := newClient(t, func(cfg *client.Config) { cfg.Timeout = 200 * time.Millisecond }, addr)
	var tr client.CallTrace
	var res client.CheckResult
	if err := c.CheckInto(client.WithCallTrace(context.Background(), &tr), "traced", []fcap.Candidate{{Caps: []fcap.Cap{soft}}}, &res); !errors.Is(err, client.ErrUnavailable) {
		t.Fatalf("a check no node ever answered: %v, want ErrUnavailable beside the verdicts", err)
	}
	if !res.Verdicts[0].Failed() {
		t.Fatalf("a check no node could answer was answered: %+v", res.Verdicts[0])
	}
	if tr != (client.CallTrace{}) {
		t.Errorf("a fail-open filled the trace: %+v", tr)
	}
}

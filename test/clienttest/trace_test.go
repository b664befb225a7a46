package clienttest

import (
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
)

// TestCallTraceOfACheckAndAnAllow: a check and an Allow given a
// CallTrace fill it in with their request's way through the client, in
// order, inside the call, naming the node that answered.
func TestCallTraceOfACheckAndAnAllow(t *testing.T) {
	nd, c, ctx := readySolo(t)
	check := func(tr *client.CallTrace) error {
		var res client.CheckResult
		err := c.CheckInto(client.WithCallTrace(ctx, tr), "traced", []fcap.Candidate{{Caps: []fcap.Cap{soft}}}, &res)
		if err == nil && res.Verdicts[0].Failed() {
			t.Errorf("the node's answer was not used: %+v", res.Verdicts[0])
		}
		return err
	}
	allow := func(tr *client.CallTrace) error {
		v, err := c.Allow(client.WithCallTrace(ctx, tr), "traced", []fcap.Cap{soft})
		if err == nil && v.Failed() {
			t.Errorf("the node's answer was not used: %+v", v)
		}
		return err
	}
	for name, call := range map[string]func(*client.CallTrace) error{"check": check, "allow": allow} {
		var tr client.CallTrace
		before := time.Now()
		if err := call(&tr); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		after := time.Now()
		steps := []time.Time{before, tr.Queued, tr.Writing, tr.Read, tr.Resumed, after}
		for i := 1; i < len(steps); i++ {
			if steps[i].Before(steps[i-1]) {
				t.Errorf("%s: the trace is out of order or missing a step (call began, Queued, Writing, Read, Resumed, returned): %v", name, steps)
				break
			}
		}
		if !tr.Written.IsZero() && (tr.Written.Before(tr.Writing) || tr.Written.After(after)) {
			t.Errorf("%s: Written %v is outside its write (began %v) and the call", name, tr.Written, tr.Writing)
		}
		if tr.Node != nd.DataAddr() || tr.Backup {
			t.Errorf("%s: answered by %q (backup %v), want the owner %s", name, tr.Node, tr.Backup, nd.DataAddr())
		}
	}
}

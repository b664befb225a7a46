package clienttest

import (
	"context"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
)

// TestRecordZeroTimeIsNow: an impression without a time is counted now
// (the client stamps it), not at tick 0, where it would be long expired.
func TestRecordZeroTimeIsNow(t *testing.T) {
	nd := soloNode(t, "zero-time")
	c := newClient(t, nil, nd.DataAddr())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	hour := fcap.Cap{Scope: "campaign", ID: "zero-time", Limit: 3, Window: time.Hour}
	if err := c.Record("v", fcap.Impression{ID: "no-time", Caps: []fcap.Cap{hour}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	res, err := c.Check(ctx, "v", []fcap.Candidate{{Caps: []fcap.Cap{hour}}})
	if err != nil {
		t.Fatal(err)
	}
	if v := res.Verdicts[0]; v.Failed() || v.Remaining != 2 {
		t.Errorf("after one impression without a time: %+v, want 2 of 3 left", v)
	}
}

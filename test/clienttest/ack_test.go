package clienttest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
)

// TestRecordSyncAgainstANode: an impression counts once, however often
// it is sent.
func TestRecordSyncAgainstANode(t *testing.T) {
	nd := soloNode(t, "solo")
	c := newClient(t, nil, nd.DataAddr())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	capc := fcap.Cap{Scope: "campaign", ID: "sync", Limit: 10, Window: time.Hour}
	now := time.Now().UnixMilli()
	items := []client.RecordItem{
		{Viewer: "a", Impression: fcap.Impression{ID: "1", Time: now, Caps: []fcap.Cap{capc}}},
		{Viewer: "b", Impression: fcap.Impression{ID: "2", Time: now, Caps: []fcap.Cap{capc}}},
	}
	for round, want := range []fcap.RecordStatus{fcap.Recorded, fcap.Duplicate} {
		for i, a := range c.RecordSync(ctx, items) {
			if a.Err != nil || a.Status != want {
				t.Fatalf("round %d item %d: %+v, want %v", round, i, a, want)
			}
		}
	}
	v, err := c.Allow(ctx, "a", []fcap.Cap{capc})
	if err != nil || v.Remaining != 8 {
		t.Fatalf("Allow after the impression recorded twice: %+v, %v; want 8 remaining (counted once)", v, err)
	}
}

// TestRecordSyncStressCountsWhatItAcknowledges: many RecordSync calls at
// once against a real node, with a request deadline so short that many
// attempts time out and are retried while their first answer is still on
// the way: every impression acknowledged is counted, once.
func TestRecordSyncStressCountsWhatItAcknowledges(t *testing.T) {
	nd := soloNode(t, "stress")
	reg := prometheus.NewRegistry()
	c := newClient(t, func(c *client.Config) {
		c.Registerer = reg
		c.RecordTimeout = 5 * time.Millisecond
		c.RecordRetryMin, c.RecordRetryMax = time.Millisecond, 5*time.Millisecond
	}, nd.DataAddr())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	capOf := fcap.Cap{Scope: "campaign", ID: "c", Limit: fcap.MaxLimit, Window: time.Hour}
	const viewers, workers, batches, batchSize = 50, 4, 15, 100
	now := time.Now().UnixMilli()
	var failed atomic.Int32
	done := make(chan struct{})
	for w := range workers {
		go func() {
			defer func() { done <- struct{}{} }()
			for b := range batches {
				items := make([]client.RecordItem, batchSize)
				for i := range items {
					n := (w*batches+b)*batchSize + i
					items[i] = client.RecordItem{Viewer: fmt.Sprint("v", n%viewers), Impression: fcap.Impression{ID: fmt.Sprint("imp-", n), Time: now, Caps: []fcap.Cap{capOf}}}
				}
				for i, a := range c.RecordSync(ctx, items) {
					if a.Err != nil && failed.Add(1) <= 5 {
						t.Errorf("%s: %v", items[i].Impression.ID, a.Err)
					}
				}
			}
		}()
	}
	for range workers {
		<-done
	}
	if failed.Load() > 0 {
		t.Fatalf("%d impressions not acknowledged", failed.Load())
	}
	retries := 0.0
	if mfs, err := reg.Gather(); err == nil {
		for _, mf := range mfs {
			if mf.GetName() == "fcap_client_record_retries_total" {
				retries = mf.GetMetric()[0].GetCounter().GetValue()
			}
		}
	}
	t.Logf("%v attempts retried", retries)
	want := workers * batches * batchSize / viewers
	check := newClient(t, nil, nd.DataAddr())
	for v := range viewers {
		res, err := check.Check(ctx, fmt.Sprint("v", v), []fcap.Candidate{{Caps: []fcap.Cap{capOf}}}, client.At(now))
		if err != nil {
			t.Fatal(err)
		}
		if got := fcap.MaxLimit - res.Verdicts[0].Remaining; got != int64(want) {
			t.Errorf("v%d: counted %d, acknowledged %d", v, got, want)
		}
	}
}

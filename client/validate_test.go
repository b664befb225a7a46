package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/proto"
)

// TestRecordRefusesInvalidAtOnce: an impression the owner would refuse
// is an error from Record, naming the field and what is accepted, and
// nothing is queued. No node is needed to judge it: the cluster here is
// dead.
func TestRecordRefusesInvalidAtOnce(t *testing.T) {
	c := newClient(t, shortDial, deadCluster(t))
	good := fcap.Cap{Scope: "campaign", ID: "c", Limit: 3, Window: time.Hour}
	for _, tc := range []struct {
		name   string
		viewer string
		imp    fcap.Impression
		is     error
		says   string
	}{
		{"unknown scope", "v", fcap.Impression{ID: "i", Caps: []fcap.Cap{{Scope: "placement", ID: "p", Limit: 1, Window: time.Second}}},
			fcap.ErrUnknownScope, `"placement" (accepted: creative, campaign, advertiser)`},
		{"viewer too long", strings.Repeat("v", 300), fcap.Impression{ID: "i", Caps: []fcap.Cap{good}},
			fcap.ErrIDTooLong, "viewer is 300 bytes, at most 256"},
		{"empty viewer", "", fcap.Impression{ID: "i", Caps: []fcap.Cap{good}}, fcap.ErrEmptyViewer, "viewer"},
		{"no id", "v", fcap.Impression{Caps: []fcap.Cap{good}}, fcap.ErrEmptyImpressionID, "impression id"},
		{"no caps", "v", fcap.Impression{ID: "i"}, fcap.ErrNoCaps, "no caps"},
		{"limit 0", "v", fcap.Impression{ID: "i", Caps: []fcap.Cap{good, {Scope: "creative", ID: "c", Window: time.Second}}},
			fcap.ErrBadLimit, "cap 1: invalid request: cap limit must be between 1 and 65535, got 0"},
		{"negative time", "v", fcap.Impression{ID: "i", Time: -1, Caps: []fcap.Cap{good}}, fcap.ErrBadTime, "impression time"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := c.Record(tc.viewer, tc.imp)
			if !errors.Is(err, client.ErrBadRequest) || !errors.Is(err, fcap.ErrInvalid) || !errors.Is(err, tc.is) {
				t.Fatalf("Record = %v, want an error wrapping ErrBadRequest, fcap.ErrInvalid and %v", err, tc.is)
			}
			if !strings.Contains(err.Error(), tc.says) {
				t.Errorf("Record = %q, want it to say %q", err, tc.says)
			}
			if err := c.RecordDevice(tc.viewer, tc.imp); !errors.Is(err, tc.is) {
				t.Errorf("RecordDevice = %v, want %v", err, tc.is)
			}
		})
	}
	if st := c.Stats(); st.RecordsQueued != 0 {
		t.Errorf("%d invalid impressions were queued", st.RecordsQueued)
	}
}

// TestRecordLimitsFollowTheConfig: Config.Limits are the cluster's
// (fcapd --scopes, --max-id-length).
func TestRecordLimitsFollowTheConfig(t *testing.T) {
	c := newClient(t, func(cfg *client.Config) {
		shortDial(cfg)
		cfg.RecordAttempts = 1 // nothing to deliver to: drop at once
		cfg.Limits = fcap.Limits{Scopes: []string{"placement"}, MaxIDLength: 9}
	}, deadCluster(t))
	placement := fcap.Cap{Scope: "placement", ID: "p", Limit: 1, Window: time.Second}
	// The cluster is dead: a valid impression is queued, and the error
	// says only that no node was ever reached.
	if err := c.Record("v", fcap.Impression{ID: "i", Caps: []fcap.Cap{placement}}); err != nil && !errors.Is(err, client.ErrUnavailable) {
		t.Errorf("a configured scope: %v", err)
	}
	err := c.Record("v", fcap.Impression{ID: "i", Caps: []fcap.Cap{{Scope: "campaign", ID: "c", Limit: 1, Window: time.Second}}})
	if !errors.Is(err, fcap.ErrUnknownScope) || !strings.Contains(err.Error(), "accepted: placement") {
		t.Errorf("a scope not configured: %v", err)
	}
	if err := c.Record("viewer-100", fcap.Impression{ID: "i", Caps: []fcap.Cap{placement}}); !errors.Is(err, fcap.ErrIDTooLong) {
		t.Errorf("a 10-byte viewer with MaxIDLength 9: %v", err)
	}
	any := newClient(t, func(cfg *client.Config) {
		shortDial(cfg)
		cfg.RecordAttempts = 1
		cfg.Limits.AnyScope = true
	}, deadCluster(t))
	if err := any.Record("v", fcap.Impression{ID: "i", Caps: []fcap.Cap{{Scope: "anything", ID: "c", Limit: 1, Window: time.Second}}}); err != nil && !errors.Is(err, client.ErrUnavailable) {
		t.Errorf("AnyScope: %v", err)
	}
}

// TestZeroTimeIsStampedOnce: an impression without a time is stamped
// with the client's clock when Record is called, and every attempt
// carries that one time, so copies of it (a retry, a backup standing in
// for the owner) are one impression to a merge, not two at two times.
func TestZeroTimeIsStampedOnce(t *testing.T) {
	type attempt struct {
		has  bool
		time int64
	}
	attempts := make(chan attempt, 10)
	f := startRecordFake(t, func(m *proto.Record) proto.Message {
		if len(m.Items) != 1 {
			return nil
		}
		attempts <- attempt{m.Items[0].HasTime, m.Items[0].Impression.Time}
		res := &proto.RecordResult{Results: []proto.ItemResult{{Status: fcap.Recorded}}}
		if len(attempts) == 1 { // the first attempt: the owner is busy, try again
			res.Results[0] = proto.ItemResult{Code: proto.CodeOverloaded}
		}
		return res
	})
	c := newClient(t, func(cfg *client.Config) {
		cfg.RecordRetryMin, cfg.RecordRetryMax = time.Millisecond, 2*time.Millisecond
	}, f.addr())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	before := time.Now().UnixMilli()
	if err := c.Record("v", fcap.Impression{ID: "no-time", Caps: []fcap.Cap{soft}}); err != nil {
		t.Fatal(err)
	}
	after := time.Now().UnixMilli()
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	first, second := <-attempts, <-attempts
	if !first.has || first.time < before || first.time > after {
		t.Errorf("first attempt: %+v, want the time of the Record call, in [%d, %d]", first, before, after)
	}
	if second != first {
		t.Errorf("the retry carried %+v, the first attempt %+v: want one time", second, first)
	}
}

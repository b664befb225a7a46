package client_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/proto"
)

// TestRecordSyncRetriesUntilAnswered: failures are retried past
// RecordAttempts until the owner answers; refusals come back as errors
// that say retrying cannot help.
func TestRecordSyncRetriesUntilAnswered(t *testing.T) {
	var attempts atomic.Int32
	f := startRecordFake(t, func(m *proto.Record) proto.Message {
		res := &proto.RecordResult{Epoch: 42}
		overloaded := attempts.Add(1) <= 5
		for _, it := range m.Items {
			switch {
			case it.Impression.ID == "bad":
				res.Results = append(res.Results, proto.ItemResult{Code: proto.CodeBadRequest})
			case it.Impression.ID == "future":
				res.Results = append(res.Results, proto.ItemResult{Code: proto.CodeFutureTime})
			case overloaded:
				res.Results = append(res.Results, proto.ItemResult{Code: proto.CodeOverloaded})
			default:
				res.Results = append(res.Results, proto.ItemResult{Status: fcap.Duplicate})
			}
		}
		return res
	})
	c := newClient(t, func(c *client.Config) { c.RecordRetryMin, c.RecordAttempts = time.Millisecond, 2 }, f.addr())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	imp := func(id string) client.RecordItem {
		return client.RecordItem{Viewer: "v", Impression: fcap.Impression{ID: id, Time: 5, Caps: []fcap.Cap{soft}}}
	}
	acks := c.RecordSync(ctx, []client.RecordItem{imp("ok"), imp("bad"), imp("future")})
	if acks[0].Err != nil || acks[0].Status != fcap.Duplicate {
		t.Errorf("ok: %+v after %d attempts, want acknowledged as a duplicate", acks[0], attempts.Load())
	}
	if !client.IsRefused(acks[1].Err) || !errors.Is(acks[1].Err, client.ErrBadRequest) {
		t.Errorf("bad: %v, want a refusal wrapping ErrBadRequest", acks[1].Err)
	}
	if !client.IsRefused(acks[2].Err) || !errors.Is(acks[2].Err, client.ErrFutureTime) {
		t.Errorf("future: %v, want a refusal wrapping ErrFutureTime", acks[2].Err)
	}
}

// TestRecordSyncUnacknowledged: with no cluster, RecordSync returns when
// ctx ends and says the impression was not acknowledged (not refused).
func TestRecordSyncUnacknowledged(t *testing.T) {
	c := newClient(t, shortDial, deadCluster(t))
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	acks := c.RecordSync(ctx, []client.RecordItem{{Viewer: "v", Impression: fcap.Impression{ID: "i", Time: 5, Caps: []fcap.Cap{soft}}}})
	if err := acks[0].Err; err == nil || client.IsRefused(err) || !errors.Is(err, client.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v, want not acknowledged: ErrUnavailable and the context's deadline", err)
	}
}

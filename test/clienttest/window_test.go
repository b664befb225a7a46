package clienttest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
)

// TestWindowOfAnHour: Window: time.Hour is one hour from the ad server's
// call to the node's engine (issue 34: Window was milliseconds, and
// time.Hour passed as one meant 114 years). Through the client, the wire and
// the node's handler, an impression 59 minutes old counts and one 61
// minutes old does not.
func TestWindowOfAnHour(t *testing.T) {
	_, c, ctx := readySolo(t)
	hourly := fcap.Cap{Scope: "campaign", ID: "hourly", Limit: 1, Window: time.Hour}
	now := time.Now()
	for _, tc := range []struct {
		viewer  string
		age     time.Duration
		counted bool
	}{
		{"seen-59m-ago", 59 * time.Minute, true},
		{"seen-61m-ago", 61 * time.Minute, false},
	} {
		imp := fcap.Impression{ID: "imp-" + tc.viewer, Time: now.Add(-tc.age).UnixMilli(), Caps: []fcap.Cap{hourly}}
		ack := c.RecordSync(ctx, []client.RecordItem{{Viewer: tc.viewer, Impression: imp}})[0]
		if ack.Err != nil {
			t.Fatalf("%s: RecordSync: %v", tc.viewer, ack.Err)
		}
		res, err := c.Check(ctx, tc.viewer, []fcap.Candidate{{Caps: []fcap.Cap{hourly}}}, client.At(now.UnixMilli()))
		if err != nil {
			t.Fatalf("%s: Check: %v", tc.viewer, err)
		}
		v := res.Verdicts[0]
		if v.Failed() {
			t.Fatalf("%s: %+v: not the node's verdict", tc.viewer, v)
		}
		if v.Allowed == tc.counted {
			t.Errorf("an impression %v old under a window of %v: recorded %v, verdict %+v; counted %v, want %v",
				tc.age, hourly.Window, ack.Status, v.Verdict, !v.Allowed, tc.counted)
		}
	}
}

// TestWindowRefusedWithTheReason: a window the cluster cannot keep, one
// with a fraction of a millisecond (the wire and the engine count
// milliseconds) or one past fcap.MaxWindow, is refused with an error
// saying why by every call that carries a cap, never rounded or counted
// under another window; a valid cap in the same client still counts.
func TestWindowRefusedWithTheReason(t *testing.T) {
	_, c, ctx := readySolo(t)
	for _, tc := range []struct {
		window time.Duration
		says   string
	}{
		{time.Hour + 500*time.Microsecond, "1h0m0.0005s is not a whole number of milliseconds"},
		{999 * time.Microsecond, "999µs"},                          // under 1ms: Record says so, the wire that it is not whole
		{3_600_000, "3.6ms is not a whole number of milliseconds"}, // a count of milliseconds, as Window was
		{fcap.MaxWindow + time.Millisecond, "got 9600h0m0.001s"},
		{401 * 24 * time.Hour, "(400 days), got 9624h0m0s"},
	} {
		bad := fcap.Cap{Scope: "campaign", ID: "bad-window", Limit: 5, Window: tc.window}
		check := func(op string, err error) {
			t.Helper()
			if !errors.Is(err, fcap.ErrInvalid) || !strings.Contains(err.Error(), tc.says) {
				t.Errorf("%s with a window of %v: %v, want an invalid request saying %q", op, tc.window, err, tc.says)
			}
		}
		_, err := c.Check(ctx, "v", []fcap.Candidate{{Caps: []fcap.Cap{bad}}})
		check("Check", err)
		_, err = c.Allow(ctx, "v", []fcap.Cap{bad})
		check("Allow", err)
		_, _, err = c.Reserve(ctx, "v", fcap.Candidate{Caps: []fcap.Cap{bad}}, time.Minute)
		check("Reserve", err)
		err = c.Record("v", fcap.Impression{ID: "i", Caps: []fcap.Cap{bad}})
		check("Record", err)
		if !errors.Is(err, fcap.ErrBadWindow) {
			t.Errorf("Record with a window of %v: %v, want fcap.ErrBadWindow", tc.window, err)
		}
	}
	v, err := c.Allow(ctx, "v", []fcap.Cap{{Scope: "campaign", ID: "good-window", Limit: 5, Window: fcap.MaxWindow}})
	if err != nil || !v.Allowed || v.Failed() || v.Remaining != 4 {
		t.Fatalf("Allow with a window of fcap.MaxWindow: %+v, %v; want allowed, 4 remaining", v, err)
	}
}

// TestReserveTTLUnderAMillisecond: a reservation's ttl crosses the wire
// in milliseconds, so one under a millisecond (which would cross as 0)
// is refused by the client, saying so; a ttl of 1ms is a reservation.
func TestReserveTTLUnderAMillisecond(t *testing.T) {
	_, c, ctx := readySolo(t)
	cand := fcap.Candidate{Caps: []fcap.Cap{{Scope: "campaign", ID: "ttl", Limit: 5, Window: time.Hour, Mode: fcap.Strict}}}
	for _, ttl := range []time.Duration{0, 500 * time.Microsecond, -time.Second} {
		v, r, err := c.Reserve(ctx, "v", cand, ttl)
		if !errors.Is(err, client.ErrBadRequest) || !errors.Is(err, fcap.ErrBadTTL) || !strings.Contains(err.Error(), "ttl "+ttl.String()) || r.ID != 0 || v.Allowed {
			t.Errorf("Reserve with a ttl of %v: %+v, %+v, %v; want ErrBadRequest and fcap.ErrBadTTL naming it", ttl, v, r, err)
		}
	}
	v, r, err := c.Reserve(ctx, "v", cand, time.Millisecond)
	if err != nil || !v.Allowed || r.ID == 0 {
		t.Fatalf("Reserve with a ttl of 1ms: %+v, %+v, %v; want a reservation", v, r, err)
	}
}

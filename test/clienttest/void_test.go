package clienttest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
)

// TestVoidAgainstANode: Void takes a recorded impression back and says
// so, is idempotent, answers false for an id never recorded, and refuses
// before any request an impression without a time and, from the owner,
// one named with another time; after Close it is ErrClosed.
func TestVoidAgainstANode(t *testing.T) {
	nd := soloNode(t, "void-solo")
	c := newClient(t, nil, nd.DataAddr())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	caps := []fcap.Cap{{Scope: "campaign", ID: "void", Limit: 3, Window: time.Hour}}
	now := time.Now().UnixMilli()
	bot := fcap.Impression{ID: "bot", Time: now, Caps: caps}
	for _, ack := range c.RecordSync(ctx, []client.RecordItem{{Viewer: "v", Impression: bot}, {Viewer: "v", Impression: fcap.Impression{ID: "ok", Time: now, Caps: caps}}}) {
		if ack.Err != nil {
			t.Fatal(ack.Err)
		}
	}
	left := func() int64 {
		t.Helper()
		res, err := c.Check(ctx, "v", []fcap.Candidate{{Caps: caps}})
		if err != nil {
			t.Fatal(err)
		}
		return res.Verdicts[0].Remaining
	}
	for range 2 {
		if voided, err := c.Void(ctx, "v", bot); err != nil || !voided {
			t.Fatalf("Void = %v, %v; want true", voided, err)
		}
		if n := left(); n != 2 {
			t.Fatalf("%d left after the void, want 2", n)
		}
	}
	if voided, err := c.Void(ctx, "v", fcap.Impression{ID: "never", Time: now, Caps: caps}); err != nil || voided {
		t.Errorf("Void of an unknown id = %v, %v; want false", voided, err)
	}
	for name, imp := range map[string]fcap.Impression{
		"no time":    {ID: "ok", Caps: caps},
		"other time": {ID: "ok", Time: now - 60_000, Caps: caps},
		"no caps":    {ID: "ok", Time: now},
	} {
		if _, err := c.Void(ctx, "v", imp); !errors.Is(err, client.ErrBadRequest) {
			t.Errorf("Void with %s: %v, want ErrBadRequest", name, err)
		}
	}
	if _, err := c.Void(ctx, "", bot); !errors.Is(err, client.ErrBadRequest) {
		t.Errorf("Void of an empty viewer: %v, want ErrBadRequest", err)
	}
	if n := left(); n != 2 {
		t.Errorf("%d left after refused voids, want 2", n)
	}
	c.Close(ctx)
	if _, err := c.Void(ctx, "v", bot); !errors.Is(err, client.ErrClosed) {
		t.Errorf("Void after Close: %v, want ErrClosed", err)
	}
}

package clienttest

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
)

// TestMisconfiguredSeedIsNamedByWaitReady: a program that gives its
// client a node's HTTP address (metrics, status page, JSON API) or a
// typo'd port gets from WaitReady, within 2 s, an error wrapping
// ErrUnavailable that names the seed and what answered there; until then
// every call says the cluster was never reached. The client runs with
// its defaults, as a program's would. (New accepted both and every call
// failed open with err == nil; WaitReady said "deadline exceeded".)
func TestMisconfiguredSeedIsNamedByWaitReady(t *testing.T) {
	nd := soloNode(t, "misconfigured")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	typo := ln.Addr().String()
	ln.Close()
	for _, tc := range []struct {
		name  string
		seed  string
		found client.Found
		says  string
	}{
		{"the node's HTTP address", nd.HTTPAddr(), client.FoundHTTP, "an HTTP server answered"},
		{"a typo'd port", typo, client.FoundNothing, "connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := client.New(client.Config{Seeds: []string{tc.seed}, Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close(context.Background())
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			err = c.WaitReady(ctx)
			var de *client.DialError
			if !errors.Is(err, client.ErrUnavailable) || !errors.As(err, &de) || de.Found != tc.found ||
				!strings.Contains(err.Error(), "seed "+tc.seed+": ") || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("WaitReady = %v, want ErrUnavailable naming seed %s, %v found, %q", err, tc.seed, tc.found, tc.says)
			}
			res, err := c.Check(context.Background(), "v", []fcap.Candidate{{Caps: []fcap.Cap{soft}}})
			if !errors.Is(err, client.ErrUnavailable) || !strings.Contains(err.Error(), tc.seed) || !res.Verdicts[0].FailOpen {
				t.Errorf("Check = %+v, %v; want a fail-open verdict with ErrUnavailable naming %s", res.Verdicts, err, tc.seed)
			}
		})
	}
	// The data-plane address works, and the client says nothing more.
	c := newClient(t, nil, nd.DataAddr())
	ctx, cancel := context.WithTimeout(context.Background(), generous)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	if res, err := c.Check(ctx, "v", []fcap.Candidate{{Caps: []fcap.Cap{soft}}}); err != nil || res.Verdicts[0].Failed() {
		t.Fatalf("Check after WaitReady = %+v, %v; want the node's verdict", res.Verdicts, err)
	}
	if st := c.Stats(); !st.Reached || st.ActiveNodes != 1 || st.ConnectedNodes != 1 {
		t.Errorf("stats %+v: want reached, 1 active node, 1 connected", st)
	}
}

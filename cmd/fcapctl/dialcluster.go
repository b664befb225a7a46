package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/proto"
	"github.com/fcap-io/fcap/proto/rpc"
	"github.com/fcap-io/fcap/ring"
)

// splitAddrs reads a comma-separated --addr.
func splitAddrs(s string) []string {
	var out []string
	for _, a := range strings.Split(s, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// memberProbe bounds the TCP connect that tells a dead member (refused,
// or no answer) from a live one before the data commands start.
const memberProbe = 500 * time.Millisecond

// dialCluster asks the seeds for the topology (failing fast, and naming
// each seed's trouble, when none answers), then starts the client an ad
// server would use. A member of the topology that refuses connections
// is reported on stderr and not waited for: its viewers are answered by
// their backups, as an ad server's would be.
func dialCluster(ctx context.Context, admin *rpc.Admin, seeds []string, timeout time.Duration, stderr io.Writer) (*client.Client, error) {
	if len(seeds) == 0 {
		return nil, fmt.Errorf("--addr names no address")
	}
	topo, err := reach(ctx, admin, seeds)
	if err != nil {
		return nil, err
	}
	dead := deadMembers(ctx, topo)
	for _, m := range dead {
		fmt.Fprintf(stderr, "fcapctl: member %s (%s) is unreachable; its viewers are answered by their backups (strict caps fail closed)\n", m.Name, m.Addr)
	}
	cfg := client.DefaultConfig(seeds...)
	cfg.Timeout = timeout
	cfg.TLS, cfg.Token = admin.TLS, admin.Token
	// The client's warnings ("no fcap node answered yet") are for an ad
	// server's log; fcapctl reports what failed itself.
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	c, err := client.New(cfg)
	if err != nil {
		return nil, err
	}
	wait := ctx
	if len(dead) > 0 {
		// The live members connect in milliseconds; the dead never do.
		var cancel context.CancelFunc
		wait, cancel = context.WithTimeout(ctx, memberProbe)
		defer cancel()
	}
	if err := c.WaitReady(wait); err != nil && (len(dead) == 0 || c.Ring() == nil) {
		c.Close(context.Background())
		return nil, err
	}
	return c, nil
}

// deadMembers returns the active members whose data plane does not
// accept a TCP connection within memberProbe.
func deadMembers(ctx context.Context, topo *proto.Topology) []proto.Member {
	var mu sync.Mutex
	var dead []proto.Member
	var wg sync.WaitGroup
	for _, m := range topo.Members {
		if m.State != uint8(ring.Active) {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			dctx, cancel := context.WithTimeout(ctx, memberProbe)
			defer cancel()
			c, err := (&net.Dialer{}).DialContext(dctx, "tcp", m.Addr)
			if err != nil {
				mu.Lock()
				dead = append(dead, m)
				mu.Unlock()
				return
			}
			c.Close()
		}()
	}
	wg.Wait()
	sort.Slice(dead, func(i, j int) bool { return dead[i].Name < dead[j].Name })
	return dead
}

package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/ring"
)

// ClientTimeout is the deadline of every call, first dial and Record
// batch of a client built by ClientConfig. The client's defaults (a 5 ms
// call, a 250 ms dial and batch) are production figures for a quiet
// ad server; race-built nodes on a busy machine answer far later, and a
// call past its deadline fails open or closed: a verdict by policy where
// the test expects the cluster's answer. Only a test about deadlines
// should set shorter ones.
const ClientTimeout = 5 * time.Second

// ClientConfig returns client.DefaultConfig(seeds...) with deadlines of
// seconds (ClientTimeout) instead of milliseconds.
func ClientConfig(seeds ...string) client.Config {
	cfg := client.DefaultConfig(seeds...)
	cfg.Timeout = ClientTimeout
	cfg.DialTimeout = ClientTimeout
	cfg.RecordTimeout = ClientTimeout
	return cfg
}

// NewClient builds a client from ClientConfig(seeds...), changed by
// mutate: see Client.
func NewClient(t testing.TB, seeds []string, mutate ...func(*client.Config)) *client.Client {
	t.Helper()
	cfg := ClientConfig(seeds...)
	for _, m := range mutate {
		m(&cfg)
	}
	return Client(t, cfg)
}

// Client builds a client from cfg, closes it when the test ends, and
// waits (up to 60 s) until it knows the topology and is connected to
// every active member.
func Client(t testing.TB, cfg client.Config) *client.Client {
	t.Helper()
	c, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c.Close(ctx)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}

// Seeds returns the data-plane addresses of the running nodes.
func Seeds(nodes ...*Node) []string {
	var s []string
	for _, n := range nodes {
		if n.Running() {
			s = append(s, n.Data)
		}
	}
	return s
}

// OwnedBy returns n viewer ids, prefix-0, prefix-1 and so on, whose
// primary owner in r is the member named name; it fails the test when
// the first 100,000 ids do not hold n of them.
func OwnedBy(t testing.TB, r *ring.Ring, name, prefix string, n int) []string {
	t.Helper()
	var out []string
	for i := 0; len(out) < n && i < 100_000; i++ {
		v := fmt.Sprintf("%s-%d", prefix, i)
		if _, owners := r.Lookup(v); len(owners) > 0 && r.Member(owners[0]).Name == name {
			out = append(out, v)
		}
	}
	if len(out) < n {
		t.Fatalf("fewer than %d viewers owned by %s", n, name)
	}
	return out
}

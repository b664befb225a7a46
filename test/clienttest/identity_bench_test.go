package clienttest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
)

// BenchmarkIdentityCheck: what naming a device costs a 100-candidate
// Check, against one in-process node on loopback, one caller: by viewer
// id, by a device whose resolution is cached (the usual case: still one
// round trip), and by a device that misses the cache every time (a
// Resolve round trip first).
//
//	go test -run XXX -bench BenchmarkIdentityCheck -benchtime 3s ./client/
func BenchmarkIdentityCheck(b *testing.B) {
	nd := soloNode(b, "bench")
	var cands []fcap.Candidate
	for i := range 100 {
		cands = append(cands, fcap.Candidate{Caps: []fcap.Cap{
			{Scope: "campaign", ID: fmt.Sprint("c", i), Limit: 5, Window: 24 * time.Hour},
			{Scope: "advertiser", ID: fmt.Sprint("a", i%10), Limit: 20, Window: 24 * time.Hour},
		}})
	}
	const people = 1000
	setup := func(b *testing.B, ttl time.Duration) *client.Client {
		c := newClient(b, func(c *client.Config) { c.Timeout = time.Second; c.ResolveTTL = ttl }, nd.DataAddr())
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.WaitReady(ctx); err != nil {
			b.Fatal(err)
		}
		for i := range people {
			if _, err := c.Link(ctx, fmt.Sprint("device-", i), fmt.Sprint("person-", i)); err != nil {
				b.Fatal(err)
			}
		}
		return c
	}
	run := func(b *testing.B, c *client.Client, prefix string, opts ...client.CallOption) {
		res := &client.CheckResult{}
		ctx := context.Background()
		b.ResetTimer()
		for i := range b.N {
			if err := c.CheckInto(ctx, prefix+fmt.Sprint(i%people), cands, res, opts...); err != nil || res.Verdicts[0].Failed() {
				b.Fatalf("check: %v %+v", err, res.Verdicts[0])
			}
		}
	}
	b.Run("viewer", func(b *testing.B) {
		run(b, setup(b, time.Minute), "person-")
	})
	b.Run("device-cached", func(b *testing.B) {
		c := setup(b, time.Minute)
		for i := range people { // warm the cache
			c.Resolve(context.Background(), fmt.Sprint("device-", i))
		}
		run(b, c, "device-", client.Device())
		if st := c.Stats(); st.ResolveMisses != 0 {
			b.Errorf("%d cache misses with a warm cache", st.ResolveMisses)
		}
	})
	b.Run("device-miss", func(b *testing.B) {
		c := setup(b, time.Nanosecond) // every resolution expires at once
		run(b, c, "device-", client.Device())
		if st := c.Stats(); st.ResolveMisses < int64(b.N) {
			b.Errorf("%d misses over %d calls", st.ResolveMisses, b.N)
		}
	})
}

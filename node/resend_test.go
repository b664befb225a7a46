package node

import (
	"fmt"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/internal/testwait"
	"github.com/fcap-io/fcap/ring"
)

// TestTransferCutByAForgetIsSentAgain (issue 17): a peer stops owning a
// partition while it is being sent to it whole, then owns it again (two
// ring changes during a drain or a flap). The transfer asked for by the
// second change finds the first one in flight; the first one, finishing
// after a forget, does not count as sent. The partition must be sent
// again, or its primary reports it under-replicated until some later
// ring change although the peer holds it.
func TestTransferCutByAForgetIsSentAgain(t *testing.T) {
	// Mostly waiting (on gossip, on throttled transfers) with a cluster of
	// its own (ports :0, no package state): it waits beside the others.
	t.Parallel()
	nodes := startNodes(t, "resend", 2, func(cfg *Config) {
		cfg.Replication.TransferRate = 256 << 10 // a partition of a megabyte takes seconds
	})
	a, b := nodes[0], nodes[1]
	testwait.Eventually(t, 20*time.Second, func() bool {
		return len(a.Ring().Members()) == 2 && len(b.Ring().Members()) == 2 && a.Ready() && b.Ready() && a.repl.UnderReplicated() == 0
	}, "cluster of 2 did not settle")

	// A partition a is primary of, filled with about a megabyte of state.
	r := a.Ring()
	p := -1
	for q := range r.Partitions() {
		if r.Member(r.Owners(q)[0]).Name == a.Name() {
			p = q
			break
		}
	}
	if p < 0 {
		t.Fatal("a is primary of nothing")
	}
	capc := fcap.Cap{Scope: "campaign", ID: "resend", Limit: 200, Window: fcap.MaxWindow}
	loaded := 0
	for i := 0; loaded < 1000; i++ {
		v := fmt.Sprint("resend-viewer-", i)
		if ring.PartitionOf(fcap.ViewerKey(v), r.Partitions()) != p {
			continue
		}
		for k := range 60 {
			if _, err := a.engine.Record(v, fcap.Impression{ID: fmt.Sprint(v, "-", k), Time: int64(1000 + k), Caps: []fcap.Cap{capc}}); err != nil {
				t.Fatal(err)
			}
		}
		loaded++
	}

	if !a.repl.Resend(b.Name(), p) {
		t.Fatal("a has no sender to b")
	}
	// Once it is in flight, b stops owning p and owns it again, as two
	// ring changes in a row would make it.
	testwait.Eventually(t, 10*time.Second, func() bool { return a.repl.Sending(b.Name(), p) }, "the transfer never started")
	a.repl.Resend(b.Name(), p)
	testwait.Eventually(t, 60*time.Second, func() bool {
		return a.repl.Sent(b.Name(), p) && a.repl.Pushing(p) == 0 && a.repl.UnderReplicated() == 0
	}, "the partition was never sent again: its primary reports it under-replicated")
}

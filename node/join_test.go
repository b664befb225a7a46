package node_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/internal/testwait"
	"github.com/fcap-io/fcap/node"
	"github.com/fcap-io/fcap/node/nodetest"
	"github.com/fcap-io/fcap/ring"
)

// TestJoinUnderTrafficLosesNothing adds a node to a 3-node cluster while
// a client records: every impression the cluster acknowledged is counted.
func TestJoinUnderTrafficLosesNothing(t *testing.T) {
	var logs nodetest.LogBuffer
	debug := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	nodes := settledCluster(t, "node", 3, func(c *node.Config) { c.Logger = debug })
	c := newClient(t, nodes)
	capc := fcap.Cap{Scope: "campaign", ID: "join", Limit: fcap.MaxLimit, Window: fcap.MaxWindow}
	viewers := make([]string, 200)
	for i := range viewers {
		viewers[i] = fmt.Sprint("jv-", i)
	}
	var mu sync.Mutex
	acked, unknown := map[string]int{}, map[string]int{}
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for ctx.Err() == nil {
				v := viewers[rng.IntN(len(viewers))]
				vd, err := c.Allow(context.Background(), v, []fcap.Cap{capc})
				mu.Lock()
				switch {
				case err != nil:
					t.Errorf("Allow: %v", err)
				case vd.Failed():
					unknown[v]++
				case vd.Allowed:
					acked[v]++
				}
				mu.Unlock()
			}
		}()
	}
	time.Sleep(500 * time.Millisecond)
	cfg := node.DefaultLocalConfig("node-new")
	cfg.Logger = debug
	cfg.Membership.Seeds = []string{nodes[0].GossipAddr()}
	late, err := node.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer late.Shutdown(context.Background())
	all := append(nodes, late)
	testwait.Eventually(t, 30*time.Second, func() bool {
		for _, nd := range all {
			r := nd.Ring()
			i, ok := r.Find("node-new")
			if !ok || r.Member(i).State != ring.Active {
				return false
			}
		}
		return true
	}, "the new node did not turn active")
	time.Sleep(time.Second)
	stop()
	wg.Wait()

	lost := 0
	for _, v := range viewers {
		// The owner's count: a backup's answer (stale, to a hedged
		// check) may lack the last writes, replicated asynchronously.
		var res *client.CheckResult
		testwait.Eventually(t, 10*time.Second, func() bool {
			res, _ = c.Check(context.Background(), v, []fcap.Candidate{{Caps: []fcap.Cap{capc}}})
			return res != nil && !res.Verdicts[0].Failed() && !res.Verdicts[0].Stale
		}, "no answer from the owner of %s", v)
		got := int(capc.Limit - res.Verdicts[0].Remaining)
		mu.Lock()
		if got < acked[v] {
			if lost == 0 {
				os.WriteFile(filepath.Join(os.TempDir(), "fcap-join-test.log"), []byte(logs.String()), 0o644)
				p, _ := late.Ring().Lookup(v)
				t.Logf("lost on %s (partition %d): acked %d got %d", v, p, acked[v], got)
				for _, nd := range all {
					st, ok := nd.Engine().Viewer(v)
					n := -1
					if ok && len(st.Keys) > 0 {
						n = len(st.Keys[0].Times)
					}
					t.Logf("  %s holds %d (rank %d)", nd.Name(), n, nd.Ring().Rank(p, nd.Name()))
				}
				for _, l := range strings.Split(logs.String(), "\n") {
					if strings.Contains(l+" ", fmt.Sprintf("partition=%d ", p)) || strings.Contains(l, "refused") || strings.Contains(l, "active") {
						t.Log(l)
					}
				}
			}
			lost += acked[v] - got

		} else if got > acked[v]+unknown[v] {
			t.Errorf("%s counted %d, acknowledged %d, unknown %d", v, got, acked[v], unknown[v])
		}
		mu.Unlock()
	}
	os.WriteFile(filepath.Join(os.TempDir(), "fcap-join-test.log"), []byte(logs.String()), 0o644)
	total, failed := 0, 0
	for _, n := range acked {
		total += n
	}
	for _, n := range unknown {
		failed += n
	}
	if lost > 0 {
		t.Errorf("%d of %d acknowledged impressions lost", lost, total)
	}
	t.Logf("%d acknowledged, %d lost, %d failed over", total, lost, failed)
}

// TestThrottledJoinKeepsStrictWritesFlowing joins a node while its
// partitions move at a low transfer rate: the move takes as long as the
// rate says, and strict writes replicated to the joining node are
// acknowledged meanwhile (they do not wait behind the transfer).
func TestThrottledJoinKeepsStrictWritesFlowing(t *testing.T) {
	// Mostly waiting (on gossip, on throttled transfers) with a cluster of
	// its own (ports :0, no package state): it waits beside the others.
	t.Parallel()
	const rate = 256 << 10
	// A strict write gets far longer than the production second to sync,
	// so a machine busy with other work cannot fail one closed. What the
	// test asserts is not its speed but that it does not wait behind the
	// transfer: if it did, the first write would be answered only once
	// the move was over, and far fewer than minWrites would be counted.
	const strictTimeout, minWrites = 30 * time.Second, 5
	slow := func(c *node.Config) {
		// DropGrace outlasts StrictTimeout, as Validate requires.
		c.Replication.TransferRate, c.StrictTimeout, c.Replication.DropGrace = rate, strictTimeout, 2*strictTimeout
	}
	nodes := settledCluster(t, "node", 2, slow)
	// Load state straight into the engines of the viewers' owners.
	load := fcap.Cap{Scope: "campaign", ID: "load", Limit: 8, Window: fcap.MaxWindow}
	for i := range 20000 {
		v := fmt.Sprint("tv-", i)
		for _, nd := range nodes {
			if p, _ := nd.Ring().Lookup(v); nd.Ring().Rank(p, nd.Name()) >= 0 {
				for k := range 4 {
					if _, err := nd.Engine().Record(v, fcap.Impression{ID: fmt.Sprint(v, "-", k), Time: int64(1000 + k), Caps: []fcap.Cap{load}}); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
	}
	c := newClient(t, nodes)
	strict := fcap.Cap{Scope: "campaign", ID: "strict", Limit: fcap.MaxLimit, Window: fcap.MaxWindow, Mode: fcap.Strict}

	cfg := node.DefaultLocalConfig("node-new")
	cfg.Logger = nodetest.Quiet
	slow(&cfg)
	cfg.Membership.Seeds = []string{nodes[0].GossipAddr()}
	start := time.Now()
	late, err := node.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer late.Shutdown(context.Background())
	active := func() bool {
		i, ok := late.Ring().Find("node-new")
		return ok && late.Ring().Member(i).State == ring.Active
	}
	writes := 0
	for i := 0; !active(); i++ {
		if time.Since(start) > 60*time.Second {
			t.Fatal("the new node did not turn active within 60s")
		}
		v := fmt.Sprint("sv-", i)
		vd, err := c.Allow(context.Background(), v, []fcap.Cap{strict})
		if err != nil || !vd.Allowed || vd.Failed() {
			t.Fatalf("strict Allow during the transfer: %+v, %v", vd, err)
		}
		writes++
	}
	took := time.Since(start)
	viaNew := 0 // writes the owners replicated to the new node, an owner-to-be
	for i := range writes {
		if p, _ := late.Ring().Lookup(fmt.Sprint("sv-", i)); late.Ring().Rank(p, "node-new") >= 0 {
			viaNew++
		}
	}
	// The new node's share of the 20,000 viewers is over a megabyte: at
	// 256 KiB/s (after a 512 KiB burst) its senders need seconds.
	if took < time.Second {
		t.Errorf("the join took %v: the transfer was not throttled", took)
	}
	if viaNew == 0 {
		t.Errorf("none of %d strict writes went to a partition the new node owns", writes)
	}
	if writes < minWrites {
		t.Errorf("only %d strict writes acknowledged during a %v transfer: they waited behind it", writes, took)
	}
	t.Logf("join took %v at %d KiB/s; %d strict writes acknowledged meanwhile (%d replicated to the new node)", took, rate>>10, writes, viaNew)
}

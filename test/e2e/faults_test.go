package e2e

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/proto"
	"github.com/fcap-io/fcap/ring"
	"github.com/fcap-io/fcap/test/cluster"
)

// blackHole accepts TCP connections and never answers on them: a node
// stuck hard, or a middlebox that swallows its traffic. It returns the
// address; everything is closed when the test ends.
func blackHole(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // held open, never read
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	return ln.Addr().String()
}

// refused returns an address nothing listens on: connections to it are
// refused, as to a node killed and not restarted.
func refused(t testing.TB) string {
	return fmt.Sprintf("127.0.0.1:%d", cluster.FreePort(t))
}

// TestDeadSeedsFirst starts a client whose first seeds are a black hole
// and a refused address, the live nodes last. It must learn the topology
// from a live one and be ready within a few seconds, every time, rather
// than wait on the dead seeds for each refresh's whole budget.
func TestDeadSeedsFirst(t *testing.T) {
	nodes := cluster.StartCluster(t, 3, cluster.Options{Replicas: 2})
	for _, order := range [][]string{
		{blackHole(t), refused(t)},
		{refused(t), blackHole(t)},
	} {
		cfg := client.DefaultConfig(append(order, seeds(nodes...)...)...)
		cfg.Timeout = 2 * time.Second
		c, err := client.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		// Readiness, not speed: a few seconds is many times what a live
		// seed takes to answer, and less than the dead ones would hold
		// each refresh if they were waited on in turn.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = c.WaitReady(ctx)
		cancel()
		if err != nil {
			t.Errorf("seeds %v first: %v", order, err)
		} else if got := len(c.Ring().Members()); got != 3 {
			t.Errorf("seeds %v first: the client sees %d members, want 3", order, got)
		}
		c.Close(context.Background())
	}
}

// backupCount asks a viewer's backup owner, in r, how many impressions
// it holds under a cap (a Check that accepts a backup's answer).
func backupCount(r *ring.Ring, viewer string, c fcap.Cap) (int64, error) {
	_, owners := r.Lookup(viewer)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var res proto.CheckResult
	req := &proto.Check{Viewer: viewer, Backup: true, Table: fcap.CheckTable{Caps: []fcap.Cap{c}, Refs: []uint16{0}, Ends: []uint32{1}}}
	if err := client.Call(ctx, r.Member(owners[1]).Addr, req, &res); err != nil {
		return 0, err
	}
	if len(res.Verdicts) != 1 {
		return 0, fmt.Errorf("%d verdicts", len(res.Verdicts))
	}
	return c.Limit - res.Verdicts[0].Remaining, nil
}

// TestKilledOwnerSoftWritesGoToABackup kills -9 the owner of viewers
// whose soft cap is used up and at once sends them soft Allows, strict
// Allows and Records. Before the client's topology changes (gossip has
// not removed the node yet, or the client has not heard), a backup answers
// the soft Allows (stale, denied: the cap holds) instead of the failure
// policy, strict Allows fail closed, and the Records are taken by the
// backup; after the failover every Record is counted once.
func TestKilledOwnerSoftWritesGoToABackup(t *testing.T) {
	nodes := cluster.StartCluster(t, 3, cluster.Options{Replicas: 2})
	// Deadlines of seconds (a Record batch's too: its default 250 ms is
	// for a quiet ad server, and the test asserts none is dropped).
	cfg := cluster.ClientConfig(seeds(nodes...)...)
	cfg.Timeout = 2 * time.Second
	cfg.RefreshInterval = time.Hour // the topology changes only when a node says so
	c, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	victim := nodes[0]
	r := c.Ring()
	const limit = 3
	soft := fcap.Cap{Scope: "campaign", ID: "soft", Limit: limit, Window: time.Hour}
	strict := fcap.Cap{Scope: "campaign", ID: "strict", Limit: limit, Window: time.Hour, Mode: fcap.Strict}
	tally := fcap.Cap{Scope: "campaign", ID: "tally", Limit: fcap.MaxLimit, Window: time.Hour}
	viewers := cluster.OwnedBy(t, r, victim.Name, "killed-owner", 20)
	granted := map[string]int{}
	for _, v := range viewers {
		for range limit {
			vd, err := c.Allow(context.Background(), v, []fcap.Cap{soft})
			if err != nil || !vd.Allowed || vd.Failed() {
				t.Fatalf("Allow %s before the kill: %+v, %v", v, vd, err)
			}
			granted[v]++
		}
	}
	cluster.Eventually(t, 30*time.Second, func() bool {
		for _, v := range viewers {
			if n, err := backupCount(r, v, soft); err != nil || n != limit {
				return false
			}
		}
		return true
	}, "the owner's grants did not reach the backups")

	victim.Kill()
	byBackup, failedOpen := 0, 0
	for _, v := range viewers {
		vd, err := c.Allow(context.Background(), v, []fcap.Cap{soft})
		before := c.Ring().Epoch() == r.Epoch()
		switch {
		case err != nil:
			t.Fatalf("soft Allow %s: %v", v, err)
		case vd.Failed():
			failedOpen++
		case vd.Stale && before:
			byBackup++
		}
		if vd.Allowed {
			granted[v]++
		}
		vd, err = c.Allow(context.Background(), v, []fcap.Cap{strict})
		if err != nil {
			t.Fatalf("strict Allow %s: %v", v, err)
		}
		if c.Ring().Epoch() == r.Epoch() && (vd.Allowed || !vd.FailClosed) {
			t.Errorf("strict Allow %s with its owner dead: %+v, want fail-closed", v, vd)
		}
		c.Record(v, fcap.Impression{ID: "imp-" + v, Time: time.Now().UnixMilli(), Caps: []fcap.Cap{tally}})
	}
	if failedOpen > 0 {
		t.Errorf("%d of %d soft Allows for a killed owner's viewers were decided by the failure policy, want a backup's answer", failedOpen, len(viewers))
	}
	if byBackup == 0 {
		t.Errorf("no soft Allow was answered by a backup before the client's topology changed")
	}
	for v, n := range granted {
		if n > limit {
			t.Errorf("%s: %d grants on a cap of %d", v, n, limit)
		}
	}
	fctx, fcancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer fcancel()
	if err := c.Flush(fctx); err != nil {
		t.Fatal(err)
	}
	if st := c.Stats(); st.RecordsDropped != 0 {
		t.Errorf("client stats %+v: Records dropped", st)
	}

	// After the failover each impression is counted once, by the new
	// owners. Asked through a new client: c never refreshes its topology
	// (the hour above), so it still sends these viewers' checks to the
	// dead owner's backup as a failover, whose answers are stale.
	waitStable(t, nodes)
	for v, n := range counted(t, cluster.NewClient(t, cluster.Seeds(nodes...)), viewers, tally) {
		if n != 1 {
			t.Errorf("%s: %d impressions counted, want 1", v, n)
		}
	}
	t.Logf("%d of %d soft Allows answered by a backup before the client's topology changed; client stats %+v", byBackup, len(viewers), c.Stats())
}

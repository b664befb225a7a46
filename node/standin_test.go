package node_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/internal/testwait"
	"github.com/fcap-io/fcap/node"
)

// cutter is a client Dial hook that can cut the client off one address:
// it closes the connections made to it and refuses new ones, while the
// nodes still reach each other.
type cutter struct {
	addr string
	cut  atomic.Bool

	mu sync.Mutex
	// conns holds the connections made to addr; guarded by mu.
	conns []net.Conn
}

func (c *cutter) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	if addr == c.addr && c.cut.Load() {
		return nil, errors.New("cut off by the test")
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, network, addr)
	if err == nil && addr == c.addr {
		c.mu.Lock()
		c.conns = append(c.conns, nc)
		c.mu.Unlock()
	}
	return nc, err
}

func (c *cutter) cutOff() {
	c.cut.Store(true)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, nc := range c.conns {
		nc.Close()
	}
	c.conns = nil
}

// count is how many impressions a node's engine holds for a viewer under
// a cap.
func count(nd *node.Node, viewer string, c fcap.Cap) int64 {
	vs, err := nd.Engine().Check(viewer, []fcap.Candidate{{Caps: []fcap.Cap{c}}}, time.Now().UnixMilli(), nil)
	if err != nil || len(vs) != 1 {
		return -1
	}
	return c.Limit - vs[0].Remaining
}

// TestBackupStandsInForAnUnreachableOwner cuts a client off the node that
// owns a set of viewers while the cluster stays whole. Soft Allows and
// Records for those viewers are taken by a backup owner (marked stale,
// never the failure policy), the cap holds across the owner's grants and
// the backup's, strict Allows fail closed, and the stand-in writes reach
// the owner through replication: once the client reaches the owner again
// it counts each of them once, a Record sent again included.
func TestBackupStandsInForAnUnreachableOwner(t *testing.T) {
	nodes := settledCluster(t, "node", 3)
	owner := nodes[0]
	cut := &cutter{addr: owner.DataAddr()}
	c := newClient(t, nodes, func(cfg *client.Config) {
		cfg.Dial = cut.dial
		cfg.Timeout = 10 * time.Second
		cfg.RefreshInterval = time.Hour
	})
	r := c.Ring()
	var viewers []string
	for i := 0; len(viewers) < 8; i++ {
		v := fmt.Sprint("standin-", i)
		if _, owners := r.Lookup(v); r.Member(owners[0]).Name == owner.Name() {
			viewers = append(viewers, v)
		}
	}
	backupOf := func(v string) *node.Node {
		_, owners := r.Lookup(v)
		for _, nd := range nodes {
			if nd.Name() == r.Member(owners[1]).Name {
				return nd
			}
		}
		t.Fatalf("no backup for %s", v)
		return nil
	}
	soft := fcap.Cap{Scope: "campaign", ID: "soft", Limit: 2, Window: time.Hour}
	strict := fcap.Cap{Scope: "campaign", ID: "strict", Limit: 2, Window: time.Hour, Mode: fcap.Strict}
	tally := fcap.Cap{Scope: "campaign", ID: "tally", Limit: fcap.MaxLimit, Window: time.Hour}
	ctx := context.Background()

	// One grant each at the owner, replicated to the backup before the cut.
	for _, v := range viewers {
		if vd, err := c.Allow(ctx, v, []fcap.Cap{soft}); err != nil || !vd.Allowed || vd.Failed() || vd.Stale {
			t.Fatalf("Allow %s at the owner: %+v, %v", v, vd, err)
		}
	}
	testwait.Eventually(t, 60*time.Second, func() bool {
		for _, v := range viewers {
			if count(backupOf(v), v, soft) != 1 {
				return false
			}
		}
		return true
	}, "the owner's grants did not reach the backups")

	cut.cutOff()
	for _, v := range viewers {
		vd, err := c.Allow(ctx, v, []fcap.Cap{soft})
		if err != nil || !vd.Allowed || vd.Failed() || !vd.Stale {
			t.Errorf("soft Allow %s, owner unreachable: %+v, %v; want granted by a backup", v, vd, err)
		}
		vd, err = c.Allow(ctx, v, []fcap.Cap{soft})
		if err != nil || vd.Allowed || vd.Failed() || !vd.Stale {
			t.Errorf("soft Allow %s over its cap, owner unreachable: %+v, %v; want denied by a backup", v, vd, err)
		}
		vd, err = c.Allow(ctx, v, []fcap.Cap{strict})
		if err != nil || vd.Allowed || !vd.FailClosed {
			t.Errorf("strict Allow %s, owner unreachable: %+v, %v; want fail-closed", v, vd, err)
		}
		if err := c.Record(v, fcap.Impression{ID: "imp-" + v, Time: time.Now().UnixMilli(), Caps: []fcap.Cap{tally}}); err != nil {
			t.Fatalf("Record %s not queued: %v", v, err)
		}
	}
	flush, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := c.Flush(flush); err != nil {
		t.Fatal(err)
	}
	if st := c.Stats(); st.RecordsDropped != 0 || st.BackupWrites != int64(2*len(viewers)) {
		t.Errorf("client stats %+v: want no drop and %d backup writes", st, 2*len(viewers))
	}

	// The stand-in writes reach the owner.
	testwait.Eventually(t, 60*time.Second, func() bool {
		for _, v := range viewers {
			if count(owner, v, soft) != 2 || count(owner, v, tally) != 1 {
				return false
			}
		}
		return true
	}, "the backups' stand-in writes did not reach the owner")

	// The owner is reachable again: it answers (not stale), with every
	// write counted once, and a Record sent again is a duplicate.
	cut.cut.Store(false)
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	defer wcancel()
	if err := c.WaitReady(wctx); err != nil {
		t.Fatal(err)
	}
	for _, v := range viewers {
		c.Record(v, fcap.Impression{ID: "imp-" + v, Time: time.Now().UnixMilli(), Caps: []fcap.Cap{tally}})
	}
	// A flush deadline of its own: the first one's may have run out
	// during the waits since.
	flush2, cancel2 := context.WithTimeout(ctx, 10*time.Second)
	defer cancel2()
	if err := c.Flush(flush2); err != nil {
		t.Fatal(err)
	}
	for _, v := range viewers {
		res, err := c.Check(ctx, v, []fcap.Candidate{{Caps: []fcap.Cap{soft}}, {Caps: []fcap.Cap{tally}}})
		if err != nil {
			t.Fatal(err)
		}
		s, n := res.Verdicts[0], res.Verdicts[1]
		if s.Failed() || s.Stale || s.Allowed || n.Remaining != fcap.MaxLimit-1 {
			t.Errorf("%s after the owner is back: soft %+v, tally %+v; want the owner's answer, cap used, one impression", v, s, n)
		}
	}
}

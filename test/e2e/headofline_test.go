package e2e

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/proto"
	"github.com/fcap-io/fcap/test/cluster"
)

// TestStrictWaitDoesNotBlockTheConnection (issue 17): on one connection,
// a strict Allow waiting for a backup that does not answer (SIGSTOP) does
// not hold up a soft Allow sent after it: the soft answer comes first.
// Before, a connection answered its requests one after another, so one
// frozen backup failed open every soft call of its primary's viewers.
func TestStrictWaitDoesNotBlockTheConnection(t *testing.T) {
	nodes := cluster.StartCluster(t, 2, cluster.Options{Replicas: 2})
	c := cluster.NewClient(t, cluster.Seeds(nodes...))
	// Two viewers whose primary is n1 (and so whose backup is n2).
	var mine []string
	for i := 0; len(mine) < 2; i++ {
		v := fmt.Sprint("hol-", i)
		if _, owners := c.Ring().Lookup(v); c.Ring().Member(owners[0]).Name == nodes[0].Name {
			mine = append(mine, v)
		}
	}
	strictCap := fcap.Cap{Scope: "campaign", ID: "hol-strict", Limit: 1000, Window: time.Hour, Mode: fcap.Strict}
	softCap := fcap.Cap{Scope: "campaign", ID: "hol-soft", Limit: 1000, Window: time.Hour}
	// A strict write first, so n1's sender to n2 is connected: frozen,
	// n2 then accepts bytes and never answers.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if vd, err := c.Allow(ctx, mine[0], []fcap.Cap{strictCap}); err != nil || !vd.Allowed || vd.Failed() {
		t.Fatalf("strict Allow with both nodes up: %+v %v", vd, err)
	}
	nodes[1].Pause()
	defer nodes[1].Resume()

	conn, err := net.DialTimeout("tcp", nodes[0].Data, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var frames []byte
	for id, m := range []proto.Message{
		&proto.Allow{Viewer: mine[0], Caps: []fcap.Cap{strictCap}},
		&proto.Allow{Viewer: mine[1], Caps: []fcap.Cap{softCap}},
	} {
		if frames, err = proto.AppendFrame(frames, uint64(id+1), m); err != nil {
			t.Fatal(err)
		}
	}
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := conn.Write(frames); err != nil {
		t.Fatal(err)
	}
	r := proto.NewReader(conn, 1<<20)
	var order []uint64
	for range 2 {
		hdr, body, err := r.Next()
		if err != nil {
			t.Fatalf("reading answers (got %v so far): %v", order, err)
		}
		order = append(order, hdr.ID)
		if hdr.ID == 2 {
			var res proto.AllowResult
			if hdr.Type != proto.TypeAllowResult || proto.Decode(body, &res) != nil || !res.Verdict.Allowed {
				t.Errorf("the soft Allow was answered %v", hdr.Type)
			}
		}
	}
	if order[0] != 2 {
		t.Errorf("answers came in the order %v: the soft Allow (2) waited behind the strict one (1) held by a frozen backup", order)
	}
}

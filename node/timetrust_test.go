package node_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/internal/testwait"
	"github.com/fcap-io/fcap/node"
)

const tenYears = int64(10 * 365 * 24 * time.Hour / time.Millisecond)

// labelled reads the counter name{label=value} from reg, 0 if absent.
func labelled(t *testing.T, reg prometheus.Gatherer, name, label, value string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.Metric {
			for _, l := range m.Label {
				if l.GetName() == label && l.GetValue() == value {
					return m.Counter.GetValue()
				}
			}
		}
	}
	return 0
}

// TestFutureTimeIsRefusedOnEveryPath: a caller's time ten years ahead of
// the node's clock is refused on the binary protocol (Check, Allow,
// Reserve through the client's At, an impression's time) and the JSON
// API, counted by operation, and changes nothing: the engine's "now"
// stays at the node's clock and a capped viewer stays capped.
func TestFutureTimeIsRefusedOnEveryPath(t *testing.T) {
	clock := new(atomic.Int64)
	clock.Store(time.Now().UnixMilli())
	reg := prometheus.NewRegistry()
	n := settledCluster(t, "node", 1, func(c *node.Config) {
		c.Clock = clock.Load
		c.Registerer, c.Gatherer = reg, reg
		c.APITimeout = 10 * time.Second
	})[0]
	c := newClient(t, []*node.Node{n})
	ctx := context.Background()
	now := clock.Load()
	future := now + tenYears
	day := fcap.Cap{Scope: "campaign", ID: "day", Limit: 1, Window: 24 * time.Hour}
	if v, err := c.Allow(ctx, "capped", []fcap.Cap{day}, client.At(now)); err != nil || !v.Allowed {
		t.Fatalf("first allow: %+v %v", v, err)
	}
	hw := n.Engine().HighWater()

	if _, err := c.Allow(ctx, "attacker", []fcap.Cap{day}, client.At(future)); !errors.Is(err, client.ErrFutureTime) || !errors.Is(err, client.ErrBadRequest) {
		t.Fatalf("allow ten years ahead: err = %v, want ErrFutureTime (a bad request)", err)
	}
	if _, err := c.Check(ctx, "attacker", []fcap.Candidate{{Caps: []fcap.Cap{day}}}, client.At(future)); !errors.Is(err, client.ErrFutureTime) {
		t.Fatalf("check ten years ahead: err = %v, want ErrFutureTime", err)
	}
	if _, _, err := c.Reserve(ctx, "attacker", fcap.Candidate{Caps: []fcap.Cap{day}}, time.Minute, client.At(future)); !errors.Is(err, client.ErrFutureTime) {
		t.Fatalf("reserve ten years ahead: err = %v, want ErrFutureTime", err)
	}
	c.Record("attacker", fcap.Impression{ID: "imp-future", Time: future, Caps: []fcap.Cap{day}})
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := c.Flush(fctx); err != nil {
		t.Fatal(err)
	}

	post := func(path, body string) int {
		t.Helper()
		resp, err := http.Post("http://"+n.HTTPAddr()+path, "application/json", bytes.NewBufferString(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	capJSON := `{"scope":"campaign","id":"day","limit":1,"window":86400000}`
	if code := post("/v1/check", fmt.Sprintf(`{"viewer":"attacker","candidates":[{"caps":[%s]}],"now":%d}`, capJSON, future)); code != http.StatusBadRequest {
		t.Fatalf("JSON check ten years ahead: %d, want 400", code)
	}
	if code := post("/v1/record", fmt.Sprintf(`{"viewer":"attacker","impression":{"id":"json-future","time":%d,"caps":[%s]}}`, future, capJSON)); code != http.StatusBadRequest {
		t.Fatalf("JSON record ten years ahead: %d, want 400", code)
	}

	if got := n.Engine().HighWater(); got != hw || got > clock.Load() {
		t.Fatalf("high water %d after the refused requests, want %d (the clock is %d)", got, hw, clock.Load())
	}
	if _, ok := n.Engine().Viewer("attacker"); ok {
		t.Fatal("a refused request left state for its viewer")
	}
	for op, want := range map[string]float64{"allow": 1, "check": 2, "reserve": 1, "record": 2} {
		if got := labelled(t, reg, "fcap_time_refused_total", "op", op); got != want {
			t.Errorf("fcap_time_refused_total{op=%q} = %v, want %v", op, got, want)
		}
	}
	if v, err := c.Allow(ctx, "capped", []fcap.Cap{day}, client.At(now+1)); err != nil || v.Allowed {
		t.Fatalf("a capped viewer after the attack: %+v %v, want denied", v, err)
	}
	// Within the skew is accepted.
	if v, err := c.Allow(ctx, "skewed", []fcap.Cap{day}, client.At(clock.Load()+30_000)); err != nil || !v.Allowed {
		t.Fatalf("allow 30 s ahead: %+v %v, want granted", v, err)
	}
}

// TestReplicatedHighWaterIsClamped: a peer whose clock is ten years
// ahead (or that took a caller's time on trust) replicates its
// high-water mark with every change; the receiving node clamps it to its
// own clock and counts it, and its own capped viewers stay capped.
func TestReplicatedHighWaterIsClamped(t *testing.T) {
	regs := map[string]*prometheus.Registry{}
	ahead := func() int64 { return time.Now().UnixMilli() + tenYears }
	nodes := settledCluster(t, "node", 2, func(c *node.Config) {
		reg := prometheus.NewRegistry()
		regs[c.Name] = reg
		c.Registerer, c.Gatherer = reg, reg
		if c.Name == "node-1" {
			c.Clock = ahead
		}
	})
	honest, rogue := nodes[0], nodes[1]
	c := newClient(t, nodes)
	ctx := context.Background()
	day := fcap.Cap{Scope: "campaign", ID: "day", Limit: 1, Window: 24 * time.Hour}
	var mine []string // viewers the honest node owns
	for i := range 40 {
		v := fmt.Sprint("viewer-", i)
		if vd, err := c.Allow(ctx, v, []fcap.Cap{day}); err != nil || !vd.Allowed {
			t.Fatalf("allow %s: %+v %v", v, vd, err)
		}
		if _, owners := honest.Ring().Lookup(v); honest.Ring().Members()[owners[0]].Name == honest.Name() {
			mine = append(mine, v)
		}
	}
	if len(mine) == 0 || len(mine) == 40 {
		t.Fatalf("the honest node owns %d of 40 viewers: the test needs both nodes to own some", len(mine))
	}
	testwait.Eventually(t, 20*time.Second, func() bool {
		return labelled(t, regs[honest.Name()], "fcap_time_clamped_total", "source", "replication") >= 1
	}, "the rogue peer's high-water mark was never clamped")
	if hw, limit := honest.Engine().HighWater(), time.Now().UnixMilli(); hw > limit {
		t.Fatalf("honest node's high water %d is past its clock %d", hw, limit)
	}
	if rogue.Engine().HighWater() <= time.Now().UnixMilli() {
		t.Fatal("the rogue node's clock was not ahead: the test proves nothing")
	}
	honest.Engine().Sweep(1 << 30)
	for _, v := range mine {
		if vd, err := c.Allow(ctx, v, []fcap.Cap{day}); err != nil || vd.Allowed {
			t.Fatalf("%s, capped on the honest node, after the rogue replication: %+v %v, want denied", v, vd, err)
		}
	}
}

// TestLoggedHighWaterIsClamped: a data dir written by a node whose
// "now" ran ten years ahead (a clock gone wrong, or a version that took
// callers' times on trust) holds that mark in its snapshot and its log.
// A node on a correct clock loads it clamped, counts it per source, and
// caps work at its real time: an impression is not stale, a capped
// viewer stays capped through a sweep.
func TestLoggedHighWaterIsClamped(t *testing.T) {
	dir := t.TempDir()
	n := startDurable(t, dir, func(c *node.Config) { c.Clock = func() int64 { return time.Now().UnixMilli() + tenYears } })
	c := newClient(t, []*node.Node{n})
	ctx := context.Background()
	day := fcap.Cap{Scope: "campaign", ID: "day", Limit: 1, Window: 24 * time.Hour}
	if _, err := c.Allow(ctx, "before-snapshot", []fcap.Cap{day}); err != nil { // at the node's clock, ten years ahead
		t.Fatal(err)
	}
	if err := n.Snapshot(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Allow(ctx, "after-snapshot", []fcap.Cap{day}); err != nil {
		t.Fatal(err)
	}
	stop(t, n)

	reg := prometheus.NewRegistry()
	n = startDurable(t, dir, func(c *node.Config) { c.Registerer, c.Gatherer = reg, reg })
	if hw, limit := n.Engine().HighWater(), time.Now().UnixMilli(); hw > limit {
		t.Fatalf("high water %d after the restart, past the clock %d", hw, limit)
	}
	for _, src := range []string{"snapshot", "log"} {
		if got := labelled(t, reg, "fcap_time_clamped_total", "source", src); got < 1 {
			t.Errorf("fcap_time_clamped_total{source=%q} = %v, want at least 1", src, got)
		}
	}
	now := time.Now().UnixMilli()
	st, err := n.Engine().Record("viewer", fcap.Impression{ID: "real-time", Time: now, Caps: []fcap.Cap{day}})
	if err != nil || st != fcap.Recorded {
		t.Fatalf("a real-time impression after the restart: %v %v, want recorded", st, err)
	}
	n.Engine().Sweep(1 << 30)
	c = newClient(t, []*node.Node{n})
	if vd, err := c.Allow(ctx, "viewer", []fcap.Cap{day}); err != nil || vd.Allowed {
		t.Fatalf("the capped viewer after the restart and a sweep: %+v %v, want denied", vd, err)
	}
}

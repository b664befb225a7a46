package main

import (
	"context"
	"net"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// startRedis runs a private redis-server for one test and returns its
// address. Tests that need it skip where redis-server is not installed
// (CI has none; scripts/bench.sh installs it).
func startRedis(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skip("redis-server is not installed: the Redis recipes are tested only where it is (apt-get install redis-server)")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	addr := "127.0.0.1:" + strconv.Itoa(port)
	for range 100 {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return addr
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("redis-server on %s never answered", addr)
	return ""
}

// Times below are the recipe's own clock, as fcap's are; the window is
// long enough that Redis's real-time PEXPIRE never fires during a test.
const testWindow = 100_000

func newTestRedis(t *testing.T, addr, kind, check string) *redisTarget {
	t.Helper()
	w := workload{Kind: "check", Viewers: 10, Campaigns: 4, Candidates: 4, Zipf: 1.1, ZipfV: 1, Limit: 2, Window: testWindow}
	rt, err := newRedisTarget(kind, addr, &w, newIDs(&w), 2, check)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt
}

// TestRedisSlidingRecipe checks the sliding-window script against the
// contract: an impression at t counts at now iff t > now - window, and
// both check variants count exactly what Allow would.
func TestRedisSlidingRecipe(t *testing.T) {
	addr := startRedis(t)
	ctx := context.Background()
	pipe := newTestRedis(t, addr, "redis-sliding", "pipeline")
	lua := newTestRedis(t, addr, "redis-sliding", "lua")
	const w = testWindow
	steps := []struct {
		now  int64
		want bool
	}{
		{0, true}, {10, true}, {20, false}, // limit 2
		{w - 1, false},  // 0 is still inside the window
		{w, true},       // 0 is exactly a window old: aged out
		{w + 9, false},  // 10 and w count
		{w + 10, true},  // 10 aged out
		{w + 11, false}, // w and w+10 count
	}
	for _, s := range steps {
		got, err := pipe.Allow(ctx, "v1", 0, s.now)
		if err != nil || got != s.want {
			t.Fatalf("Allow at %d = %v, %v; want %v", s.now, got, err, s.want)
		}
	}
	// Campaign 0 now holds w and w+10; campaign 1 nothing; campaign 2 one
	// recorded impression, recorded twice (same id: counted once);
	// campaign 3 two.
	for _, rec := range []struct {
		c  int
		id string
		t  int64
	}{{2, "imp-a", w}, {2, "imp-a", w}, {3, "imp-b", w}, {3, "imp-c", w + 1}} {
		if err := pipe.Record(ctx, "v1", rec.c, rec.id, rec.t); err != nil {
			t.Fatal(err)
		}
	}
	// At each time, both variants must count what the contract counts,
	// including exactly at a window's edge.
	for _, now := range []int64{w - 1, w + 9, w + 11, 2 * w, 2*w + 1, 2*w + 10, 2*w + 11} {
		a, err := pipe.Check(ctx, "v1", []int{0, 1, 2, 3}, now)
		if err != nil {
			t.Fatal(err)
		}
		b, err := lua.Check(ctx, "v1", []int{0, 1, 2, 3}, now)
		if err != nil {
			t.Fatal(err)
		}
		want := modelAllowed(now, [][]int64{{w, w + 10}, nil, {w}, {w, w + 1}}, 2)
		if a != want || b != want {
			t.Errorf("Check at %d: pipeline %d, lua %d allowed; want %d", now, a, b, want)
		}
	}
}

// modelAllowed is the contract: how many of the counters (entry times)
// have fewer than limit entries t > now - window.
func modelAllowed(now int64, counters [][]int64, limit int) int {
	allowed := 0
	for _, ts := range counters {
		n := 0
		for _, t := range ts {
			if t > now-testWindow {
				n++
			}
		}
		if n < limit {
			allowed++
		}
	}
	return allowed
}

// TestRedisFixedRecipe checks the fixed-window recipe: a calendar window
// [k*window, (k+1)*window), a denial records nothing, GETs and MGET agree.
func TestRedisFixedRecipe(t *testing.T) {
	addr := startRedis(t)
	ctx := context.Background()
	pipe := newTestRedis(t, addr, "redis-fixed", "pipeline")
	mget := newTestRedis(t, addr, "redis-fixed", "lua")
	if pipe.CheckVariant() != "pipeline" || mget.CheckVariant() != "mget" {
		t.Fatalf("variants %q, %q", pipe.CheckVariant(), mget.CheckVariant())
	}
	const w = testWindow
	for _, s := range []struct {
		now  int64
		want bool
	}{{0, true}, {500, true}, {600, false}, {700, false}, {w, true}, {w + 1, true}, {w + 2, false}} {
		got, err := pipe.Allow(ctx, "v1", 0, s.now)
		if err != nil || got != s.want {
			t.Fatalf("Allow at %d = %v, %v; want %v", s.now, got, err, s.want)
		}
	}
	if err := pipe.Record(ctx, "v1", 1, "imp-1", 800); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		now  int64
		want int
	}{
		{900, 3},   // campaign 0 is full in window 0 (the denials did not count), 1 holds 1
		{w + 5, 3}, // window 1: campaign 0 full again, 1 is empty
	} {
		a, err := pipe.Check(ctx, "v1", []int{0, 1, 2, 3}, tc.now)
		if err != nil {
			t.Fatal(err)
		}
		b, err := mget.Check(ctx, "v1", []int{0, 1, 2, 3}, tc.now)
		if err != nil {
			t.Fatal(err)
		}
		if a != tc.want || b != tc.want {
			t.Errorf("Check at %d: pipeline %d, mget %d allowed; want %d", tc.now, a, b, tc.want)
		}
	}
}

// TestRedisMemoryProbe loads a small memory benchmark into Redis through
// the recipe's record and reads INFO back.
func TestRedisMemoryProbe(t *testing.T) {
	addr := startRedis(t)
	m := memLoad{name: "r", kind: "redis-sliding", addrs: addr, viewers: 200, campaigns: 5, imps: 5,
		limit: 5, window: testWindow, concurrency: 4, timeout: time.Second}
	res, err := m.exec(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	mr := res.Memory
	if mr.Keys != 1000 || mr.ServerKeys != 1000 || mr.Errors != 0 || mr.After <= mr.Before || mr.BytesPerKey <= 0 || mr.Method != "zadd" {
		t.Fatalf("memory result %+v", mr)
	}
}

// TestRedisKeys pins the key shapes: viewer:campaign, the Cluster's hash
// tag around the viewer, and the fixed recipe's window index.
func TestRedisKeys(t *testing.T) {
	for _, tc := range []struct {
		kind string
		want string
	}{
		{"redis-sliding", "viewer-7:campaign-1"},
		{"redis-cluster-sliding", "{viewer-7}:campaign-1"},
		{"redis-fixed", "viewer-7:campaign-1:3"},
		{"redis-cluster-fixed", "{viewer-7}:campaign-1:3"},
	} {
		rt := &redisTarget{camps: []string{":campaign-0", ":campaign-1"}, window: 1000}
		rt.cluster = tc.kind == "redis-cluster-sliding" || tc.kind == "redis-cluster-fixed"
		rt.fixed = tc.kind == "redis-fixed" || tc.kind == "redis-cluster-fixed"
		if got := rt.key("viewer-7", 1, 3500); got != tc.want {
			t.Errorf("%s: key %q, want %q", tc.kind, got, tc.want)
		}
	}
	rt := &redisTarget{window: 1000}
	if got := rt.untilWindowEnd(3500); got != 500 {
		t.Errorf("untilWindowEnd(3500) = %d, want 500", got)
	}
}

package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// The standard Redis frequency-capping recipes, given their best shot:
// EVALSHA (never EVAL), pipelines wherever the recipe allows one, and a
// pool of connections sized to the callers so no caller waits for a
// connection.
//
// Keys are "viewer:campaign" ("{viewer}:campaign" on a Redis Cluster, so
// all of one viewer's keys share a hash slot and a 100-campaign check is
// one node, one pipeline or one script, as fcap's one hop is). The fixed
// recipe appends ":bucket", the calendar window's index now/window.
//
// Script arguments are the caller's clock, as fcap's are: the scripts
// never read Redis's own time, so both systems judge the same window.

// slidingAllowScript is the exact sliding-window recipe: prune what is
// at least a window old, count, and add a unique member when under the
// limit. An entry at t counts at now iff t > now-window, the same rule as
// fcap's (ZREMRANGEBYSCORE's bounds are inclusive).
//
// KEYS[1] the counter; ARGV now, window (ms), limit, unique member.
const slidingAllowScript = `
local now = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[3]) then
  redis.call('ZADD', KEYS[1], now, ARGV[4])
  redis.call('PEXPIRE', KEYS[1], window)
  return 1
end
return 0
`

// slidingCheckScript counts every key's entries inside the window in one
// call: ZCOUNT key (now-window +inf is exactly what the Allow script's
// prune-then-ZCARD would count, without writing. Read-only (no-writes),
// so it could also run on replicas.
//
// KEYS the counters; ARGV[1] now-window.
const slidingCheckScript = `#!lua flags=no-writes
local min = '(' .. ARGV[1]
local out = {}
for i = 1, #KEYS do
  out[i] = redis.call('ZCOUNT', KEYS[i], min, '+inf')
end
return out
`

// fixedAllowScript is the fixed-window recipe as an atomic
// check-then-INCR: a denied request must not count as an impression, so
// the plain INCR-then-compare (which counts refusals too, and a MULTI
// cannot branch on a value) does not fit a frequency cap. The key expires
// when its calendar window ends.
//
// KEYS[1] the window's counter; ARGV limit, ms until the window ends.
const fixedAllowScript = `
local n = tonumber(redis.call('GET', KEYS[1]) or '0')
if n >= tonumber(ARGV[1]) then
  return 0
end
if redis.call('INCR', KEYS[1]) == 1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 1
`

// redisTarget drives Redis (standalone or Cluster) with one recipe.
type redisTarget struct {
	name    string
	rdb     redis.UniversalClient
	fixed   bool   // the fixed-window recipe (else sliding)
	check   string // "pipeline" or "lua" (sliding) / "mget" (fixed)
	cluster bool
	// camps are the ":campaign-N" key suffixes, per campaign index.
	camps         []string
	limit, window int64
	allowSHA      string
	checkSHA      string
	member        string        // prefix of the Allow script's unique members
	seq           atomic.Uint64 // and their counter
	keys          chan []string // reusable key slices for Check
}

// redisKinds are the Redis target kinds --target accepts.
var redisKinds = []string{"redis-sliding", "redis-fixed", "redis-cluster-sliding", "redis-cluster-fixed"}

func isRedisKind(kind string) bool { return slices.Contains(redisKinds, kind) }

// newRedisTarget connects to Redis at addrs (any Cluster nodes' addresses
// for the cluster kinds), loads the recipe's scripts and pre-dials pool
// connections. check is "pipeline" or "lua"; for the fixed recipe "lua"
// means its one-call form, MGET, which needs no script.
func newRedisTarget(kind, addrs string, w *workload, x *ids, pool int, check string) (*redisTarget, error) {
	if !isRedisKind(kind) {
		return nil, fmt.Errorf("unknown Redis target %q", kind)
	}
	if check != "pipeline" && check != "lua" {
		return nil, fmt.Errorf("--redis-check must be pipeline or lua, got %q", check)
	}
	t := &redisTarget{
		name:    kind,
		fixed:   strings.HasSuffix(kind, "-fixed"),
		cluster: strings.HasPrefix(kind, "redis-cluster-"),
		check:   check,
		limit:   w.Limit,
		window:  w.Window,
		member:  strconv.FormatInt(time.Now().UnixNano(), 36) + "-",
		keys:    make(chan []string, 4096),
	}
	if t.fixed && check == "lua" {
		t.check = "mget"
	}
	for _, c := range x.campaigns {
		t.camps = append(t.camps, ":"+c)
	}
	nodes := strings.Split(addrs, ",")
	// One connection per caller, dialled up front, for plain commands and
	// for pipelines alike; no retries (a failure is counted, not hidden);
	// the call's context (fcapbench's --timeout) bounds every round trip.
	noMaint := &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	if t.cluster {
		t.rdb = redis.NewClusterClient(&redis.ClusterOptions{
			Addrs: nodes, PoolSize: pool, MinIdleConns: pool, PipelinePoolSize: pool,
			PipelineReadBufferSize: 128 << 10, PipelineWriteBufferSize: 128 << 10,
			MaxRetries: -1, ContextTimeoutEnabled: true, DisableIdentity: true,
			MaintNotificationsConfig: noMaint,
		})
	} else {
		t.rdb = redis.NewClient(&redis.Options{
			Addr: nodes[0], PoolSize: pool, MinIdleConns: pool, PipelinePoolSize: pool,
			MaxRetries: -1, ContextTimeoutEnabled: true, DisableIdentity: true,
			MaintNotificationsConfig: noMaint,
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := t.loadScripts(ctx); err != nil {
		t.rdb.Close()
		return nil, fmt.Errorf("redis at %s: %w", addrs, err)
	}
	return t, nil
}

func (t *redisTarget) loadScripts(ctx context.Context) error {
	if err := t.rdb.Ping(ctx).Err(); err != nil {
		return err
	}
	var err error
	if t.fixed {
		t.allowSHA, err = t.rdb.ScriptLoad(ctx, fixedAllowScript).Result()
		return err
	}
	if t.allowSHA, err = t.rdb.ScriptLoad(ctx, slidingAllowScript).Result(); err != nil {
		return err
	}
	t.checkSHA, err = t.rdb.ScriptLoad(ctx, slidingCheckScript).Result()
	return err
}

func (t *redisTarget) Name() string { return t.name }

// CheckVariant says how Check asks: "pipeline", "lua" or "mget".
func (t *redisTarget) CheckVariant() string { return t.check }

// key is the counter of viewer and campaign index at now.
func (t *redisTarget) key(viewer string, campaign int, now int64) string {
	var b strings.Builder
	b.Grow(len(viewer) + len(t.camps[campaign]) + 16)
	if t.cluster {
		b.WriteByte('{')
		b.WriteString(viewer)
		b.WriteByte('}')
	} else {
		b.WriteString(viewer)
	}
	b.WriteString(t.camps[campaign])
	if t.fixed {
		b.WriteByte(':')
		b.WriteString(strconv.FormatInt(now/t.window, 10))
	}
	return b.String()
}

// untilWindowEnd is how long a fixed window's counter must live.
func (t *redisTarget) untilWindowEnd(now int64) int64 {
	return (now/t.window+1)*t.window - now
}

func (t *redisTarget) Allow(ctx context.Context, viewer string, campaign int, now int64) (bool, error) {
	key := []string{t.key(viewer, campaign, now)}
	var n int64
	var err error
	if t.fixed {
		n, err = t.rdb.EvalSha(ctx, t.allowSHA, key, t.limit, t.untilWindowEnd(now)).Int64()
	} else {
		member := t.member + strconv.FormatUint(t.seq.Add(1), 36)
		n, err = t.rdb.EvalSha(ctx, t.allowSHA, key, now, t.window, t.limit, member).Int64()
	}
	return n == 1, err
}

func (t *redisTarget) Check(ctx context.Context, viewer string, campaigns []int, now int64) (int, error) {
	var keys []string
	select {
	case keys = <-t.keys:
	default:
	}
	keys = keys[:0]
	for _, c := range campaigns {
		keys = append(keys, t.key(viewer, c, now))
	}
	defer func() {
		select {
		case t.keys <- keys:
		default:
		}
	}()
	counts, err := t.counts(ctx, keys, now)
	if err != nil {
		return 0, err
	}
	allowed := 0
	for _, n := range counts {
		if n < t.limit {
			allowed++
		}
	}
	return allowed, nil
}

// counts returns each key's count in the window, asked the configured way.
func (t *redisTarget) counts(ctx context.Context, keys []string, now int64) ([]int64, error) {
	switch {
	case t.check == "lua":
		return t.rdb.EvalSha(ctx, t.checkSHA, keys, now-t.window).Int64Slice()
	case t.check == "mget":
		vals, err := t.rdb.MGet(ctx, keys...).Result()
		if err != nil {
			return nil, err
		}
		out := make([]int64, len(vals))
		for i, v := range vals {
			if s, ok := v.(string); ok {
				if out[i], err = strconv.ParseInt(s, 10, 64); err != nil {
					return nil, err
				}
			}
		}
		return out, nil
	case t.fixed: // a pipeline of GETs
		cmds := make([]*redis.StringCmd, len(keys))
		_, _ = t.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, k := range keys {
				cmds[i] = p.Get(ctx, k)
			}
			return nil
		})
		out := make([]int64, len(keys))
		for i, c := range cmds {
			n, err := c.Int64()
			if err != nil && !errors.Is(err, redis.Nil) {
				return nil, err
			}
			out[i] = n
		}
		return out, nil
	default: // sliding, a pipeline of ZCOUNTs
		min := "(" + strconv.FormatInt(now-t.window, 10)
		cmds := make([]*redis.IntCmd, len(keys))
		if _, err := t.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i, k := range keys {
				cmds[i] = p.ZCount(ctx, k, min, "+inf")
			}
			return nil
		}); err != nil {
			return nil, err
		}
		out := make([]int64, len(keys))
		for i, c := range cmds {
			out[i] = c.Val()
		}
		return out, nil
	}
}

// Record is the recipe's write of a played impression, in one round trip:
// ZADD with the impression id as member (a redelivered impression is not
// counted twice) and PEXPIRE; for the fixed recipe INCR and PEXPIRE.
func (t *redisTarget) Record(ctx context.Context, viewer string, campaign int, id string, now int64) error {
	key := t.key(viewer, campaign, now)
	_, err := t.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		if t.fixed {
			p.Incr(ctx, key)
			p.PExpire(ctx, key, time.Duration(t.untilWindowEnd(now))*time.Millisecond)
		} else {
			p.ZAdd(ctx, key, redis.Z{Score: float64(now), Member: id})
			p.PExpire(ctx, key, time.Duration(t.window)*time.Millisecond)
		}
		return nil
	})
	return err
}

// Failed is 0: Redis has no failure policy, a failed call is an error.
func (t *redisTarget) Failed() int64 { return 0 }

func (t *redisTarget) Close() error { return t.rdb.Close() }

package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// The memory figure: load the data of node/engine's BenchmarkMemoryPerKey
// (200,000 viewers x 5 campaigns = 1M keys, 5 impressions each on a cap-5
// sliding window of a day) into a target through its normal client path,
// and divide what the server's memory grew by the keys loaded.

// MemResult is what loading measured. For fcap the memory is the node's
// Go heap (go_memstats_heap_alloc_bytes, after a forced GC when fcapd
// serves /debug/pprof) and its RSS; for Redis, INFO's used_memory and
// used_memory_rss. Both are read before and after loading.
type MemResult struct {
	Method      string  `json:"method"` // allow, record (fcap); zadd, incr (Redis)
	Viewers     int     `json:"viewers"`
	Campaigns   int     `json:"campaigns"`
	Impressions int     `json:"impressions"`
	Keys        int64   `json:"keys"`        // counters loaded
	ServerKeys  int64   `json:"server_keys"` // as the server counts them afterwards (fcap_engine_keys, DBSIZE), a cross-check
	Errors      int64   `json:"errors"`
	Source      string  `json:"source"` // the figure's name on the server
	Before      int64   `json:"before_bytes"`
	After       int64   `json:"after_bytes"`
	RSSBefore   int64   `json:"rss_before_bytes"`
	RSSAfter    int64   `json:"rss_after_bytes"`
	BytesPerKey float64 `json:"bytes_per_key"`
	RSSPerKey   float64 `json:"rss_bytes_per_key"`
	ForcedGC    bool    `json:"forced_gc"` // fcap: a GC ran right before each reading
}

// memLoad describes one load.
type memLoad struct {
	name, kind, addrs string
	httpAddr          string // fcap: the node's metrics address
	method            string // fcap: allow or record
	viewers           int
	campaigns, imps   int
	limit, window     int64
	concurrency       int
	timeout           time.Duration
}

func (m *memLoad) validate() error {
	switch {
	case m.kind == "fcap":
		if m.method != "allow" && m.method != "record" {
			return fmt.Errorf("fcap loads with allow or record, not %q", m.method)
		}
		if m.httpAddr == "" {
			return errors.New("fcap's memory is read from its metrics: give the node's HTTP address")
		}
	case m.kind == "redis-sliding":
		m.method = "zadd"
	case m.kind == "redis-fixed":
		m.method = "incr"
	default:
		return fmt.Errorf("memory loads fcap, redis-sliding or redis-fixed, not %q", m.kind)
	}
	if m.viewers < 1 || m.campaigns < 1 || m.imps < 1 || m.concurrency < 1 {
		return errors.New("need viewers, campaigns, impressions and concurrency >= 1")
	}
	return nil
}

// memProbe reads a server's memory: bytes (heap or used_memory), RSS and
// the keys it holds.
type memProbe func(ctx context.Context) (bytes, rss, keys int64, err error)

// exec loads the data and measures.
func (m *memLoad) exec(ctx context.Context, progress io.Writer) (*Result, error) {
	if err := m.validate(); err != nil {
		return nil, err
	}
	w := workload{Kind: "check", Viewers: m.viewers, Campaigns: m.campaigns, Candidates: 1, Zipf: 1.1, ZipfV: 1,
		Limit: m.limit, Window: m.window}
	x := newIDsNamed(&w, func(b []byte, v int) []byte { return fmt.Appendf(b, "viewer-%07d", v) }) // the engine benchmark's ids
	tgt, err := newTarget(m.kind, m.addrs, &w, x, targetOpts{timeout: m.timeout, conns: 2, pool: m.concurrency, redisCheck: "pipeline"})
	if err != nil {
		return nil, err
	}
	defer tgt.Close()
	mr := &MemResult{Method: m.method, Viewers: m.viewers, Campaigns: m.campaigns, Impressions: m.imps,
		Keys: int64(m.viewers) * int64(m.campaigns)}
	var probe memProbe
	if m.kind == "fcap" {
		probe = fcapProbe(m.httpAddr, mr)
		mr.Source = "go_memstats_heap_alloc_bytes"
	} else {
		probe = redisProbe(tgt.(*redisTarget).rdb)
		mr.Source = "used_memory"
	}
	var keysBefore int64
	if mr.Before, mr.RSSBefore, keysBefore, err = probe(ctx); err != nil {
		return nil, err
	}
	ft, _ := tgt.(*fcapTarget)
	var acked int64
	if ft != nil {
		acked = ft.c.Stats().RecordsAcked
	}
	start := time.Now()
	mr.Errors = m.load(ctx, tgt, x, progress)
	if ft != nil && m.method == "record" {
		// Record is asynchronous: wait for every impression's answer.
		fctx, cancel := context.WithTimeout(ctx, time.Minute)
		err := ft.c.Flush(fctx)
		cancel()
		if err != nil {
			return nil, err
		}
		mr.Errors += max(0, mr.Keys*int64(m.imps)-mr.Errors-(ft.c.Stats().RecordsAcked-acked))
	}
	secs := time.Since(start).Seconds()
	var keysAfter int64
	if mr.After, mr.RSSAfter, keysAfter, err = probe(ctx); err != nil {
		return nil, err
	}
	mr.ServerKeys = keysAfter - keysBefore
	mr.BytesPerKey = float64(mr.After-mr.Before) / float64(mr.Keys)
	mr.RSSPerKey = float64(mr.RSSAfter-mr.RSSBefore) / float64(mr.Keys)
	name := m.name
	if name == "" {
		name = m.kind
	}
	res := &Result{Target: name, Kind: m.kind, Workload: "load", Mode: "memory", Concurrency: m.concurrency,
		Seconds: secs, Requests: mr.Keys * int64(m.imps), Errors: mr.Errors, Memory: mr}
	res.RequestsPS = float64(res.Requests) / secs
	if mr.Errors > 0 {
		return res, fmt.Errorf("%s: %d impressions failed to load", name, mr.Errors)
	}
	return res, nil
}

// load writes every impression, viewers spread over the callers, each
// viewer's impressions in time order. It returns how many failed.
func (m *memLoad) load(ctx context.Context, tgt target, x *ids, progress io.Writer) int64 {
	t0 := time.Now().UnixMilli()
	var errs, done atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	if progress != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(time.Second)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
					fmt.Fprintf(progress, "  %s: %d of %d viewers loaded\n", m.name, done.Load(), m.viewers)
				}
			}
		}()
	}
	var workers sync.WaitGroup
	for i := range m.concurrency {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for v := i; v < m.viewers; v += m.concurrency {
				for k := range m.imps {
					for c := range m.campaigns {
						if err := m.one(ctx, tgt, x.viewer(v), v, c, k, t0+int64(k*1000+c)); err != nil {
							errs.Add(1)
						}
					}
				}
				done.Add(1)
			}
		}()
	}
	workers.Wait()
	close(stop)
	wg.Wait()
	return errs.Load()
}

// one writes one impression the load's way.
func (m *memLoad) one(ctx context.Context, tgt target, viewer string, v, c, k int, now int64) error {
	cctx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	if m.method == "allow" {
		ok, err := tgt.Allow(cctx, viewer, c, now)
		if err == nil && !ok {
			err = errors.New("denied")
		}
		return err
	}
	id := "imp-" + strconv.Itoa(v) + "-" + strconv.Itoa(c) + "-" + strconv.Itoa(k)
	if m.kind != "fcap" {
		return tgt.Record(cctx, viewer, c, id, now)
	}
	// fcap's Record only queues; while the queue is full, wait for the
	// sender to drain it (for longer than a call's deadline: a busy
	// machine can hold the queue full for a while).
	for deadline := time.Now().Add(time.Minute); ; {
		err := tgt.Record(cctx, viewer, c, id, now)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// fcapProbe reads a node's heap and RSS from its /metrics, after forcing a
// GC through /debug/pprof/heap?gc=1 when the node serves profiles
// (fcapd --pprof); mr.ForcedGC says whether it could.
func fcapProbe(httpAddr string, mr *MemResult) memProbe {
	hc := &http.Client{Timeout: 30 * time.Second}
	get := func(ctx context.Context, path string) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, "GET", "http://"+httpAddr+path, nil)
		if err != nil {
			return nil, err
		}
		return hc.Do(req)
	}
	first := true
	return func(ctx context.Context) (bytes, rss, keys int64, err error) {
		resp, err := get(ctx, "/debug/pprof/heap?gc=1")
		if err != nil {
			return 0, 0, 0, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		gc := resp.StatusCode == http.StatusOK
		if first {
			mr.ForcedGC = gc
			first = false
		}
		mr.ForcedGC = mr.ForcedGC && gc
		resp, err = get(ctx, "/metrics")
		if err != nil {
			return 0, 0, 0, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return 0, 0, 0, fmt.Errorf("GET %s/metrics: %s", httpAddr, resp.Status)
		}
		vals, err := promValues(resp.Body, "go_memstats_heap_alloc_bytes", "process_resident_memory_bytes", "fcap_engine_keys")
		if err != nil {
			return 0, 0, 0, fmt.Errorf("%s/metrics: %w", httpAddr, err)
		}
		return vals[0], vals[1], vals[2], nil
	}
}

// promValues reads the named unlabelled samples from a Prometheus text
// exposition, in the order asked.
func promValues(r io.Reader, names ...string) ([]int64, error) {
	out := make([]int64, len(names))
	found := make([]bool, len(names))
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if !ok || strings.HasPrefix(name, "#") {
			continue
		}
		for i, n := range names {
			if name == n {
				f, err := strconv.ParseFloat(strings.TrimSpace(val), 64)
				if err != nil {
					return nil, fmt.Errorf("%s: %w", n, err)
				}
				out[i], found[i] = int64(f), true
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	for i, ok := range found {
		if !ok {
			return nil, fmt.Errorf("no %s", names[i])
		}
	}
	return out, nil
}

// redisProbe reads INFO memory and DBSIZE.
func redisProbe(rdb redis.UniversalClient) memProbe {
	return func(ctx context.Context) (bytes, rss, keys int64, err error) {
		info, err := rdb.Info(ctx, "memory").Result()
		if err != nil {
			return 0, 0, 0, err
		}
		if bytes, err = infoField(info, "used_memory"); err != nil {
			return 0, 0, 0, err
		}
		if rss, err = infoField(info, "used_memory_rss"); err != nil {
			return 0, 0, 0, err
		}
		keys, err = rdb.DBSize(ctx).Result()
		return bytes, rss, keys, err
	}
}

// infoField reads one integer field of an INFO reply.
func infoField(info, field string) (int64, error) {
	for _, line := range strings.Split(info, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && k == field {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("INFO has no %s", field)
}

// memFlags are the memory benchmark's shape, shared by load and suite.
func memFlags(fs *flag.FlagSet, m *memLoad) {
	fs.IntVar(&m.viewers, "mem-viewers", 200_000, "memory: viewers loaded")
	fs.IntVar(&m.campaigns, "mem-campaigns", 5, "memory: campaigns per viewer (keys = viewers x campaigns)")
	fs.IntVar(&m.imps, "mem-impressions", 5, "memory: impressions per key")
}

func runLoad(args []string, stdout, stderr io.Writer) int {
	m := &memLoad{}
	var jsonOut string
	var quiet bool
	fs := flag.NewFlagSet("fcapbench load", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&m.kind, "target", "fcap", "fcap, redis-sliding or redis-fixed (a standalone Redis)")
	fs.StringVar(&m.name, "name", "", "the target's name in the results (default: --target)")
	fs.StringVar(&m.addrs, "addr", "127.0.0.1:7700", "target address (fcap: a node's data-plane address)")
	fs.StringVar(&m.httpAddr, "http", "127.0.0.1:7780", "fcap: the node's metrics address (run fcapd --pprof so a GC can be forced before each reading)")
	fs.StringVar(&m.method, "method", "allow", "fcap: load with allow (counters only) or record (impressions with ids, remembered for idempotency)")
	memFlags(fs, m)
	fs.Int64Var(&m.limit, "limit", 5, "the cap's limit")
	fs.Int64Var(&m.window, "window", 86_400_000, "the cap's window, milliseconds")
	fs.IntVar(&m.concurrency, "concurrency", 64, "concurrent callers")
	fs.DurationVar(&m.timeout, "timeout", time.Second, "per-call deadline")
	fs.StringVar(&jsonOut, "json", "", "write the result to this JSON file")
	fs.BoolVar(&quiet, "quiet", false, "no progress line")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if err := m.validate(); err != nil {
		fmt.Fprintf(stderr, "fcapbench load: %v\n", err)
		return 2
	}
	var progress io.Writer = stderr
	if quiet {
		progress = nil
	}
	res, err := m.exec(context.Background(), progress)
	if res != nil {
		printMemTable(stdout, []*Result{res})
	}
	if err != nil {
		fmt.Fprintf(stderr, "fcapbench load: %v\n", err)
		return 1
	}
	if jsonOut != "" {
		if err := writeJSON(jsonOut, []*Result{res}); err != nil {
			fmt.Fprintf(stderr, "fcapbench load: %v\n", err)
			return 1
		}
	}
	return 0
}

func printMemTable(w io.Writer, results []*Result) {
	fmt.Fprintf(w, "%-16s %-7s %9s %9s %10s %10s %-30s %6s %7s\n", "target", "method", "keys", "srv keys", "bytes/key", "RSS/key", "measured as", "load s", "errors")
	for _, r := range results {
		m := r.Memory
		if m == nil {
			continue
		}
		src := m.Source
		if r.Kind == "fcap" && !m.ForcedGC {
			src += " (no forced GC)"
		}
		fmt.Fprintf(w, "%-16s %-7s %9d %9d %10.1f %10.1f %-30s %6.1f %7d\n", r.Target, m.Method, m.Keys, m.ServerKeys, m.BytesPerKey, m.RSSPerKey, src, r.Seconds, m.Errors)
	}
}

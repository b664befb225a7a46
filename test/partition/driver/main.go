// Command driver is the partition suite's ad server. The suite runs it
// inside a network namespace with `ip netns exec NS driver MODE ...`:
//
//	driver race    races strict Allows over waves of viewers and writes
//	               every Allow (invocation, return, viewer, result) as a
//	               JSON line (partition.Op)
//	driver counts  reads each viewer's count back through a strict Check
//	driver settled waits until every node is active, ready and holds
//	               everything it owns
//
// It talks only to the addresses it is given.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/proto"
	"github.com/fcap-io/fcap/ring"
	"github.com/fcap-io/fcap/test/partition"
)

// strictCap is the cap every viewer races for: partition.Limit per
// viewer in a day, strict.
var strictCap = fcap.Cap{Scope: "campaign", ID: "partition", Limit: partition.Limit, Window: 24 * time.Hour, Mode: fcap.Strict}

// softCap is the cap the soft workers race for: the same limit, soft.
var softCap = fcap.Cap{Scope: "campaign", ID: "partition-soft", Limit: partition.Limit, Window: 24 * time.Hour}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: driver race|counts|settled [flags]")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "race":
		err = race(os.Args[2:])
	case "counts":
		err = counts(os.Args[2:])
	case "settled":
		err = settled(os.Args[2:])
	default:
		err = fmt.Errorf("unknown mode %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "driver %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func newClient(seeds string, timeout time.Duration, onGiveBack func(client.GiveBack)) (*client.Client, error) {
	cfg := client.DefaultConfig(strings.Split(seeds, ",")...)
	cfg.OnGiveBack = onGiveBack
	cfg.Timeout = timeout
	cfg.DialTimeout = timeout
	cfg.RecordTimeout = timeout
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	c, err := client.New(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		closeClient(c)
		return nil, fmt.Errorf("client not ready: %w", err)
	}
	return c, nil
}

func closeClient(c *client.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c.Close(ctx)
}

// Viewer names the i-th viewer of wave w of a run.
func viewer(prefix string, w, i int) string { return fmt.Sprintf("%s-w%d-%d", prefix, w, i) }

// race: connect, print "ready", wait for "go <unix ns>" on stdin, then
// from that instant on race strict Allows for --duration: in each wave
// of --wave, every worker calls Allow on a random viewer of that wave's
// --per-wave viewers (the same viewers in every driver of the run, so
// the sides race for them), one call every --pace.
func race(args []string) error {
	fs := flag.NewFlagSet("race", flag.ContinueOnError)
	seeds := fs.String("seeds", "", "data-plane addresses, comma-separated")
	side := fs.String("side", "", "the node this driver runs beside")
	prefix := fs.String("prefix", "v", "viewer name prefix")
	duration := fs.Duration("duration", 10*time.Second, "how long to race")
	wave := fs.Duration("wave", time.Second, "how long each wave of viewers is raced for")
	perWave := fs.Int("per-wave", 3, "viewers of each wave")
	workers := fs.Int("workers", 4, "concurrent callers")
	pace := fs.Duration("pace", 20*time.Millisecond, "least time between one worker's calls")
	timeout := fs.Duration("timeout", time.Second, "deadline of one Allow")
	out := fs.String("out", "", "file of JSON lines, one per Allow")
	softWorkers := fs.Int("soft-workers", 0, "concurrent callers racing soft Allows on viewers of their own (prefix-s)")
	softOut := fs.String("soft-out", "", "file of JSON lines, one per soft Allow (with --soft-workers)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *seeds == "" || *out == "" || *perWave < 1 || *workers < 1 || *wave <= 0 {
		return errors.New("--seeds, --out, and positive --per-wave, --workers, --wave are required")
	}
	if *softWorkers < 0 || (*softWorkers > 0) != (*softOut != "") {
		return errors.New("--soft-workers and --soft-out go together")
	}
	var softEmit func(partition.Op)
	if *softWorkers > 0 {
		sf, err := os.Create(*softOut)
		if err != nil {
			return err
		}
		defer sf.Close()
		sw := bufio.NewWriterSize(sf, 1<<16)
		defer sw.Flush()
		var smu sync.Mutex
		senc := json.NewEncoder(sw)
		softEmit = func(op partition.Op) {
			smu.Lock()
			defer smu.Unlock()
			senc.Encode(op)
		}
	}
	f, err := os.Create(*out)
	if err != nil {
		return err
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<16)
	var (
		mu   sync.Mutex // guards enc (over w) and werr
		enc  = json.NewEncoder(w)
		werr error
		wg   sync.WaitGroup
	)
	emit := func(op partition.Op) {
		mu.Lock()
		defer mu.Unlock()
		if err := enc.Encode(op); err != nil && werr == nil {
			werr = err
		}
	}
	// A late grant the client gave back is an operation of the history
	// too: it frees the slot a call that failed closed had taken.
	c, err := newClient(*seeds, *timeout, func(g client.GiveBack) {
		if g.Result == "returned" {
			emit(partition.Op{Viewer: g.Viewer, Side: *side, Client: -1, Call: g.Start.UnixNano(), Return: g.End.UnixNano(), Result: partition.GivenBack})
		}
	})
	if err != nil {
		return err
	}
	defer closeClient(c)

	fmt.Println("ready")
	line, err := bufio.NewReader(os.Stdin).ReadString('\n')
	if err != nil {
		return fmt.Errorf("waiting for go: %w", err)
	}
	startStr, ok := strings.CutPrefix(strings.TrimSpace(line), "go ")
	start, perr := strconv.ParseInt(startStr, 10, 64)
	if !ok || perr != nil {
		return fmt.Errorf("want \"go <unix ns>\", got %q", line)
	}
	end := start + duration.Nanoseconds()

	for id := range *workers + *softWorkers {
		soft := id >= *workers
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(id)))
			for {
				now := time.Now().UnixNano()
				if now >= end {
					return
				}
				if now < start {
					time.Sleep(time.Duration(start - now))
					continue
				}
				wv := int((now - start) / wave.Nanoseconds())
				var op partition.Op
				if soft {
					op = allow(c, viewer(*prefix+"-s", wv, rng.IntN(*perWave)), *side, id, *timeout, softCap)
					softEmit(op)
				} else {
					op = allow(c, viewer(*prefix, wv, rng.IntN(*perWave)), *side, id, *timeout, strictCap)
					emit(op)
				}
				if d := time.Duration(op.Call + pace.Nanoseconds() - time.Now().UnixNano()); d > 0 {
					time.Sleep(d)
				}
			}
		}()
	}
	wg.Wait()
	// The client's give-backs still under way end with it.
	closeClient(c)
	mu.Lock()
	defer mu.Unlock()
	if werr != nil {
		return werr
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Println("done")
	return nil
}

// allow makes one Allow of c and says what came of it: granted, refused,
// or unknown (an error, a fail-closed verdict). A strict cap never fails
// open with the default policy; if it did, the grant was not the
// cluster's (unknown). A soft cap's fail-open is a grant the client made
// for want of an answer, which no node counted (granted, Err
// "fail-open").
func allow(c *client.Client, v, side string, id int, timeout time.Duration, cp fcap.Cap) partition.Op {
	// The context outlives the client's own deadline: the client decides
	// by its failure policy at its deadline, and that verdict is the
	// outcome an ad server would act on.
	ctx, cancel := context.WithTimeout(context.Background(), 2*timeout)
	defer cancel()
	op := partition.Op{Viewer: v, Side: side, Client: id, Call: time.Now().UnixNano()}
	vd, err := c.Allow(ctx, v, []fcap.Cap{cp})
	op.Return = time.Now().UnixNano()
	switch {
	case err != nil:
		op.Result, op.Err = partition.Unknown, err.Error()
	case vd.FailClosed:
		op.Result, op.Err = partition.Unknown, "fail-closed"
	case vd.FailOpen && cp.Mode == fcap.Strict:
		op.Result, op.Err = partition.Unknown, "fail-open"
	case vd.FailOpen:
		op.Result, op.Err = partition.Granted, "fail-open"
	case vd.Allowed:
		op.Result = partition.Granted
	default:
		op.Result = partition.Refused
	}
	return op
}

// counts: read each viewer named on stdin (one a line) back through a
// strict Check and print {"viewer": count} as one JSON object. A sliding
// counter keeps only its newest Limit entries, so a count is at most
// Limit. A viewer the cluster could not answer for is left out and
// named on stderr; the exit status is then 1.
func counts(args []string) error {
	fs := flag.NewFlagSet("counts", flag.ContinueOnError)
	seeds := fs.String("seeds", "", "data-plane addresses, comma-separated")
	timeout := fs.Duration("timeout", 5*time.Second, "deadline of one Check")
	if err := fs.Parse(args); err != nil {
		return err
	}
	c, err := newClient(*seeds, *timeout, nil)
	if err != nil {
		return err
	}
	defer closeClient(c)
	b, err := io.ReadAll(os.Stdin)
	if err != nil {
		return err
	}
	out := map[string]int64{}
	var failed []string
	cand := []fcap.Candidate{{Caps: []fcap.Cap{strictCap}}}
	for _, v := range strings.Fields(string(b)) {
		n, err := count(c, v, cand, *timeout)
		if err != nil {
			failed = append(failed, fmt.Sprintf("%s: %v", v, err))
			continue
		}
		out[v] = n
	}
	if err := json.NewEncoder(os.Stdout).Encode(out); err != nil {
		return err
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d viewers unanswered: %s", len(failed), strings.Join(failed, "; "))
	}
	return nil
}

func count(c *client.Client, v string, cand []fcap.Candidate, timeout time.Duration) (int64, error) {
	var last error
	for range 5 { // a viewer whose owner moved answers on a retry
		ctx, cancel := context.WithTimeout(context.Background(), 2*timeout)
		res, err := c.Check(ctx, v, cand)
		cancel()
		switch {
		case err != nil:
			last = err
		case res.Verdicts[0].Failed():
			last = errors.New("no answer (failure policy)")
		default:
			rem := res.CapsRemaining(0)
			if len(rem) != 1 {
				return 0, errors.New("the node sent no remaining count")
			}
			return partition.Limit - rem[0], nil
		}
	}
	return 0, last
}

// settled: poll every node until each counts --want active members, is
// active itself, has nothing syncing, under-replicated or claimed, and answers
// /readyz with 200; fail after --timeout, saying which node was not.
func settled(args []string) error {
	fs := flag.NewFlagSet("settled", flag.ContinueOnError)
	data := fs.String("data", "", "data-plane addresses of the nodes, comma-separated")
	httpAddrs := fs.String("http", "", "HTTP addresses of the nodes, comma-separated, in the same order")
	want := fs.Int("want", 0, "active members every node must count")
	timeout := fs.Duration("timeout", 60*time.Second, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	datas, https := strings.Split(*data, ","), strings.Split(*httpAddrs, ",")
	if *data == "" || len(datas) != len(https) || *want < 1 {
		return errors.New("--data, as many --http addresses, and --want are required")
	}
	deadline := time.Now().Add(*timeout)
	for {
		why := notSettled(datas, https, *want)
		if why == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not settled after %v: %s", *timeout, why)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func notSettled(datas, https []string, want int) string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for i, addr := range datas {
		var t proto.Topology
		if err := client.Call(ctx, addr, &proto.TopologyRequest{}, &t); err != nil {
			return fmt.Sprintf("%s: topology: %v", addr, err)
		}
		active := 0
		for _, m := range t.Members {
			if ring.State(m.State) == ring.Active {
				active++
			}
		}
		if active != want {
			return fmt.Sprintf("%s: %d active members, want %d", addr, active, want)
		}
		st, err := client.NodeStatus(ctx, addr)
		if err != nil {
			return fmt.Sprintf("%s: status: %v", addr, err)
		}
		if ring.State(st.State) != ring.Active || st.Syncing != 0 || st.UnderReplicated != 0 || st.Claimed != 0 {
			return fmt.Sprintf("%s: %v, syncing %d, under-replicated %d, claimed without a holder's copy %d", addr, ring.State(st.State), st.Syncing, st.UnderReplicated, st.Claimed)
		}
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+https[i]+"/readyz", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return fmt.Sprintf("%s: readyz: %v", https[i], err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Sprintf("%s: readyz: %s", https[i], resp.Status)
		}
	}
	return ""
}

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/node"
	"github.com/fcap-io/fcap/node/nodetest"
)

// The tests run the example as its own process (this test binary, run
// as main), so they see what an operator would: its signals and its exit.
func TestMain(m *testing.M) {
	if os.Getenv("FCAP_EXAMPLE_ADSERVER") == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

var quiet = nodetest.Quiet

// startNode starts a one-node fcap cluster in the test process.
func startNode(t *testing.T) *node.Node {
	t.Helper()
	cfg := node.DefaultLocalConfig("adserver-example")
	cfg.Logger = quiet
	return nodetest.Start(t, cfg)
}

// adServer is the example running as a process.
type adServer struct {
	cmd    *exec.Cmd
	addr   string
	exited chan error
}

// startAdServer runs the example against seed and waits until it serves.
// Its fcap deadline is generous: the test is about caps, not speed.
func startAdServer(t *testing.T, seed string) *adServer {
	t.Helper()
	s := launchAdServer(t, seed)
	// Serving is not enough: an ad chosen by the failure policy is served
	// too, and the node turns active a moment after it listens, so the
	// example's client may have fetched a topology with no owner yet.
	// Wait for an ad the cluster chose (for a new viewer each time: the
	// impressions of ads served meanwhile count, and could cap one).
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; ; i++ {
		if i > 0 {
			time.Sleep(20 * time.Millisecond)
		}
		if ad, ok := s.get(fmt.Sprint("probe-", i)); ok && !ad.FailOpen {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatal("the ad server never served an ad the cluster chose")
		}
	}
}

// get asks the ad server for an ad; ok is false unless one was served.
func (s *adServer) get(viewer string) (ad served, ok bool) {
	resp, err := http.Get(fmt.Sprintf("http://%s/ad?viewer=%s", s.addr, viewer))
	if err != nil {
		return ad, false
	}
	defer resp.Body.Close()
	return ad, resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&ad) == nil
}

// launchAdServer runs the example against seed and waits until it
// listens.
func launchAdServer(t *testing.T, seed string) *adServer {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-fcap", seed, "-listen", "127.0.0.1:0", "-timeout", "2s")
	cmd.Env = append(os.Environ(), "FCAP_EXAMPLE_ADSERVER=1")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &adServer{cmd: cmd, exited: make(chan error, 1)}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
		s.exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		cmd.Process.Kill() // a no-op once it exited
		<-s.exited
	})
	select {
	case line := <-lines: // "ad server on http://ADDR/ad?viewer=ID (...)"
		rest, ok := strings.CutPrefix(line, "ad server on http://")
		if !ok {
			t.Fatalf("unexpected first line %q", line)
		}
		s.addr, _, _ = strings.Cut(rest, "/")
	case <-time.After(30 * time.Second):
		t.Fatal("the ad server never said where it listens")
	}
	return s
}

// stop sends sig and waits for a clean exit.
func (s *adServer) stop(t *testing.T, sig os.Signal) {
	t.Helper()
	if err := s.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-s.exited:
		s.exited <- err // for the cleanup
		if err != nil {
			t.Fatalf("after %v the ad server exited with %v, want 0", sig, err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the ad server did not exit within 30 s of %v", sig)
	}
}

// TestConcurrentRequestsNeverExceedACap: 20 requests for one viewer at
// once never serve any creative, campaign or advertiser more often than
// its cap allows; after SIGTERM the server exits cleanly, having sent
// every impression (they count once the reservations have expired).
func TestConcurrentRequestsNeverExceedACap(t *testing.T) {
	nd := startNode(t)
	s := startAdServer(t, nd.DataAddr())

	const requests = 20
	var mu sync.Mutex
	servedBy := map[string]int64{}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range requests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			resp, err := http.Get("http://" + s.addr + "/ad?viewer=viewer-1")
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			switch resp.StatusCode {
			case http.StatusNoContent:
				return
			case http.StatusOK:
			default:
				body, _ := io.ReadAll(resp.Body)
				t.Errorf("status %d: %s", resp.StatusCode, body)
				return
			}
			var ad served
			if err := json.NewDecoder(resp.Body).Decode(&ad); err != nil {
				t.Error(err)
				return
			}
			if ad.FailOpen {
				t.Errorf("%s served by the failure policy: the cluster did not answer in 2 s", ad.Creative)
			}
			mu.Lock()
			servedBy[ad.Creative]++
			mu.Unlock()
		}()
	}
	close(start)
	wg.Wait()

	// Every cap, counted from what was served.
	count := map[fcap.Cap]int64{}
	total := int64(0)
	for _, a := range inventory() {
		for _, c := range a.Caps {
			count[c] += servedBy[a.Creative]
		}
		total += servedBy[a.Creative]
	}
	for c, n := range count {
		if n > c.Limit {
			t.Errorf("cap %s: served %d times, limit %d", c, n, c.Limit)
		}
	}
	t.Logf("%d of %d requests served: %v", total, requests, servedBy)
	if total == 0 {
		t.Fatal("nothing was served")
	}

	s.stop(t, syscall.SIGTERM)

	// Every served ad's impression reached the cluster before the exit:
	// judged after the reservations' ttl, only recorded impressions count.
	c, err := client.New(client.Config{Seeds: []string{nd.DataAddr()}, Timeout: 5 * time.Second, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	later := client.At(time.Now().Add(reservationTTL + time.Second).UnixMilli())
	for _, a := range inventory() {
		creative := a.Caps[0]
		res, err := c.Check(ctx, "viewer-1", []fcap.Candidate{{Caps: []fcap.Cap{creative}}}, later)
		if err != nil {
			t.Fatal(err)
		}
		v := res.Verdicts[0]
		if got := creative.Limit - v.Remaining; v.Failed() || got != min(servedBy[a.Creative], creative.Limit) {
			t.Errorf("creative %s: %d impressions recorded (%+v), %d served", a.Creative, got, v, servedBy[a.Creative])
		}
	}
}

// TestSIGINTExitsCleanly: Ctrl-C stops the server as SIGTERM does.
func TestSIGINTExitsCleanly(t *testing.T) {
	nd := startNode(t)
	s := startAdServer(t, nd.DataAddr())
	s.stop(t, os.Interrupt)
}

// TestServesByPolicyWhenFcapIsNeverReached: given the node's HTTP address
// for its data plane, the example starts (WaitReady names what answered
// and it serves on) and serves ads by the failure policy, marked
// fail-open, though every client call now says fcap was never reached.
func TestServesByPolicyWhenFcapIsNeverReached(t *testing.T) {
	nd := startNode(t)
	s := launchAdServer(t, nd.HTTPAddr())
	ad, ok := s.get("viewer-1")
	if !ok || !ad.FailOpen || ad.Creative == "" {
		t.Fatalf("an ad with fcap never reached: %+v (served %v), want one served fail-open", ad, ok)
	}
}

package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/proto"
)

// TestZeroConfigIsTheDefaults: Config{Seeds: ...} is a complete
// configuration, and its failure policy is the documented one: soft caps
// fail open, strict caps fail closed.
func TestZeroConfigIsTheDefaults(t *testing.T) {
	c, err := client.New(client.Config{Seeds: []string{deadCluster(t)}, Logger: quiet})
	if err != nil {
		t.Fatalf("New(Config{Seeds}) = %v", err)
	}
	defer c.Close(context.Background())
	res, err := c.Check(context.Background(), "v", []fcap.Candidate{{Caps: []fcap.Cap{soft}}, {Caps: []fcap.Cap{strict}}})
	if !errors.Is(err, client.ErrUnavailable) { // a cluster never reached says so
		t.Fatal(err)
	}
	if v := res.Verdicts[0]; !v.Allowed || !v.FailOpen {
		t.Errorf("soft candidate of a zero Config: %+v, want fail-open", v)
	}
	if v := res.Verdicts[1]; v.Allowed || !v.FailClosed {
		t.Errorf("strict candidate of a zero Config: %+v, want fail-closed", v)
	}
	if err := (&client.Config{Seeds: []string{"x:1"}}).Validate(); err != nil {
		t.Errorf("Validate of a zero Config: %v", err)
	}

	// The policies flip only when asked to.
	flipped, err := client.New(client.Config{Seeds: []string{deadCluster(t)}, Logger: quiet, SoftFailClosed: true, StrictFailOpen: true, DialTimeout: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer flipped.Close(context.Background())
	res, err = flipped.Check(context.Background(), "v", []fcap.Candidate{{Caps: []fcap.Cap{soft}}, {Caps: []fcap.Cap{strict}}})
	if !errors.Is(err, client.ErrUnavailable) {
		t.Fatal(err)
	}
	if v := res.Verdicts[0]; v.Allowed || !v.FailClosed {
		t.Errorf("soft candidate with SoftFailClosed: %+v", v)
	}
	if v := res.Verdicts[1]; !v.Allowed || !v.FailOpen {
		t.Errorf("strict candidate with StrictFailOpen: %+v", v)
	}
}

// TestTwoClientsOnOneRegisterer: a second client registers beside the
// first with its own constant labels or namespace, and a clash says how
// to fix it and leaves the registry usable. (Before MetricsLabels, the
// second client of a Registerer could not start.)
func TestTwoClientsOnOneRegisterer(t *testing.T) {
	reg := prometheus.NewRegistry()
	seed := deadCluster(t)
	newOn := func(mutate func(*client.Config)) (*client.Client, error) {
		cfg := client.Config{Seeds: []string{seed}, Logger: quiet, DialTimeout: 10 * time.Millisecond, Registerer: reg}
		mutate(&cfg)
		c, err := client.New(cfg)
		if err == nil {
			t.Cleanup(func() { c.Close(context.Background()) })
		}
		return c, err
	}
	if _, err := newOn(func(cfg *client.Config) { cfg.MetricsLabels = prometheus.Labels{"cluster": "eu"} }); err != nil {
		t.Fatal(err)
	}
	// The same labels again clash: the error says what to do.
	_, err := newOn(func(cfg *client.Config) { cfg.MetricsLabels = prometheus.Labels{"cluster": "eu"} })
	if err == nil || !strings.Contains(err.Error(), "MetricsLabels") {
		t.Fatalf("a clash: %v, want an error naming MetricsLabels", err)
	}
	if _, err := newOn(func(cfg *client.Config) { cfg.MetricsLabels = prometheus.Labels{"cluster": "us"} }); err != nil {
		t.Fatalf("a second client with its own labels, after a clash: %v", err)
	}
	if _, err := newOn(func(cfg *client.Config) { cfg.MetricsNamespace = "shadow" }); err != nil {
		t.Fatalf("a client with its own namespace: %v", err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := map[string]int{}
	for _, mf := range mfs {
		series[mf.GetName()] += len(mf.GetMetric())
	}
	if n := series["fcap_client_records_queued_total"]; n != 2 {
		t.Errorf("fcap_client_records_queued_total has %d series, want 2 (eu, us)", n)
	}
	if n := series["shadow_fcap_client_records_queued_total"]; n != 1 {
		t.Errorf("shadow_fcap_client_records_queued_total has %d series, want 1", n)
	}
}

// TestUnavailable: operations without a failure policy say the cluster
// is unavailable, and why: a dead cluster, a deadline (errors.Is
// context.DeadlineExceeded), a cancelled context.
func TestUnavailable(t *testing.T) {
	dead := newClient(t, shortDial, deadCluster(t))
	ctx := context.Background()
	r := client.Reservation{Viewer: "v", ID: 7}
	if err := dead.Release(ctx, r); !errors.Is(err, client.ErrUnavailable) {
		t.Errorf("Release, dead cluster: %v, want ErrUnavailable", err)
	}
	if _, err := dead.Link(ctx, "d", "v"); !errors.Is(err, client.ErrUnavailable) {
		t.Errorf("Link, dead cluster: %v, want ErrUnavailable", err)
	}
	if _, err := dead.Unlink(ctx, "d"); !errors.Is(err, client.ErrUnavailable) {
		t.Errorf("Unlink, dead cluster: %v, want ErrUnavailable", err)
	}
	if _, err := dead.Resolve(ctx, "d"); !errors.Is(err, client.ErrUnavailable) {
		t.Errorf("Resolve, dead cluster: %v, want ErrUnavailable", err)
	}

	// A node that never answers: the call's time runs out.
	silent := startFake(t, func(proto.Header, []byte) proto.Message { return nil })
	c := newClient(t, nil, silent.addr())
	waitCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := c.WaitReady(waitCtx); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	err := c.Release(short, r)
	if !errors.Is(err, client.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Release, silent node, 50ms context: %v, want ErrUnavailable and DeadlineExceeded", err)
	}
	short, cancel = context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := c.Link(short, "d", "v"); !errors.Is(err, client.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Link, silent node, 50ms context: %v, want ErrUnavailable and DeadlineExceeded", err)
	}
	gone, cancelGone := context.WithCancel(ctx)
	time.AfterFunc(20*time.Millisecond, cancelGone)
	if _, err := c.Link(gone, "d", "v"); !errors.Is(err, client.ErrUnavailable) || !errors.Is(err, context.Canceled) {
		t.Errorf("Link, silent node, cancelled: %v, want ErrUnavailable and Canceled", err)
	}
}

// TestCancelledIsNotAVerdict: the failure policy answers for a cluster
// that is late, not for a caller that gave up: a cancelled context is an
// error and no verdict, while a deadline still gives the policy's
// verdict.
func TestCancelledIsNotAVerdict(t *testing.T) {
	silent := startFake(t, func(proto.Header, []byte) proto.Message { return nil })
	c := newClient(t, nil, silent.addr())
	ctx := context.Background()
	waitCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := c.WaitReady(waitCtx); err != nil {
		t.Fatal(err)
	}
	cands := []fcap.Candidate{{Caps: []fcap.Cap{soft}}}

	done, cancelDone := context.WithCancel(ctx)
	cancelDone()
	if res, err := c.Check(done, "v", cands); !errors.Is(err, context.Canceled) || len(res.Verdicts) != 0 {
		t.Errorf("Check, context cancelled before: %+v, %v; want context.Canceled and no verdict", res.Verdicts, err)
	}
	if v, err := c.Allow(done, "v", []fcap.Cap{soft}); !errors.Is(err, context.Canceled) || v.Allowed {
		t.Errorf("Allow, context cancelled before: %+v, %v; want context.Canceled", v, err)
	}
	if v, _, err := c.Reserve(done, "v", fcap.Candidate{Caps: []fcap.Cap{soft}}, time.Minute); !errors.Is(err, context.Canceled) || v.Allowed {
		t.Errorf("Reserve, context cancelled before: %+v, %v; want context.Canceled", v, err)
	}

	during, cancelDuring := context.WithCancel(ctx)
	time.AfterFunc(20*time.Millisecond, cancelDuring)
	if res, err := c.Check(during, "v", cands); !errors.Is(err, context.Canceled) || len(res.Verdicts) != 0 {
		t.Errorf("Check, context cancelled while waiting: %+v, %v; want context.Canceled and no verdict", res.Verdicts, err)
	}
	during, cancelDuring = context.WithCancel(ctx)
	time.AfterFunc(20*time.Millisecond, cancelDuring)
	if v, err := c.Allow(during, "v", []fcap.Cap{soft}); !errors.Is(err, context.Canceled) || v.Failed() {
		t.Errorf("Allow, context cancelled while waiting: %+v, %v; want context.Canceled", v, err)
	}

	late, cancelLate := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancelLate()
	res, err := c.Check(late, "v", cands)
	if err != nil || !res.Verdicts[0].FailOpen {
		t.Errorf("Check past its deadline: %+v, %v; want a fail-open verdict and no error", res, err)
	}
}

// TestNewRefusesConfigsThatCannotWork: New fails at once, with an error
// wrapping ErrBadConfig that names the field and the value at fault, on
// a configuration no cluster could make work. (New used to accept a seed
// like "10.0.0.1" or "10.0.0.1:77000" and fail open on every call.)
func TestNewRefusesConfigsThatCannotWork(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*client.Config)
		says   string
	}{
		{"no seeds", func(c *client.Config) { c.Seeds = nil }, "no Seeds"},
		{"empty seed", func(c *client.Config) { c.Seeds = []string{""} }, `Seeds[0] "": not host:port`},
		{"no port", func(c *client.Config) { c.Seeds = []string{"10.0.0.1"} }, `Seeds[0] "10.0.0.1": not host:port`},
		{"no host", func(c *client.Config) { c.Seeds = []string{":7700"} }, `Seeds[0] ":7700": no host`},
		{"a URL", func(c *client.Config) { c.Seeds = []string{"http://10.0.0.1:7700"} }, `"http://10.0.0.1:7700": a URL`},
		{"port 0", func(c *client.Config) { c.Seeds = []string{"10.0.0.1:0"} }, "port 0 is out of range"},
		{"port too large", func(c *client.Config) { c.Seeds = []string{"10.0.0.1:77000"} }, "port 77000 is out of range"},
		{"negative port", func(c *client.Config) { c.Seeds = []string{"10.0.0.1:-1"} }, "port -1 is out of range"},
		{"named port", func(c *client.Config) { c.Seeds = []string{"10.0.0.1:fcap"} }, `port "fcap" is not a number`},
		{"space in host", func(c *client.Config) { c.Seeds = []string{"10.0.0.1 :7700"} }, `host "10.0.0.1 " is not`},
		{"duplicate seed", func(c *client.Config) { c.Seeds = []string{"a:7700", "b:7700", "A:7700"} }, `Seeds[2] "A:7700" repeats Seeds[0] "a:7700"`},
		{"second seed bad", func(c *client.Config) { c.Seeds = []string{"a:7700", "b"} }, `Seeds[1] "b"`},
		{"negative timeout", func(c *client.Config) { c.Timeout = -time.Millisecond }, "Timeout must be positive (0 means the default), got -1ms"},
		{"negative dial timeout", func(c *client.Config) { c.DialTimeout = -1 }, "DialTimeout must be positive"},
		{"negative record timeout", func(c *client.Config) { c.RecordTimeout = -time.Second }, "RecordTimeout must be positive (0 means the default), got -1s"},
		{"negative resolve ttl", func(c *client.Config) { c.ResolveTTL = -time.Second }, "ResolveTTL must be positive"},
		{"negative conns", func(c *client.Config) { c.ConnsPerNode = -1 }, "ConnsPerNode must be in [1, 64], got -1"},
		{"negative queue", func(c *client.Config) { c.RecordQueue = -5 }, "RecordQueue must be positive (0 means the default), got -5"},
		{"retry max < min", func(c *client.Config) { c.RecordRetryMin = time.Minute }, "RecordRetryMax (5s) is below RecordRetryMin (1m0s)"},
		{"batch", func(c *client.Config) { c.RecordBatch = proto.MaxRecordItems + 1 }, "RecordBatch must be in [1, 4096], got 4097"},
		{"hedge budget", func(c *client.Config) { c.HedgeBudget = 2 }, "HedgeBudget must be at most 1, got 2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := client.DefaultConfig("127.0.0.1:7700")
			cfg.Logger = quiet
			tc.mutate(&cfg)
			c, err := client.New(cfg)
			if err == nil {
				c.Close(context.Background())
				t.Fatal("New accepted it")
			}
			if !errors.Is(err, client.ErrBadConfig) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("New = %v, want an error wrapping ErrBadConfig that says %q", err, tc.says)
			}
			if verr := cfg.Validate(); verr == nil || verr.Error() != err.Error() {
				t.Errorf("Validate = %v, want New's error %v", verr, err)
			}
		})
	}
	// Addresses a dial can use pass: names, IPv4, IPv6 in brackets.
	ok := client.Config{Seeds: []string{"fcap-0.fcap.default.svc:7700", "10.0.0.1:7700", "[::1]:7700", "localhost:1"}}
	if err := ok.Validate(); err != nil {
		t.Errorf("Validate of good seeds: %v", err)
	}
	// Every fault is reported, not only the first.
	both := client.Config{Seeds: []string{"x"}, Timeout: -1}
	if err := both.Validate(); err == nil || !strings.Contains(err.Error(), `Seeds[0] "x"`) || !strings.Contains(err.Error(), "Timeout") {
		t.Errorf("Validate of two faults: %v, want both named", err)
	}
}

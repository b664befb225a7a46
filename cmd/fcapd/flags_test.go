package main

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/fcap-io/fcap/node"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// configFor parses args with the environment e as fcapd does and returns
// the options and the node config they make, failing the test on an error.
func configFor(t *testing.T, args []string, e map[string]string) (*options, node.Config) {
	t.Helper()
	o, err := parseFlags(args, env(e), io.Discard)
	if err != nil {
		t.Fatalf("%q: %v", args, err)
	}
	cfg, err := o.config(nil)
	if err != nil {
		t.Fatalf("%q: config: %v", args, err)
	}
	return o, cfg
}

// configErr is the error parsing args with the environment e, or making
// a node config of them: nil if both succeed.
func configErr(args []string, e map[string]string) error {
	o, err := parseFlags(args, env(e), io.Discard)
	if err == nil {
		_, err = o.config(nil)
	}
	return err
}

func TestDefaultsMakeAOneNodeLoopbackCluster(t *testing.T) {
	_, cfg := configFor(t, nil, nil)
	ml := cfg.Membership.Memberlist
	if cfg.DataAddr != "127.0.0.1:7700" || cfg.HTTPAddr != "127.0.0.1:7780" || ml.BindAddr != "127.0.0.1" || ml.BindPort != 7946 {
		t.Errorf("defaults: data %s http %s gossip %s:%d", cfg.DataAddr, cfg.HTTPAddr, ml.BindAddr, ml.BindPort)
	}
	if len(cfg.Membership.Seeds) != 0 || cfg.Membership.Ring.Replicas != 2 || cfg.Engine.MemoryLimit <= 0 || cfg.Replication.TransferRate != 64<<20 {
		t.Errorf("seeds %v replicas %d memory %d transfer rate %d", cfg.Membership.Seeds, cfg.Membership.Ring.Replicas, cfg.Engine.MemoryLimit, cfg.Replication.TransferRate)
	}
}

func TestFlagsBeatEnvironmentBeatsDefaults(t *testing.T) {
	e := map[string]string{"FCAP_NAME": "from-env", "FCAP_JOIN": "10.0.0.1:7946, 10.0.0.2:7946", "FCAP_REPLICAS": "3", "FCAP_MEMORY_LIMIT": "2GiB"}
	_, cfg := configFor(t, []string{"--name", "from-flag"}, e)
	if cfg.Name != "from-flag" || strings.Join(cfg.Membership.Seeds, ",") != "10.0.0.1:7946,10.0.0.2:7946" ||
		cfg.Membership.Ring.Replicas != 3 || cfg.Engine.MemoryLimit != 2<<30 {
		t.Errorf("name %q seeds %v replicas %d memory %d", cfg.Name, cfg.Membership.Seeds, cfg.Membership.Ring.Replicas, cfg.Engine.MemoryLimit)
	}
}

func TestConnectionLimitFlags(t *testing.T) {
	e := map[string]string{"FCAP_MAX_CONNS": "100", "FCAP_IDLE_TIMEOUT": "1m"}
	_, cfg := configFor(t, []string{"--max-frame", "64KiB", "--idle-timeout", "3s", "--write-timeout", "2s"}, e)
	if cfg.MaxConns != 100 || cfg.MaxFrame != 64<<10 || cfg.IdleTimeout != 3*time.Second || cfg.WriteTimeout != 2*time.Second {
		t.Errorf("max conns %d, max frame %d, idle %v, write %v", cfg.MaxConns, cfg.MaxFrame, cfg.IdleTimeout, cfg.WriteTimeout)
	}
	if _, cfg = configFor(t, nil, nil); cfg.MaxConns != 4096 || cfg.MaxFrame != 1<<20 || cfg.IdleTimeout != 5*time.Minute || cfg.WriteTimeout != 10*time.Second {
		t.Errorf("defaults: max conns %d, max frame %d, idle %v, write %v", cfg.MaxConns, cfg.MaxFrame, cfg.IdleTimeout, cfg.WriteTimeout)
	}
}

// TestSyncTimeoutFlag: --sync-timeout (FCAP_SYNC_TIMEOUT) sets how long
// a node waits for a hand-over, and for its seeds; by default 10 s.
func TestSyncTimeoutFlag(t *testing.T) {
	if _, cfg := configFor(t, nil, nil); cfg.Replication.SyncTimeout != 10*time.Second {
		t.Errorf("default sync timeout %v, want 10s", cfg.Replication.SyncTimeout)
	}
	if _, cfg := configFor(t, []string{"--sync-timeout", "2s"}, map[string]string{"FCAP_SYNC_TIMEOUT": "5s"}); cfg.Replication.SyncTimeout != 2*time.Second {
		t.Errorf("--sync-timeout 2s: %v", cfg.Replication.SyncTimeout)
	}
	if _, cfg := configFor(t, nil, map[string]string{"FCAP_SYNC_TIMEOUT": "5s"}); cfg.Replication.SyncTimeout != 5*time.Second {
		t.Errorf("FCAP_SYNC_TIMEOUT=5s: %v", cfg.Replication.SyncTimeout)
	}
	if _, cfg := configFor(t, nil, map[string]string{"FCAP_ANTI_ENTROPY_VIEWERS": "5000"}); cfg.Replication.AntiEntropyViewers != 5000 {
		t.Errorf("FCAP_ANTI_ENTROPY_VIEWERS=5000: %v", cfg.Replication.AntiEntropyViewers)
	}
}

func TestBadFlagsAreClearErrors(t *testing.T) {
	for name, args := range map[string][]string{
		"replicas":   {"--replicas", "0"},
		"gossip":     {"--gossip", "nope"},
		"profile":    {"--gossip-profile", "moon"},
		"memory":     {"--memory-limit", "lots"},
		"transfer":   {"--transfer-rate", "-5MiB"},
		"max-conns":  {"--max-conns", "0"},
		"max-frame":  {"--max-frame", "5GiB"},
		"tiny-frame": {"--max-frame", "100"},
		"idle":       {"--idle-timeout", "0s"},
		"write":      {"--write-timeout", "soon"},
		"sync":       {"--sync-timeout", "0s"},
		"ae-viewers": {"--anti-entropy-viewers", "-1"},
		"positional": {"extra"},
	} {
		err := configErr(args, nil)
		if err == nil {
			t.Errorf("%s: %v accepted", name, args)
		}
	}
	if _, err := parseFlags(nil, env(map[string]string{"FCAP_REPLICAS": "two"}), io.Discard); err == nil {
		t.Error("FCAP_REPLICAS=two accepted")
	}
}

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{"123": 123, "64MiB": 64 << 20, "1.5GiB": 3 << 29, "2GB": 2e9, "10 KiB": 10 << 10} {
		if got, err := parseBytes(in); err != nil || got != want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "x", "-1", "5XB"} {
		if _, err := parseBytes(bad); err == nil {
			t.Errorf("parseBytes(%q) accepted", bad)
		}
	}
}

func TestVersionFlag(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"--version"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
	if !strings.HasPrefix(out.String(), "fcapd ") || !strings.Contains(out.String(), "revision") {
		t.Errorf("stdout %q", out.String())
	}
}

package main

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/fcap-io/fcap/node/wal"
)

func TestDataDirFlags(t *testing.T) {
	o, err := parseFlags(nil, env(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := o.config(nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.DataDir != "" || !strings.Contains(o.durable.describe(), "memory only") {
		t.Errorf("default storage: dir %q, %q", cfg.DataDir, o.durable.describe())
	}
	e := env(map[string]string{"FCAP_DATA_DIR": "/from/env", "FCAP_FSYNC": "never", "FCAP_FSYNC_INTERVAL": "5ms"})
	o, err = parseFlags([]string{"--fsync", "always", "--snapshot-interval", "1m"}, e, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg, err = o.config(nil); err != nil {
		t.Fatal(err)
	}
	if cfg.DataDir != "/from/env" || cfg.Fsync != wal.Always || cfg.FsyncInterval != 5*time.Millisecond || cfg.SnapshotInterval != time.Minute {
		t.Errorf("dir %q fsync %v interval %v snapshots %v", cfg.DataDir, cfg.Fsync, cfg.FsyncInterval, cfg.SnapshotInterval)
	}
	for _, args := range [][]string{{"--fsync", "sometimes"}, {"--data-dir", "/x", "--fsync-interval", "0s"}, {"--data-dir", "/x", "--snapshot-interval", "-1s"}} {
		o, err := parseFlags(args, env(nil), io.Discard)
		if err == nil {
			_, err = o.config(nil)
		}
		if err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}

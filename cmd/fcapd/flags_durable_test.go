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
	if cfg.Storage.DataDir != "" || !strings.Contains(o.durable.describe(), "memory only") {
		t.Errorf("default storage: dir %q, %q", cfg.Storage.DataDir, o.durable.describe())
	}
	e := env(map[string]string{"FCAP_DATA_DIR": "/from/env", "FCAP_FSYNC": "never", "FCAP_FSYNC_INTERVAL": "5ms"})
	o, err = parseFlags([]string{"--fsync", "always", "--snapshot-interval", "1m"}, e, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg, err = o.config(nil); err != nil {
		t.Fatal(err)
	}
	if cfg.Storage.DataDir != "/from/env" || cfg.Storage.Fsync != wal.Always || cfg.Storage.FsyncInterval != 5*time.Millisecond || cfg.Storage.SnapshotInterval != time.Minute {
		t.Errorf("dir %q fsync %v interval %v snapshots %v", cfg.Storage.DataDir, cfg.Storage.Fsync, cfg.Storage.FsyncInterval, cfg.Storage.SnapshotInterval)
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

package main

import (
	"strings"
	"testing"
	"time"

	"github.com/fcap-io/fcap/node/wal"
)

func TestDataDirFlags(t *testing.T) {
	o, cfg := configFor(t, nil, nil)
	if cfg.Storage.DataDir != "" || !strings.Contains(o.durable.describe(), "memory only") {
		t.Errorf("default storage: dir %q, %q", cfg.Storage.DataDir, o.durable.describe())
	}
	e := map[string]string{"FCAP_DATA_DIR": "/from/env", "FCAP_FSYNC": "never", "FCAP_FSYNC_INTERVAL": "5ms"}
	_, cfg = configFor(t, []string{"--fsync", "always", "--snapshot-interval", "1m"}, e)
	if cfg.Storage.DataDir != "/from/env" || cfg.Storage.Fsync != wal.Always || cfg.Storage.FsyncInterval != 5*time.Millisecond || cfg.Storage.SnapshotInterval != time.Minute {
		t.Errorf("dir %q fsync %v interval %v snapshots %v", cfg.Storage.DataDir, cfg.Storage.Fsync, cfg.Storage.FsyncInterval, cfg.Storage.SnapshotInterval)
	}
	for _, args := range [][]string{{"--fsync", "sometimes"}, {"--data-dir", "/x", "--fsync-interval", "0s"}, {"--data-dir", "/x", "--snapshot-interval", "-1s"}} {
		err := configErr(args, nil)
		if err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}

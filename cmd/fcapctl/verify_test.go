package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fcap-io/fcap/node/wal"
)

func TestVerifyDataDir(t *testing.T) {
	dir := t.TempDir()
	cfg := wal.DefaultConfig(filepath.Join(dir, "wal"))
	l, err := wal.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l.Replay(0, func([]byte) {})
	l.Start()
	for range 10 {
		l.Append(func(b []byte) ([]byte, int64) { return append(b, "state"...), 0 })
	}
	l.Close()
	w, _ := wal.CreateSnapshot(filepath.Join(dir, "snapshots"), 2)
	w.Add([]byte("state"))
	w.Commit()
	code, out, _ := runCLI("verify", dir)
	if code != 0 || !strings.Contains(out, "10 records") || !strings.Contains(out, "1 states") {
		t.Fatalf("clean dir: %d %s", code, out)
	}
	segs, _ := filepath.Glob(filepath.Join(dir, "wal", "*.wal"))
	b, _ := os.ReadFile(segs[0])
	os.WriteFile(segs[0], b[:len(b)-2], 0o644)
	code, out, _ = runCLI("verify", dir)
	if code != 1 || !strings.Contains(out, "DAMAGED") || !strings.Contains(out, "9 records good") {
		t.Fatalf("damaged dir: %d %s", code, out)
	}
	code, out, _ = runCLI("verify", "--json", dir)
	var rep struct {
		Records  int64
		OK       bool
		Segments []struct {
			Damaged int64 `json:"damaged_bytes"`
		}
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || code != 1 || rep.OK || rep.Records != 9 || len(rep.Segments) != 1 || rep.Segments[0].Damaged == 0 {
		t.Fatalf("verify --json on the damaged dir: %d %s (%v)", code, out, err)
	}
	if after, _ := os.ReadFile(segs[0]); len(after) != len(b)-2 {
		t.Fatal("verify changed the segment")
	}
}

package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestBlocklistCutsListedLinksBothWays(t *testing.T) {
	path := filepath.Join(t.TempDir(), "blocklist")
	self, a, b := "127.0.0.1:1001", "127.0.0.1:1002", "127.0.0.1:1003"
	bl := &blocklist{path: path, self: self}
	if bl.cut(a) {
		t.Fatal("a missing file cut a link")
	}
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		bl.mu.Lock()
		bl.read = time.Time{} // no wait for the re-read
		bl.mu.Unlock()
	}
	write(self + " " + a + "\n" + b + " " + self + "\n" + a + " " + b + "\ngarbage\n")
	if !bl.cut(a) || !bl.cut(b) {
		t.Fatal("listed links not cut")
	}
	write(a + " " + b + "\n")
	if bl.cut(a) || bl.cut(b) {
		t.Fatal("links of other nodes cut ours, or healing did not take")
	}
}

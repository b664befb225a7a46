package main

import (
	"bytes"
	"encoding/base64"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestGossipKeyBadUsage(t *testing.T) {
	for name, c := range map[string]struct {
		args []string
		code int
		says string
	}{
		"no operation":      {[]string{"gossip-key"}, 2, "usage"},
		"unknown operation": {[]string{"gossip-key", "rotate", "x"}, 2, "unknown operation"},
		"no key":            {[]string{"gossip-key", "install"}, 2, "usage"},
		"list with a key":   {[]string{"gossip-key", "list", "x"}, 2, "usage"},
		"not base64":        {[]string{"gossip-key", "use", "%%%"}, 1, "base64"},
		"short key":         {[]string{"gossip-key", "use", base64.StdEncoding.EncodeToString([]byte("short"))}, 1, "16, 24 or 32"},
	} {
		code, _, errOut := runCLI(c.args...)
		if code != c.code || !strings.Contains(errOut, c.says) {
			t.Errorf("%s: exit %d, stderr %q; want exit %d saying %q", name, code, errOut, c.code, c.says)
		}
	}
}

// TestGossipKeyNeverPrintsTheKey: fcapctl names a key by its fingerprint,
// also when the cluster cannot be reached.
func TestGossipKeyNeverPrintsTheKey(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	key := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{42}, 32))
	file := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(file, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"gossip-key", "install", key, "--addr", addr, "--timeout", "2s"},
		{"gossip-key", "install", "--key-file", file, "--addr", addr, "--timeout", "2s"},
	} {
		code, out, errOut := runCLI(args...)
		if code != 1 || strings.Contains(out+errOut, key) || !strings.Contains(errOut, "key ") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q: want a failure naming the key's fingerprint only", args, code, out, errOut)
		}
	}
}

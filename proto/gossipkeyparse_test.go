package proto

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"
)

// TestParseGossipKey: a 16, 24 or 32-byte key in standard base64 (white
// space around it ignored) is accepted; anything else is refused with an
// error that says why and never quotes the key.
func TestParseGossipKey(t *testing.T) {
	b64 := func(n int) string { return base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, n)) }
	for _, n := range []int{16, 24, 32} {
		k, err := ParseGossipKey(" " + b64(n) + "\n")
		if err != nil || len(k) != n {
			t.Errorf("a %d-byte key: %d bytes, %v", n, len(k), err)
		}
	}
	for name, tc := range map[string]struct{ in, says string }{
		"not base64": {"%%%secret%%%", "not standard base64"},
		"15 bytes":   {b64(15), "16, 24 or 32"},
		"33 bytes":   {b64(33), "16, 24 or 32"},
		"empty":      {"", "16, 24 or 32"},
	} {
		_, err := ParseGossipKey(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v, want an error saying %q", name, err, tc.says)
		}
		if err != nil && tc.in != "" && strings.Contains(err.Error(), tc.in) {
			t.Errorf("%s: the error quotes the key: %v", name, err)
		}
	}
	if fp := GossipKeyFingerprint([]byte("0123456789abcdef")); len(fp) != 16 || fp == GossipKeyFingerprint([]byte("0123456789abcdeg")) {
		t.Errorf("fingerprint %q: want 16 hex digits that tell keys apart", fp)
	}
}

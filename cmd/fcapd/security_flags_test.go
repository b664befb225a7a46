package main

import (
	"bytes"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestGossipKeyFlags(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	b64 := base64.StdEncoding.EncodeToString(key)
	file := filepath.Join(t.TempDir(), "gossip.key")
	if err := os.WriteFile(file, []byte(b64+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		args []string
		env  map[string]string
	}{
		"flag":      {args: []string{"--gossip-key", b64}},
		"file":      {args: []string{"--gossip-key-file", file}},
		"env file":  {env: map[string]string{"FCAP_GOSSIP_KEY_FILE": file}},
		"env value": {env: map[string]string{"FCAP_GOSSIP_KEY": b64}},
	} {
		_, cfg := configFor(t, c.args, c.env)
		ml := cfg.Membership.Memberlist
		if ml.Keyring == nil || !bytes.Equal(ml.Keyring.GetPrimaryKey(), key) || !ml.GossipVerifyIncoming || !ml.GossipVerifyOutgoing {
			t.Errorf("%s: gossip not encrypted with the key and verified both ways", name)
		}
	}

	_, cfg := configFor(t, nil, nil)
	if cfg.Membership.Memberlist.Keyring != nil || cfg.Membership.Memberlist.SecretKey != nil {
		t.Error("gossip encrypted without a key flag")
	}

	secret := base64.StdEncoding.EncodeToString([]byte("fifteen-bytes!!")) // 15 bytes: no AES key
	for name, args := range map[string][]string{
		"short key":  {"--gossip-key", secret},
		"not base64": {"--gossip-key", "%%%"},
		"both":       {"--gossip-key", b64, "--gossip-key-file", file},
		"no file":    {"--gossip-key-file", filepath.Join(t.TempDir(), "missing")},
	} {
		err := configErr(args, nil)
		if err == nil {
			t.Errorf("%s: %v accepted", name, args)
			continue
		}
		if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), b64) {
			t.Errorf("%s: the error quotes the key: %v", name, err)
		}
	}
}

func TestTLSFlagsGoTogether(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.pem")
	for name, args := range map[string][]string{
		"cert without key":    {"--tls-cert", missing},
		"key without cert":    {"--tls-key", missing},
		"client ca alone":     {"--tls-client-ca", missing},
		"peer ca alone":       {"--tls-ca", missing},
		"unreadable key pair": {"--tls-cert", missing, "--tls-key", missing},
	} {
		err := configErr(args, nil)
		if err == nil {
			t.Errorf("%s: %v accepted", name, args)
		}
	}
}

package gossip

import (
	"fmt"

	"github.com/fcap-io/fcap/proto"
	"github.com/fcap-io/fcap/ring"
	"github.com/hashicorp/memberlist"
)

// ParseKey decodes a gossip key written in standard base64 (as
// "openssl rand -base64 32" prints it; surrounding white space is
// ignored) and checks that it is an AES-128, 192 or 256 key: 16, 24 or
// 32 bytes. The error never quotes the key.
// It is proto.ParseGossipKey, its error wrapping ring.ErrConfig: a node's
// key is configuration.
func ParseKey(s string) ([]byte, error) {
	b, err := proto.ParseGossipKey(s)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ring.ErrConfig, err)
	}
	return b, nil
}

// KeyFingerprint names a gossip key without revealing it: the first 8
// bytes of its SHA-256, in hex (proto.GossipKeyFingerprint). Logs,
// fcapctl and GossipKeyResult show keys by their fingerprints.
func KeyFingerprint(key []byte) string { return proto.GossipKeyFingerprint(key) }

// Encrypt makes ml encrypt and authenticate every gossip message
// with key (AES-GCM): ml gets a keyring holding just key, and verifies
// both incoming and outgoing traffic, so a node without the key can
// neither join nor be understood. The keyring may change at run time
// (Keyring.AddKey, UseKey, RemoveKey); nothing of it is persisted.
func Encrypt(ml *memberlist.Config, key []byte) error {
	kr, err := memberlist.NewKeyring(nil, key)
	if err != nil {
		return fmt.Errorf("%w: gossip key: %w", ring.ErrConfig, err)
	}
	ml.Keyring = kr
	ml.SecretKey = nil
	ml.GossipVerifyIncoming = true
	ml.GossipVerifyOutgoing = true
	return nil
}

package proto

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// MaxGossipKeys bounds the keys a GossipKeyResult lists.
const MaxGossipKeys = 64

// GossipKeyOp says what a GossipKey request does to a node's gossip
// keyring.
type GossipKeyOp uint8

// The keyring operations. Append-only, like Type.
const (
	// GossipKeyList changes nothing: the answer lists the keys.
	GossipKeyList GossipKeyOp = 1
	// GossipKeyInstall adds Key to the keyring: the node decrypts with it
	// from now on, and still encrypts with its primary key.
	GossipKeyInstall GossipKeyOp = 2
	// GossipKeyUse makes Key, already installed, the primary key: the
	// node encrypts with it from now on.
	GossipKeyUse GossipKeyOp = 3
	// GossipKeyRemove drops Key from the keyring. The primary key cannot
	// be removed.
	GossipKeyRemove GossipKeyOp = 4
)

// GossipKey asks a node to change its own gossip keyring, or to list it
// (fcapctl gossip-key). Gossip has no cluster-wide key manager: the
// operator's tool sends the request to every member. It is answered with
// a GossipKeyResult describing the keyring after the change, or an Error
// (ErrUnsupported when the node's gossip is not encrypted, ErrBadRequest
// for a bad key or a refused change).
//
// Wire: [op uint8, key str] where key is the base64 (standard encoding)
// of a 16, 24 or 32-byte AES key, empty for GossipKeyList.
type GossipKey struct {
	// Op is the change.
	Op GossipKeyOp
	// Key is the key in standard base64. It aliases the frame body when
	// decoded.
	Key string
}

// Type returns TypeGossipKey.
func (*GossipKey) Type() Type { return TypeGossipKey }

func (m *GossipKey) encode(e *encoder) {
	e.array(2)
	e.uint(uint64(m.Op))
	e.str(m.Key)
}

func (m *GossipKey) decode(d *decoder) {
	extra := d.array(2)
	m.Op = GossipKeyOp(d.uintN(0xFF))
	m.Key = d.str()
	d.end(extra)
}

// GossipKeyResult answers GossipKey with the node's keyring afterwards,
// as fingerprints, never the keys themselves: the first 8 bytes of the
// key's SHA-256, in hex.
//
// Wire: [primary str, keys [str...]].
type GossipKeyResult struct {
	// Primary is the fingerprint of the key the node encrypts with.
	Primary string
	// Keys are the fingerprints of every installed key, the primary
	// first. At most MaxGossipKeys.
	Keys []string
}

// Type returns TypeGossipKeyResult.
func (*GossipKeyResult) Type() Type { return TypeGossipKeyResult }

func (m *GossipKeyResult) encode(e *encoder) {
	e.array(2)
	e.str(m.Primary)
	e.list("keys", len(m.Keys), MaxGossipKeys)
	for _, k := range m.Keys {
		e.str(k)
	}
}

func (m *GossipKeyResult) decode(d *decoder) {
	extra := d.array(2)
	m.Primary = d.str()
	m.Keys = resize(m.Keys, d.list("keys", MaxGossipKeys, 1))
	for i := range m.Keys {
		m.Keys[i] = d.str()
	}
	d.end(extra)
}

// ParseGossipKey decodes a gossip key written in standard base64 (as
// "openssl rand -base64 32" prints it; surrounding white space is
// ignored) and checks that it is an AES-128, 192 or 256 key: 16, 24 or
// 32 bytes. The error never quotes the key.
func ParseGossipKey(s string) ([]byte, error) {
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(s))
	if err != nil {
		return nil, errors.New("gossip key is not standard base64")
	}
	switch len(b) {
	case 16, 24, 32:
		return b, nil
	}
	return nil, fmt.Errorf("gossip key of %d bytes: it must be 16, 24 or 32 bytes (AES-128, 192 or 256)", len(b))
}

// GossipKeyFingerprint names a gossip key without revealing it: the
// first 8 bytes of its SHA-256, in hex. Logs, fcapctl and
// GossipKeyResult show keys by their fingerprints.
func GossipKeyFingerprint(key []byte) string {
	sum := sha256.Sum256(key)
	return hex.EncodeToString(sum[:8])
}

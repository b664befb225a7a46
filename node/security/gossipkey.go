package security

import (
	"bytes"
	"fmt"
	"log/slog"
	"sync"

	"github.com/hashicorp/memberlist"

	"github.com/fcap-io/fcap/proto"
)

// GossipKeys applies GossipKey requests to a node's own gossip keyring
// (the one memberlist encrypts and decrypts with), one at a time.
type GossipKeys struct {
	mu   sync.Mutex         // orders changes of the keyring
	ml   *memberlist.Config // its Keyring, set once memberlist starts
	name string
	log  *slog.Logger
}

// NewGossipKeys returns the operations on the keyring of the node name's
// memberlist config (nil, or none, when gossip encryption is off).
func NewGossipKeys(ml *memberlist.Config, name string, log *slog.Logger) *GossipKeys {
	return &GossipKeys{ml: ml, name: name, log: log}
}

// Apply applies a GossipKey request and describes the keyring
// afterwards. Nothing is persisted: a restarted node starts with the key
// its flags give.
func (g *GossipKeys) Apply(m *proto.GossipKey) (*proto.GossipKeyResult, error) {
	var kr *memberlist.Keyring
	if g.ml != nil {
		kr = g.ml.Keyring
	}
	if kr == nil || len(kr.GetKeys()) == 0 {
		return nil, refusal(proto.CodeUnsupported, "gossip encryption is off on %s (start it with --gossip-key-file)", g.name)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	var key []byte
	if m.Op != proto.GossipKeyList {
		var err error
		if key, err = proto.ParseGossipKey(m.Key); err != nil {
			return nil, refusal(proto.CodeBadRequest, "%v", err)
		}
	}
	fp := proto.GossipKeyFingerprint(key)
	switch m.Op {
	case proto.GossipKeyList:
	case proto.GossipKeyInstall:
		if err := kr.AddKey(key); err != nil {
			return nil, refusal(proto.CodeBadRequest, "install key %s: %v", fp, err)
		}
		g.log.Info("gossip key installed", "key", fp)
	case proto.GossipKeyUse:
		if err := kr.UseKey(key); err != nil {
			return nil, refusal(proto.CodeBadRequest, "use key %s: %v", fp, err)
		}
		g.log.Info("gossip key in use", "key", fp)
	case proto.GossipKeyRemove:
		if err := removeGossipKey(kr, key); err != nil {
			return nil, refusal(proto.CodeBadRequest, "remove key %s: %v", fp, err)
		}
		g.log.Info("gossip key removed", "key", fp)
	default:
		return nil, refusal(proto.CodeBadRequest, "unknown gossip key operation %d", m.Op)
	}
	keys := kr.GetKeys()
	res := &proto.GossipKeyResult{Keys: make([]string, len(keys))}
	for i, k := range keys {
		res.Keys[i] = proto.GossipKeyFingerprint(k)
	}
	if len(keys) > 0 {
		res.Primary = res.Keys[0]
	}
	return res, nil
}

// keyring is the part of memberlist.Keyring removeGossipKey uses.
type keyring interface {
	GetKeys() [][]byte
	UseKey([]byte) error
	RemoveKey([]byte) error
}

// removeGossipKey drops key from kr. memberlist's RemoveKey shifts the
// keys after the removed one in place, in the array memberlist's
// decrypting goroutines may be reading without a lock; removing the last
// key shifts nothing. So when key is not last, the other keys are first
// moved in front of it with UseKey (which builds a new array), the
// primary last, so that it is primary again: for those microseconds the
// node encrypts with another installed key. Removing an absent key is a
// no-op; removing the primary is refused.
func removeGossipKey(kr keyring, key []byte) error {
	keys := kr.GetKeys()
	if len(keys) == 0 {
		return nil
	}
	primary := keys[0]
	if bytes.Equal(key, primary) {
		return fmt.Errorf("it is the primary key: use another key first")
	}
	at := -1
	for i, k := range keys {
		if bytes.Equal(k, key) {
			at = i
		}
	}
	if at < 0 {
		return nil
	}
	if at != len(keys)-1 {
		for _, k := range keys[1:] {
			if !bytes.Equal(k, key) {
				if err := kr.UseKey(k); err != nil {
					return err
				}
			}
		}
		if err := kr.UseKey(primary); err != nil {
			return err
		}
	}
	return kr.RemoveKey(key)
}

// refusal is an error answer with a message of its own, so the client
// reads "fcap: bad request: <message>" rather than the sentinel twice.
func refusal(code proto.Code, format string, args ...any) *proto.Error {
	return &proto.Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

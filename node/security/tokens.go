// Package security holds what a node trusts and how it checks it: the
// tokens and roles of data-plane connections, the TLS configs, and the
// operations on the gossip keyring.
package security

import (
	"bufio"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/fcap-io/fcap/proto"
)

// Role is what a token lets a connection do.
type Role uint8

// The roles. 0 is no role: a connection that has not authenticated.
const (
	// RoleAdServer may ask what ad servers ask: ping, topology, check,
	// allow, record, reserve, release.
	RoleAdServer Role = iota + 1
	// RoleOperator may send every request: the ad server's, status,
	// drain, gossip keys, and the peers'.
	RoleOperator
	// RolePeer is another node: ping, topology, replication and
	// partition requests.
	RolePeer
)

// Perms returns what the role may send; nothing for 0.
func (r Role) Perms() Perms { return rolePerms[r] }

var roleNames = map[Role]string{RoleAdServer: "adserver", RoleOperator: "operator", RolePeer: "peer"}

// String returns the role's name as the tokens file spells it.
func (r Role) String() string {
	if s, ok := roleNames[r]; ok {
		return s
	}
	return fmt.Sprintf("role(%d)", uint8(r))
}

// Perms is a set of message types, one bit per type: every type a
// proto.Type can name (256). It was one uint64 while every request type
// was below 64; the region link's escrow messages are 64 and 65, and a
// bit past 63 would have refused them from every peer token.
type Perms [4]uint64

// PermsOf returns the set of the given types.
func PermsOf(ts ...proto.Type) Perms {
	var p Perms
	for _, t := range ts {
		p[t/64] |= 1 << (t % 64)
	}
	return p
}

// May reports whether the set holds t.
func (p Perms) May(t proto.Type) bool { return p[t/64]&(1<<(t%64)) != 0 }

// AllPerms allows everything: nodes without tokens, and operators.
var AllPerms = Perms{^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0)}

// rolePerms are the roles' permissions, read from each request type's
// senders (proto.Type.Senders).
var rolePerms = map[Role]Perms{
	RoleAdServer: sentBy(proto.SenderAdServer),
	RoleOperator: AllPerms,
	RolePeer:     sentBy(proto.SenderPeer),
}

// sentBy returns the request types s may send.
func sentBy(s proto.Sender) Perms {
	var p Perms
	for t := range 256 {
		if proto.Type(t).Senders()&s != 0 {
			p[t/64] |= 1 << (t % 64)
		}
	}
	return p
}

// minTokenLen is the shortest token a tokens file may hold.
const minTokenLen = 16

// ParseTokens reads a tokens file: one "role token" per line (roles
// adserver, operator, peer), blank lines and lines starting with # are
// skipped. A token is at least 16 characters and maps to one role;
// several tokens may share a role (to rotate one: add the new token,
// move the clients, remove the old). peer is the file's last peer
// token: the one a node presents to the others (Config.PeerToken), so a
// new peer token is appended, given to every node, then the old one
// removed. Errors never quote a token.
func ParseTokens(r io.Reader) (tokens map[string]Role, peer string, err error) {
	byName := map[string]Role{}
	for role, name := range roleNames {
		byName[name] = role
	}
	tokens = map[string]Role{}
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		fields := strings.Fields(text)
		if len(fields) != 2 {
			return nil, "", fmt.Errorf("tokens line %d: want \"role token\"", line)
		}
		role, ok := byName[fields[0]]
		if !ok {
			return nil, "", fmt.Errorf("tokens line %d: unknown role %q (adserver, operator or peer)", line, fields[0])
		}
		tok := fields[1]
		if len(tok) < minTokenLen {
			return nil, "", fmt.Errorf("tokens line %d: token shorter than %d characters", line, minTokenLen)
		}
		if old, dup := tokens[tok]; dup && old != role {
			return nil, "", fmt.Errorf("tokens line %d: token already given role %s", line, old)
		}
		tokens[tok] = role
		if role == RolePeer {
			peer = tok
		}
	}
	if err := sc.Err(); err != nil {
		return nil, "", err
	}
	if len(tokens) == 0 {
		return nil, "", errors.New("tokens file holds no token")
	}
	if peer == "" {
		return nil, "", errors.New("tokens file holds no peer token: nodes could not replicate to each other")
	}
	return tokens, peer, nil
}

// TokenTable finds a token's role comparing SHA-256 digests in constant
// time, every entry each time, so the answer's timing says nothing of
// how much of a token matched.
type TokenTable []tokenEntry

type tokenEntry struct {
	sum  [sha256.Size]byte
	role Role
}

// NewTokenTable returns the table of tokens.
func NewTokenTable(tokens map[string]Role) TokenTable {
	t := make(TokenTable, 0, len(tokens))
	for tok, role := range tokens {
		t = append(t, tokenEntry{sha256.Sum256([]byte(tok)), role})
	}
	return t
}

// Role returns the token's role, 0 for an unknown token.
func (t TokenTable) Role(token string) Role { return t.roleOf(sha256.Sum256([]byte(token))) }

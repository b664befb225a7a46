package security

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"sync/atomic"

	"github.com/fcap-io/fcap/proto"
)

// Tokens is a node's token table as it stands now. Every Hello reads it,
// every request of an authenticated connection checks (one atomic load)
// that it has not changed since, and Reload replaces it whole, so a
// renewed tokens file takes effect without a restart:
//
//   - a new connection is judged by the table loaded last;
//   - a connection whose token a reload removed is refused on its next
//     request (ErrUnauthenticated) and closed; one whose token changed
//     role takes the new role's permissions;
//   - the node presents the table's last peer token to its peers from
//     then on (new connections), and its JSON API's client a token of
//     the table's.
//
// A table that would leave the nodes unable to talk (no peer token) is
// refused and the old one kept. A node started without tokens never
// requires them: turning authentication on takes a restart, so that no
// client is cut off by a signal.
type Tokens struct {
	cur atomic.Pointer[tokenSet]
}

// tokenSet is one load of the tokens file. Never changed once built.
type tokenSet struct {
	table TokenTable
	peer  string // the token this node presents to its peers
	api   string // the token the JSON API's client presents: an adserver's, else an operator's; "" for none
}

// NewTokens returns the table of tokens (none: no authentication), with
// peer the token this node presents to the others (Config.PeerToken).
func NewTokens(tokens map[string]Role, peer string) *Tokens {
	t := &Tokens{}
	t.cur.Store(newTokenSet(tokens, peer))
	return t
}

func newTokenSet(tokens map[string]Role, peer string) *tokenSet {
	s := &tokenSet{table: NewTokenTable(tokens)}
	if len(tokens) == 0 {
		return s
	}
	s.peer = peer
	for tok, role := range tokens {
		// Any adserver's token, else any operator's: the API needs Allow.
		if role == RoleAdServer || (role == RoleOperator && s.api == "") {
			s.api = tok
		}
	}
	return s
}

// Required reports whether every connection must authenticate.
func (t *Tokens) Required() bool { return len(t.cur.Load().table) > 0 }

// Reload puts a new table in place, or keeps the old one and says why:
// the node has no tokens, the new table is empty, or peer is not one of
// its peer (or operator) tokens.
func (t *Tokens) Reload(tokens map[string]Role, peer string) error {
	if !t.Required() {
		return errors.New("tokens: this node was started without tokens; requiring them takes a restart")
	}
	if len(tokens) == 0 {
		return errors.New("tokens: the new table is empty")
	}
	if r := tokens[peer]; r != RolePeer && r != RoleOperator {
		return errors.New("tokens: the new table's peer token is not one of its peer tokens: nodes could not replicate")
	}
	s := newTokenSet(tokens, peer)
	if old := t.API(); old != "" && tokens[old].Perms().May(proto.TypeAllow) {
		s.api = old // the API's connections stay up
	}
	t.cur.Store(s)
	return nil
}

// Peer returns the token this node presents to its peers, "" when the
// node has no tokens.
func (t *Tokens) Peer() string { return t.cur.Load().peer }

// API returns a token the node's JSON API may present to the data plane
// (an adserver's or operator's), "" when the table has none.
func (t *Tokens) API() string { return t.cur.Load().api }

// Bearer reports whether an HTTP caller's token may use the JSON API:
// an adserver's or operator's token of the current table.
func (t *Tokens) Bearer(token string) bool {
	return t.cur.Load().table.Role(token).Perms().May(proto.TypeAllow)
}

// Session is what a connection was granted by its Hello. The zero
// Session has no role.
type Session struct {
	set  *tokenSet // the table the role was decided by
	sum  [sha256.Size]byte
	role Role
}

// Authenticate returns the session token opens: its role is 0 for a
// token the table does not hold.
func (t *Tokens) Authenticate(token string) Session {
	s := Session{set: t.cur.Load(), sum: sha256.Sum256([]byte(token))}
	s.role = s.set.table.roleOf(s.sum)
	return s
}

// Role returns the session's role now: the one it was granted while the
// table is the same, else its token's role in the table loaded since (0:
// a reload removed the token). It updates s.
func (t *Tokens) Role(s *Session) Role {
	if cur := t.cur.Load(); s.set != cur {
		s.set, s.role = cur, cur.table.roleOf(s.sum)
	}
	return s.role
}

// roleOf is Role for a token's digest.
func (t TokenTable) roleOf(sum [sha256.Size]byte) Role {
	var found Role
	for i := range t {
		if subtle.ConstantTimeCompare(sum[:], t[i].sum[:]) == 1 {
			found = t[i].role
		}
	}
	return found
}

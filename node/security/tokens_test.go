package security

import (
	"strings"
	"testing"

	"github.com/fcap-io/fcap/proto"
)

func TestParseTokens(t *testing.T) {
	tokens, peer, err := ParseTokens(strings.NewReader("# comment\n\nadserver aaaaaaaaaaaaaaaa\noperator oooooooooooooooo\npeer pppppppppppppppp\npeer qqqqqqqqqqqqqqqq\n"))
	if err != nil {
		t.Fatal(err)
	}
	if tokens["aaaaaaaaaaaaaaaa"] != RoleAdServer || tokens["oooooooooooooooo"] != RoleOperator || tokens["pppppppppppppppp"] != RolePeer || len(tokens) != 4 {
		t.Errorf("tokens %v", tokens)
	}
	if peer != "qqqqqqqqqqqqqqqq" {
		t.Errorf("peer token %q, want the last one", peer)
	}
	for name, text := range map[string]string{
		"empty":        "# nothing\n",
		"no peer":      "adserver aaaaaaaaaaaaaaaa\n",
		"short":        "peer short\n",
		"unknown role": "root rrrrrrrrrrrrrrrr\npeer pppppppppppppppp\n",
		"three fields": "peer pppppppppppppppp extra\n",
		"two roles":    "peer pppppppppppppppp\nadserver pppppppppppppppp\n",
	} {
		if _, _, err := ParseTokens(strings.NewReader(text)); err == nil {
			t.Errorf("%s: accepted", name)
		} else if strings.Contains(err.Error(), "pppppppppppppppp") || strings.Contains(err.Error(), "rrrrrrrrrrrrrrrr") {
			t.Errorf("%s: the error quotes a token: %v", name, err)
		}
	}
}

func TestRolePermissions(t *testing.T) {
	for _, c := range []struct {
		role Role
		may  []proto.Type
		not  []proto.Type
	}{
		{RoleAdServer,
			[]proto.Type{proto.TypePing, proto.TypeTopologyRequest, proto.TypeCheck, proto.TypeAllow, proto.TypeRecord, proto.TypeReserve, proto.TypeRelease},
			[]proto.Type{proto.TypeStatusRequest, proto.TypeDrain, proto.TypeGossipKey, proto.TypeReplicate, proto.TypeSyncRequest, proto.TypeRegionMerge}},
		{RolePeer,
			[]proto.Type{proto.TypePing, proto.TypeTopologyRequest, proto.TypeReplicate, proto.TypeSyncRequest, proto.TypeRegionMerge},
			[]proto.Type{proto.TypeCheck, proto.TypeAllow, proto.TypeRecord, proto.TypeStatusRequest, proto.TypeDrain, proto.TypeGossipKey}},
		{RoleOperator,
			[]proto.Type{proto.TypeCheck, proto.TypeAllow, proto.TypeStatusRequest, proto.TypeDrain, proto.TypeGossipKey, proto.TypeReplicate},
			nil},
	} {
		p := c.role.Perms()
		for _, ty := range c.may {
			if !p.May(ty) {
				t.Errorf("%s may not send %s", c.role, ty)
			}
		}
		for _, ty := range c.not {
			if p.May(ty) {
				t.Errorf("%s may send %s", c.role, ty)
			}
		}
	}
	if (Perms{}).May(200) || RoleAdServer.Perms().May(200) || RolePeer.Perms().May(200) {
		t.Error("type 200, which no message has, is allowed")
	}
}

func TestTokenTable(t *testing.T) {
	tt := NewTokenTable(map[string]Role{"aaaaaaaaaaaaaaaa": RoleAdServer, "pppppppppppppppp": RolePeer})
	if tt.Role("aaaaaaaaaaaaaaaa") != RoleAdServer || tt.Role("pppppppppppppppp") != RolePeer || tt.Role("aaaaaaaaaaaaaaa") != 0 || tt.Role("") != 0 {
		t.Error("token lookup")
	}
}

// TestRolePermsFromTable checks the roles against the type table: a role
// may send exactly the requests whose senders name it, and the operator
// every request.
func TestRolePermsFromTable(t *testing.T) {
	for i := range 256 {
		typ := proto.Type(i)
		for _, rs := range []struct {
			role Role
			s    proto.Sender
		}{{RoleAdServer, proto.SenderAdServer}, {RolePeer, proto.SenderPeer}} {
			if want := typ.Senders()&rs.s != 0; rs.role.Perms().May(typ) != want {
				t.Errorf("%s may send %s: %v, want %v", rs.role, typ, !want, want)
			}
		}
		if typ.IsRequest() && !RoleOperator.Perms().May(typ) {
			t.Errorf("operator may not send %s", typ)
		}
	}
}

// A set holds types past 63 too (the region link's escrow messages are 64
// and 65): one uint64 held none, and every peer token was refused them.
func TestPermsPastSixtyThree(t *testing.T) {
	p := PermsOf(64, 65, 130, 255, 3)
	for _, ty := range []proto.Type{64, 65, 130, 255, 3} {
		if !p.May(ty) {
			t.Errorf("the set of %d does not hold it", ty)
		}
	}
	for _, ty := range []proto.Type{0, 63, 66, 129, 254} {
		if p.May(ty) {
			t.Errorf("the set holds %d, which it was not given", ty)
		}
	}
	for ty := range 256 {
		if !AllPerms.May(proto.Type(ty)) {
			t.Errorf("AllPerms does not hold %d", ty)
		}
	}
}

package security

import "testing"

// TestTokensReload: a reload changes what new Hellos get and what the
// sessions already granted get on their next request; a table that would
// cut the nodes off, or authentication turned on, is refused and changes
// nothing.
func TestTokensReload(t *testing.T) {
	const a, b, p1, p2 = "adserver-aaaaaaaaaa", "adserver-bbbbbbbbbb", "peer-1111111111111", "peer-2222222222222"
	tk := NewTokens(map[string]Role{a: RoleAdServer, p1: RolePeer}, p1)
	sa := tk.Authenticate(a)
	if sa.role != RoleAdServer || tk.Authenticate(b).role != 0 || tk.Peer() != p1 || tk.API() != a {
		t.Fatalf("before: a %v, b %v, peer %q, api %q", sa.role, tk.Authenticate(b).role, tk.Peer(), tk.API())
	}
	for name, c := range map[string]struct {
		tokens map[string]Role
		peer   string
	}{
		"empty":            {nil, ""},
		"no peer token":    {map[string]Role{b: RoleAdServer}, b},
		"peer not a token": {map[string]Role{b: RoleAdServer, p2: RolePeer}, p1},
	} {
		if err := tk.Reload(c.tokens, c.peer); err == nil {
			t.Errorf("%s: reloaded", name)
		}
	}
	if tk.Role(&sa) != RoleAdServer || tk.Peer() != p1 {
		t.Fatal("a refused reload changed the table")
	}
	if err := tk.Reload(map[string]Role{a: RoleOperator, b: RoleAdServer, p2: RolePeer}, p2); err != nil {
		t.Fatal(err)
	}
	if tk.Role(&sa) != RoleOperator || tk.Peer() != p2 || !tk.Bearer(b) || tk.Bearer(p2) {
		t.Errorf("after adding: a %v, peer %q, bearer b %v, bearer p2 %v", sa.role, tk.Peer(), tk.Bearer(b), tk.Bearer(p2))
	}
	if err := tk.Reload(map[string]Role{b: RoleAdServer, p2: RolePeer}, p2); err != nil {
		t.Fatal(err)
	}
	if tk.Role(&sa) != 0 || tk.Bearer(a) || tk.API() != b {
		t.Errorf("after removing a: its session's role %v, bearer %v, api %q", sa.role, tk.Bearer(a), tk.API())
	}
	if err := NewTokens(nil, "").Reload(map[string]Role{b: RoleAdServer, p2: RolePeer}, p2); err == nil {
		t.Error("a node without tokens turned them on")
	}
}

package node

import (
	"testing"

	"github.com/fcap-io/fcap/proto"
)

// TestEveryRequestHasAHandler walks the type table: every request type
// but Hello (answered before the permission check) has its handler in
// ops, and nothing that is not a request has one.
func TestEveryRequestHasAHandler(t *testing.T) {
	for i := range 256 {
		typ := proto.Type(i)
		has := i < len(ops) && ops[i] != nil
		switch {
		case typ == proto.TypeHello:
			if has {
				t.Errorf("%s: in ops, but answered before the permission check", typ)
			}
		case typ.IsRequest() && !has:
			t.Errorf("%s: a request with no handler", typ)
		case !typ.IsRequest() && has:
			t.Errorf("%s: a handler for what is not a request", typ)
		}
	}
}

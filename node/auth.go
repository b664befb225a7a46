package node

import (
	"fmt"

	"github.com/fcap-io/fcap/node/metrics"
	"github.com/fcap-io/fcap/node/security"
	"github.com/fcap-io/fcap/proto"
)

// hello answers a Hello: the connection takes the token's role, or is
// told it is unauthenticated and closed.
func (h *handler) hello(out []byte, hdr proto.Header, body []byte, epoch uint64) ([]byte, metrics.Op, metrics.Outcome) {
	var m proto.Hello
	if err := proto.Decode(body, &m); err != nil {
		h.hangup = true
		return h.failErr(out, hdr, err, epoch, metrics.OpHello)
	}
	if !h.n.tokens.Required() {
		return h.reply(out, hdr.ID, &proto.HelloResult{}, metrics.OpHello)
	}
	h.session = h.n.tokens.Authenticate(m.Token)
	if !h.current() {
		h.n.metrics.AuthFailures.Inc()
		return h.failErr(out, hdr, refusal(proto.CodeUnauthenticated, "unknown token"), epoch, metrics.OpHello)
	}
	return h.reply(out, hdr.ID, &proto.HelloResult{Role: h.role.String()}, metrics.OpHello)
}

// current takes the role the connection's token has in the token table
// now (a reload may have changed it) and reports whether it has one; a
// connection whose token is gone is closed once answered.
func (h *handler) current() bool {
	h.role = h.n.tokens.Role(&h.session)
	h.perms, h.hangup = h.role.Perms(), h.role == 0
	return h.role != 0
}

// deny answers a request the connection may not send.
func (h *handler) deny(out []byte, hdr proto.Header, epoch uint64) ([]byte, metrics.Op, metrics.Outcome) {
	h.n.metrics.AuthFailures.Inc()
	err := refusal(proto.CodeUnauthenticated, "%s needs a token: send Hello first", hdr.Type)
	if h.role != 0 {
		err = refusal(proto.CodePermissionDenied, "role %s may not send %s", h.role, hdr.Type)
	} else if h.hangup {
		err = refusal(proto.CodeUnauthenticated, "the connection's token is no longer accepted (the tokens file changed): connect with a current one")
	}
	return h.failErr(out, hdr, err, epoch, metrics.OpDenied)
}

// refusal is an error answer with a message of its own, so the client
// reads "fcap: bad request: <message>" rather than the sentinel twice.
func refusal(code proto.Code, format string, args ...any) *proto.Error {
	return &proto.Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ReloadTokens puts a new token table in place without a restart
// (security.Tokens says what changes for the connections already up), or
// keeps the one in place and says why.
func (n *Node) ReloadTokens(tokens map[string]security.Role, peer string) error {
	return n.tokens.Reload(tokens, peer)
}

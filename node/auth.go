package node

import (
	"fmt"
	"io"

	"github.com/fcap-io/fcap/node/metrics"
	"github.com/fcap-io/fcap/node/security"
	"github.com/fcap-io/fcap/proto"
)

// Role is what a token lets a connection do (security.Role).
type Role = security.Role

// The roles (security.RoleAdServer and the others).
const (
	RoleAdServer = security.RoleAdServer
	RoleOperator = security.RoleOperator
	RolePeer     = security.RolePeer
)

// ParseTokens reads a tokens file (security.ParseTokens).
func ParseTokens(r io.Reader) (tokens map[string]Role, peer string, err error) {
	return security.ParseTokens(r)
}

// hello answers a Hello: the connection takes the token's role, or is
// told it is unauthenticated and closed.
func (h *handler) hello(out []byte, hdr proto.Header, body []byte, epoch uint64) ([]byte, metrics.Op, metrics.Outcome) {
	var m proto.Hello
	if err := proto.Decode(body, &m); err != nil {
		h.hangup = true
		return h.failErr(out, hdr, err, epoch, metrics.OpHello)
	}
	if len(h.n.tokens) == 0 {
		return h.reply(out, hdr.ID, &proto.HelloResult{}, metrics.OpHello)
	}
	role := h.n.tokens.Role(m.Token)
	if role == 0 {
		h.perms, h.hangup = 0, true
		h.n.metrics.AuthFailures.Inc()
		return h.failErr(out, hdr, refusal(proto.CodeUnauthenticated, "unknown token"), epoch, metrics.OpHello)
	}
	h.perms = role.Perms()
	h.role = role
	return h.reply(out, hdr.ID, &proto.HelloResult{Role: role.String()}, metrics.OpHello)
}

// deny answers a request the connection may not send.
func (h *handler) deny(out []byte, hdr proto.Header, epoch uint64) ([]byte, metrics.Op, metrics.Outcome) {
	h.n.metrics.AuthFailures.Inc()
	err := refusal(proto.CodeUnauthenticated, "%s needs a token: send Hello first", hdr.Type)
	if h.role != 0 {
		err = refusal(proto.CodePermissionDenied, "role %s may not send %s", h.role, hdr.Type)
	}
	return h.failErr(out, hdr, err, epoch, metrics.OpDenied)
}

// refusal is an error answer with a message of its own, so the client
// reads "fcap: bad request: <message>" rather than the sentinel twice.
func refusal(code proto.Code, format string, args ...any) *proto.Error {
	return &proto.Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

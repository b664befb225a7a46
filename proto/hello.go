package proto

import (
	"fmt"
	"io"
	"strings"
)

// Hello authenticates a connection: on a node started with tokens it must
// be the first frame, and the role of its token decides which requests
// the connection may send from then on. It is answered with a
// HelloResult, or an Error of CodeUnauthenticated (no such token; the
// node then closes the connection). A node without tokens answers it
// with an empty Role. A node older than Hello answers CodeUnsupported
// (unknown message type), which clients report as a node that does not
// support tokens.
//
// Wire: [token str].
type Hello struct {
	// Token is the secret the node's tokens file maps to a role. It
	// aliases the frame body when decoded.
	Token string
}

// Type returns TypeHello.
func (*Hello) Type() Type { return TypeHello }

func (m *Hello) encode(e *encoder) {
	e.array(1)
	e.str(m.Token)
}

func (m *Hello) decode(d *decoder) {
	extra := d.array(1)
	m.Token = d.str()
	d.end(extra)
}

// HelloResult answers Hello with the role the token holds.
//
// Wire: [role str].
type HelloResult struct {
	// Role is the token's role ("adserver", "operator", "peer"), or
	// empty when the node requires no token.
	Role string
}

// Type returns TypeHelloResult.
func (*HelloResult) Type() Type { return TypeHelloResult }

func (m *HelloResult) encode(e *encoder) {
	e.array(1)
	e.str(m.Role)
}

func (m *HelloResult) decode(d *decoder) {
	extra := d.array(1)
	m.Role = d.str()
	d.end(extra)
}

// HelloID is the request id SayHello's Hello carries: 10, '\n' in its
// frame's last header byte. A server of a line-based text protocol (an
// HTTP server: a node's --http address given as a data-plane address)
// then reads a complete, malformed line and answers at once ("HTTP/1.1
// 400 ..."), where a frame without a newline would leave it waiting for
// the rest of its request line; the client names what it found from that
// answer. Any id is valid to a node, which echoes it.
const HelloID = 0x0a

// SayHello authenticates a fresh connection: it sends a Hello with token
// and reads the answer, the only frame the node sends before the next
// request, and returns the role. A node's refusal is returned as its
// *Error (ErrUnauthenticated for an unknown token); a node too old to
// know Hello as an error wrapping ErrUnsupported that says so. The
// caller sets the connection's deadline.
func SayHello(c io.ReadWriter, token string) (role string, err error) {
	b, err := AppendFrame(nil, HelloID, &Hello{Token: token})
	if err != nil {
		return "", err
	}
	if _, err := c.Write(b); err != nil {
		return "", err
	}
	hdr, body, err := NewReader(c, DefaultMaxFrame).Next()
	if err != nil {
		return "", fmt.Errorf("reading the answer to hello: %w", err)
	}
	switch hdr.Type {
	case TypeHelloResult:
		var res HelloResult
		if err := Decode(body, &res); err != nil {
			return "", err
		}
		return strings.Clone(res.Role), nil
	case TypeError:
		var e Error
		if err := Decode(body, &e); err != nil {
			return "", err
		}
		e.Message = strings.Clone(e.Message)
		if e.Code == CodeUnsupported {
			return "", fmt.Errorf("%w: the node does not know tokens (an older version?): %v", ErrUnsupported, &e)
		}
		return "", &e
	}
	return "", fmt.Errorf("%w: hello answered with %v", ErrBadRequest, hdr.Type)
}

package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/fcap-io/fcap/proto"
	"github.com/fcap-io/fcap/proto/rpc"
)

// Every connection the client opens says Hello (with Config.Token, or
// none) and is used only once a node has answered it: a connection
// counts as up when an fcap node is known to be at its other end, not
// when TCP connects. An address where something else listens (a node's
// HTTP port, a TLS server, another protocol) is found out within
// DialTimeout, and what answered there is named in the error (DialError)
// that WaitReady and calls on a client that never reached the cluster
// return. The Hello also makes the connection one the node has taken in
// (a node without tokens treats a connection as authenticated from its
// first request on), so the first call on it is served like any other.

// Found is what answered at a node's address when the client connected.
type Found uint8

const (
	// FoundNothing: nothing answered: the connection was refused or
	// timed out, the name did not resolve, or the other end accepted the
	// connection and then said nothing (or closed it without a word).
	FoundNothing Found = iota
	// FoundFcap: an fcap node answered, and refused the connection (an
	// unknown token, a node that is full or shutting down, plaintext
	// where Config.TLS asks for TLS).
	FoundFcap
	// FoundHTTP: an HTTP server answered: a node's HTTP address (fcapd
	// --http: metrics, status page, JSON API) rather than its data plane
	// (fcapd --data), say.
	FoundHTTP
	// FoundTLS: a TLS server answered: a node started with TLS while
	// Config.TLS is not set, or a certificate one side refused.
	FoundTLS
	// FoundOther: something answered in another protocol.
	FoundOther
)

// String names what was found: "nothing", "an fcap node", "an HTTP
// server", "a TLS server", "another protocol".
func (f Found) String() string {
	switch f {
	case FoundNothing:
		return "nothing"
	case FoundFcap:
		return "an fcap node"
	case FoundHTTP:
		return "an HTTP server"
	case FoundTLS:
		return "a TLS server"
	case FoundOther:
		return "another protocol"
	}
	return fmt.Sprintf("Found(%d)", uint8(f))
}

// DialError is why the client could not connect to a node's address,
// and what answered there. WaitReady's error, and the ErrUnavailable of
// a client that never reached the cluster, hold one per address
// (errors.As finds the first).
type DialError struct {
	// Addr is the address dialed, as Config.Seeds or the topology names
	// it.
	Addr string
	// Found is what answered there.
	Found Found
	// Err is what went wrong: the dial's error, the node's refusal, or
	// the bytes that were not an fcap answer.
	Err error

	// settled: retrying with the same configuration cannot help (another
	// protocol listens there, or a node refused the token or the
	// certificate); what nothing answered may yet come up.
	settled bool
}

func (e *DialError) Error() string {
	return fmt.Sprintf("%s: %s answered: %v", e.Addr, e.Found, e.Err)
}

func (e *DialError) Unwrap() error { return e.Err }

// Hints appended to a DialError's Err, saying what to change.
const (
	hintHTTP = "not an fcap node: a node's HTTP address (fcapd --http)? The client needs its data-plane address (fcapd --data)"
	hintTLS  = "not a plaintext fcap node: the node serves TLS? Set Config.TLS (client.LoadTLS)"
)

// dialFcap opens a connection to addr and says Hello on it, within
// DialTimeout each. A connection is returned only once an fcap node
// answered the Hello; otherwise the error is a *DialError naming what
// answered.
func (c *Client) dialFcap(addr string) (net.Conn, error) {
	token := c.cfg.Token
	if c.cfg.TokenFunc != nil {
		token = c.cfg.TokenFunc()
	}
	nc, err := rpc.Dial(context.Background(), addr, c.cfg.DialTimeout, c.cfg.TLS, "", c.cfg.Dial)
	if err != nil {
		return nil, c.dialFailed(addr, err)
	}
	nc.SetDeadline(time.Now().Add(c.cfg.DialTimeout))
	rec := &recorder1st{Conn: nc}
	_, err = proto.SayHello(rec, token)
	if err == nil || token == "" && errors.Is(err, proto.ErrUnsupported) {
		// A node older than Hello answers it as an unknown request: an
		// fcap node all the same, and one with no tokens to present.
		nc.SetDeadline(time.Time{})
		return nc, nil
	}
	nc.Close()
	return nil, c.helloFailed(addr, rec.first(), err)
}

// dialFailed describes a connection that did not open (TCP, or the TLS
// handshake).
func (c *Client) dialFailed(addr string, err error) *DialError {
	e := &DialError{Addr: addr, Found: FoundNothing, Err: err}
	var rh tls.RecordHeaderError
	var alert tls.AlertError
	var verify *tls.CertificateVerificationError
	var unknownCA x509.UnknownAuthorityError
	var host x509.HostnameError
	switch {
	case errors.As(err, &rh):
		// The TLS handshake read something that is not TLS.
		e.Found, e.settled = identify(rh.RecordHeader[:]), true
		switch e.Found {
		case FoundFcap:
			e.Err = fmt.Errorf("%w: the node speaks plaintext: Config.TLS is set, the node has no TLS", err)
		case FoundHTTP:
			e.Err = fmt.Errorf("%w (%s): %s", err, quote(rh.RecordHeader[:]), hintHTTP)
		default:
			e.Found = FoundOther
			e.Err = fmt.Errorf("%w (first bytes %s)", err, quote(rh.RecordHeader[:]))
		}
	case errors.As(err, &verify), errors.As(err, &unknownCA), errors.As(err, &host):
		e.Found, e.settled = FoundTLS, true
		e.Err = fmt.Errorf("its certificate was refused: %w", err)
	case errors.As(err, &alert):
		e.Found, e.settled = FoundTLS, true
		e.Err = fmt.Errorf("it refused the TLS handshake: %w", err)
	case errors.Is(err, syscall.ECONNREFUSED):
		e.Err = fmt.Errorf("%w: nothing listens on that port (a typo? the node down?)", err)
	case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, context.DeadlineExceeded):
		e.Err = fmt.Errorf("%w: no answer within DialTimeout (%v): a wrong host, or a firewall?", err, c.cfg.DialTimeout)
	}
	return e
}

// helloFailed describes a connection whose Hello was not answered by an
// fcap node: first are the first bytes that came back.
func (c *Client) helloFailed(addr string, first []byte, err error) *DialError {
	e := &DialError{Addr: addr, Found: FoundFcap, Err: err}
	var refused *proto.Error
	if errors.As(err, &refused) {
		// A node's answer: a refused token settles it, a full node or
		// one shutting down may take the next connection.
		e.settled = refused.Code == proto.CodeUnauthenticated || refused.Code == proto.CodePermissionDenied
		return e
	}
	if errors.Is(err, proto.ErrUnsupported) {
		e.settled = true // a token for a node that has no tokens
		return e
	}
	switch e.Found = identify(first); e.Found {
	case FoundNothing:
		if errors.Is(err, os.ErrDeadlineExceeded) {
			e.Err = fmt.Errorf("the connection opened, and nothing answered the hello within DialTimeout (%v): %w", c.cfg.DialTimeout, err)
			return e
		}
		if c.cfg.TLS == nil && c.speaksTLS(addr) {
			e.Found, e.settled = FoundTLS, true
			e.Err = fmt.Errorf("it closed the connection at the hello and answers a TLS handshake: %s", hintTLS)
			return e
		}
		e.Err = fmt.Errorf("the connection opened, and was closed at the hello without a word: %w", err)
	case FoundHTTP:
		e.settled = true
		e.Err = fmt.Errorf("%s: %s", statusLine(first), hintHTTP)
	case FoundTLS:
		e.settled = true
		e.Err = fmt.Errorf("a TLS record (%s): %s", quote(first[:min(len(first), 5)]), hintTLS)
	case FoundOther:
		e.settled = true
		e.Err = fmt.Errorf("first bytes %s, not an fcap frame", quote(first))
	case FoundFcap:
		// Frames, but not an answer to the hello: a node that could not
		// read it (another protocol version, say).
		e.settled = true
	}
	return e
}

// speaksTLS reports whether the server at addr answers a TLS handshake
// with a TLS record. A TLS server given the plaintext hello closes the
// connection without a word (Go's does), so the client asks again, in
// TLS, to say what is there. The handshake is never completed: the
// answer's first bytes tell.
func (c *Client) speaksTLS(addr string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.DialTimeout)
	defer cancel()
	var nc net.Conn
	var err error
	if c.cfg.Dial != nil {
		nc, err = c.cfg.Dial(ctx, "tcp", addr)
	} else {
		var d net.Dialer
		nc, err = d.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return false
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(c.cfg.DialTimeout))
	host, _, _ := net.SplitHostPort(addr)
	rec := &recorder1st{Conn: nc}
	tls.Client(rec, &tls.Config{ServerName: host, MinVersion: tls.VersionTLS12}).HandshakeContext(ctx)
	return identify(rec.first()) == FoundTLS
}

// identify tells from the first bytes a server sent what it speaks.
func identify(b []byte) Found {
	switch {
	case len(b) == 0:
		return FoundNothing
	case bytes.HasPrefix(b, []byte("HTTP/")):
		return FoundHTTP
	case len(b) >= 3 && (b[0] == 0x15 || b[0] == 0x16) && b[1] == 0x03 && b[2] <= 0x04:
		// A TLS record header: alert or handshake, version 3.x.
		return FoundTLS
	case len(b) >= 5 && b[0] == 0 && b[4] == proto.Version:
		// A frame's length (under 16 MiB) and the protocol's version.
		return FoundFcap
	}
	return FoundOther
}

// statusLine quotes an HTTP answer's first line.
func statusLine(b []byte) string {
	if i := bytes.IndexAny(b, "\r\n"); i >= 0 {
		b = b[:i]
	}
	return fmt.Sprintf("%q", b)
}

// quote shows bytes as a quoted string, escapes and all.
func quote(b []byte) string { return fmt.Sprintf("%q", b) }

// recorder1st is a connection that keeps the first bytes read from it.
type recorder1st struct {
	net.Conn
	buf [32]byte
	n   int
}

func (r *recorder1st) Read(p []byte) (int, error) {
	n, err := r.Conn.Read(p)
	r.n += copy(r.buf[r.n:], p[:n])
	return n, err
}

func (r *recorder1st) first() []byte { return r.buf[:r.n] }

// settledErr reports whether err says that retrying with the same
// configuration cannot help.
func settledErr(err error) bool {
	var de *DialError
	return errors.As(err, &de) && de.settled
}

// describeAddr is what WaitReady and a never-reached client say about
// one address: why its last dial failed, or that it is up.
func describeAddr(role, addr string, err error) string {
	if err == nil {
		return role + " " + addr + ": connected"
	}
	s := err.Error()
	var de *DialError
	if errors.As(err, &de) {
		s = strings.TrimPrefix(s, addr+": ")
	}
	return role + " " + addr + ": " + s
}

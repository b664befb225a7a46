// Package rpc is the one-off peer call: a request to one node on a
// connection of its own, answered in order (Admin, AdminConn), and the
// dial every connection to a node goes through (Dial: TLS, no Nagle, the
// Hello that presents a token). Nodes call their peers with it
// (node/peers), operators' tools and tests call nodes with it, and the
// client dials its pooled connections with Dial. It imports only proto,
// so the node server and the client share it without one importing the
// other.
package rpc

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/fcap-io/fcap/proto"
)

// Admin sends one-off requests, each on a connection of its own, for
// operators' tools, tests and peer calls (status, drain, topology, keys,
// replication), not for the client's hot path: it dials every time. The
// zero Admin dials plaintext.
type Admin struct {
	// TLS, if not nil, dials the nodes over TLS (see client.Config.TLS).
	TLS *tls.Config
	// Token, if not empty, authenticates each connection (see
	// client.Config.Token); operators' requests need an operator token.
	Token string
	// MaxFrame bounds the answer's frame; 0 means proto.DefaultMaxFrame.
	// Verify answers with per-viewer digests can be larger.
	MaxFrame int
}

// Call sends one request to the node at addr on a connection of its own
// and decodes the answer into resp. See Admin.Call.
func Call(ctx context.Context, addr string, req, resp proto.Message) error {
	return (&Admin{}).Call(ctx, addr, req, resp)
}

// Call sends one request to the node at addr and decodes the answer into
// resp. An Error answer is returned as a *proto.Error. Strings in resp
// alias a buffer of this call only, so they stay valid.
func (a *Admin) Call(ctx context.Context, addr string, req, resp proto.Message) error {
	c, err := a.Dial(ctx, addr)
	if err != nil {
		return err
	}
	defer c.Close()
	return c.Call(ctx, req, resp)
}

// Dial opens a connection to the node at addr for a series of calls, one
// at a time (nodes use it to replicate to their peers).
func (a *Admin) Dial(ctx context.Context, addr string) (*AdminConn, error) {
	c, err := Dial(ctx, addr, 2*time.Second, a.TLS, a.Token, nil)
	var refused *proto.Error
	switch {
	case errors.As(err, &refused):
		return nil, refused
	case err != nil:
		return nil, fmt.Errorf("cannot reach %s: %w", addr, err)
	}
	max := a.MaxFrame
	if max <= 0 {
		max = proto.DefaultMaxFrame
	}
	return &AdminConn{addr: addr, c: c, rd: proto.NewReader(c, max)}, nil
}

// AdminConn is a connection Admin.Dial opened. Its calls are answered in
// order; it is not safe for concurrent use.
type AdminConn struct {
	addr string
	c    net.Conn
	rd   *proto.Reader
	out  []byte
	id   uint64
}

// Call sends req and decodes the answer into resp, within ctx's deadline
// if it has one. An Error answer is returned as a *proto.Error and leaves
// the connection usable; after any other error, close it. Strings in
// resp alias the connection's read buffer: they stay valid until the
// next call.
func (c *AdminConn) Call(ctx context.Context, req, resp proto.Message) error {
	dl, _ := ctx.Deadline() // the zero time: none
	c.c.SetDeadline(dl)
	c.id++
	var err error
	if c.out, err = proto.AppendFrame(c.out[:0], c.id, req); err != nil {
		return err
	}
	if _, err := c.c.Write(c.out); err != nil {
		return fmt.Errorf("%s: %w", c.addr, err)
	}
	hdr, body, err := c.rd.Next()
	if err != nil {
		return fmt.Errorf("%s: %w", c.addr, err)
	}
	if hdr.Type == proto.TypeError {
		var e proto.Error
		if err := proto.Decode(body, &e); err != nil {
			return err
		}
		e.Message = strings.Clone(e.Message)
		return &e
	}
	if hdr.Type != resp.Type() {
		return fmt.Errorf("%s answered %v, want %v", c.addr, hdr.Type, resp.Type())
	}
	return proto.Decode(body, resp)
}

// Close closes the connection.
func (c *AdminConn) Close() error { return c.c.Close() }

// NodeStatus asks the node at addr for its status: state, partitions by
// rank, partitions still syncing or being handed over, replication
// backlog, memory.
func NodeStatus(ctx context.Context, addr string) (*proto.Status, error) {
	return (&Admin{}).NodeStatus(ctx, addr)
}

// NodeStatus asks the node at addr for its status (see NodeStatus).
func (a *Admin) NodeStatus(ctx context.Context, addr string) (*proto.Status, error) {
	var st proto.Status
	if err := a.Call(ctx, addr, &proto.StatusRequest{}, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

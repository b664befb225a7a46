package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/fcap-io/fcap/proto"
)

// Admin sends one-off requests, each on a connection of its own, for
// operators' tools and tests (status, drain, topology, keys), not for the
// hot path: it dials every time. The zero Admin dials plaintext.
type Admin struct {
	// TLS, if not nil, dials the nodes over TLS (see Config.TLS).
	TLS *tls.Config
	// Token, if not empty, authenticates each connection (see
	// Config.Token); operators' requests need an operator token.
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
	c, err := dial(ctx, addr, 2*time.Second, a.TLS, a.Token, nil)
	var refused *proto.Error
	switch {
	case errors.As(err, &refused):
		return refused
	case err != nil:
		return fmt.Errorf("cannot reach %s: %w", addr, err)
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	b, err := proto.AppendFrame(nil, 1, req)
	if err != nil {
		return err
	}
	if _, err := c.Write(b); err != nil {
		return fmt.Errorf("%s: %w", addr, err)
	}
	max := a.MaxFrame
	if max <= 0 {
		max = proto.DefaultMaxFrame
	}
	hdr, body, err := proto.NewReader(c, max).Next()
	if err != nil {
		return fmt.Errorf("%s: %w", addr, err)
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
		return fmt.Errorf("%s answered %v, want %v", addr, hdr.Type, resp.Type())
	}
	return proto.Decode(body, resp)
}

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

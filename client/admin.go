package client

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/fcap-io/fcap/proto"
)

// Call sends one request to the node at addr on a connection of its own
// and decodes the answer into resp. It is for operators' tools and tests
// (status, drain, topology), not for the hot path: it dials every time.
// An Error answer is returned as a *proto.Error. Strings in resp alias a
// buffer of this call only, so they stay valid.
func Call(ctx context.Context, addr string, req, resp proto.Message) error {
	d := net.Dialer{Timeout: 2 * time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
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
	hdr, body, err := proto.NewReader(c, proto.DefaultMaxFrame).Next()
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
	var st proto.Status
	if err := Call(ctx, addr, &proto.StatusRequest{}, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

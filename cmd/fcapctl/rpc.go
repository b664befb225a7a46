package main

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/fcap-io/fcap/proto"
)

// call sends one request to a node's data plane and decodes the answer
// into resp. An Error answer is returned as an error.
func call(ctx context.Context, addr string, req, resp proto.Message) error {
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

// topology asks any of the addresses for the cluster's topology; strings
// are copied out of the frame.
func topology(ctx context.Context, addrs []string) (*proto.Topology, error) {
	var errs []string
	for _, addr := range addrs {
		var t proto.Topology
		if err := call(ctx, addr, &proto.TopologyRequest{}, &t); err != nil {
			errs = append(errs, err.Error())
			continue
		}
		for i := range t.Members {
			m := &t.Members[i]
			m.Name, m.Addr, m.HTTPAddr = strings.Clone(m.Name), strings.Clone(m.Addr), strings.Clone(m.HTTPAddr)
		}
		t.Members = append([]proto.Member(nil), t.Members...)
		t.Owners = append([]uint16(nil), t.Owners...)
		return &t, nil
	}
	return nil, fmt.Errorf("no node answered: %s", strings.Join(errs, "; "))
}

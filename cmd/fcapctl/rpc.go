package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/proto"
)

// call sends one request to a node's data plane.
func call(ctx context.Context, addr string, req, resp proto.Message) error {
	return client.Call(ctx, addr, req, resp)
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

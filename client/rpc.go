package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"

	"github.com/fcap-io/fcap/proto"
	"github.com/fcap-io/fcap/proto/rpc"
)

// The one-off calls, and the dial every connection goes through, are
// package rpc's (proto/rpc), which the nodes use for their peer calls
// too; the names below keep them where ad servers and tools find them.

// Admin sends one-off requests, each on a connection of its own, for
// operators' tools and tests (status, drain, topology, keys), not for the
// hot path: it dials every time. The zero Admin dials plaintext. See
// rpc.Admin.
type Admin = rpc.Admin

// AdminConn is a connection Admin.Dial opened. See rpc.AdminConn.
type AdminConn = rpc.AdminConn

// Call sends one request to the node at addr on a connection of its own
// and decodes the answer into resp. See Admin.Call.
func Call(ctx context.Context, addr string, req, resp proto.Message) error {
	return rpc.Call(ctx, addr, req, resp)
}

// NodeStatus asks the node at addr for its status: state, partitions by
// rank, partitions still syncing or being handed over, replication
// backlog, memory.
func NodeStatus(ctx context.Context, addr string) (*proto.Status, error) {
	return rpc.NodeStatus(ctx, addr)
}

// LoadTLS builds a client TLS config from PEM files: caFile holds the CA
// certificates that verify the nodes (empty: the system's roots);
// certFile and keyFile, both or neither, the client certificate for
// nodes that require one. TLS 1.2 at least.
func LoadTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	return rpc.LoadTLS(caFile, certFile, keyFile)
}

// LoadCertPool reads PEM certificates from file into a new pool.
func LoadCertPool(file string) (*x509.CertPool, error) { return rpc.LoadCertPool(file) }

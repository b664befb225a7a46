// Package peers calls other nodes' data planes as a peer: over TLS when
// the node dials its peers with TLS, with the peer token loaded last when
// the nodes use tokens. One type serves replication (a connection per
// peer), partition requests, drain checks and identity forwarding (a
// connection per call).
package peers

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"time"

	"github.com/fcap-io/fcap/node/replication"
	"github.com/fcap-io/fcap/node/security"
	"github.com/fcap-io/fcap/proto"
	"github.com/fcap-io/fcap/proto/rpc"
)

// CallTimeout bounds a one-off call to a peer.
const CallTimeout = 2 * time.Second

// Peers dials other nodes.
type Peers struct {
	admin  rpc.Admin // its Token is set per connection, from tokens
	tokens *security.Tokens
}

// New returns the peers of a node that dials them with tlsCfg (nil:
// plaintext), presents tokens' peer token, and reads answers of up to
// maxFrame bytes (at least room for a replication batch).
func New(tlsCfg *tls.Config, maxFrame int, tokens *security.Tokens) *Peers {
	return &Peers{tokens: tokens, admin: rpc.Admin{
		TLS: tlsCfg,
		// Answers carry viewer states (LinkDevice) and topologies.
		MaxFrame: max(maxFrame, proto.MaxReplicateBytes+1<<16),
	}}
}

// as is the admin a new connection dials with.
func (p *Peers) as() *rpc.Admin {
	a := p.admin
	a.Token = p.tokens.Peer()
	return &a
}

// Dial opens a connection for a series of calls (a replication sender).
func (p *Peers) Dial(ctx context.Context, addr string) (replication.Conn, error) {
	c, err := p.as().Dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Call sends one request on a connection of its own and decodes the
// answer into resp, within ctx and at most CallTimeout.
func (p *Peers) Call(ctx context.Context, addr string, req, resp proto.Message) error {
	ctx, cancel := context.WithTimeout(ctx, CallTimeout)
	defer cancel()
	return p.as().Call(ctx, addr, req, resp)
}

// CallOwner is Call to the node at addr as the owner of id: its
// refusals come back as they are, and everything that says it may
// answer later (it moved, is busy, shutting down or unreachable) as
// proto.ErrOverloaded, so the caller's own caller retries rather than
// refreshing its topology for a NotOwner that is not its own.
func (p *Peers) CallOwner(ctx context.Context, addr, id string, req, resp proto.Message) error {
	err := p.Call(ctx, addr, req, resp)
	var e *proto.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &e) && e.Code != proto.CodeNotOwner && e.Code != proto.CodeOverloaded && e.Code != proto.CodeShuttingDown:
		return e
	}
	return fmt.Errorf("%w: the owner of %q (%s): %v; retry", proto.ErrOverloaded, id, addr, err)
}

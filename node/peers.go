package node

import (
	"context"
	"time"

	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/node/replication"
	"github.com/fcap-io/fcap/node/security"
	"github.com/fcap-io/fcap/proto"
)

// peerCallTimeout bounds a one-off call to a peer.
const peerCallTimeout = 2 * time.Second

// peers calls other nodes' data planes as a peer: over TLS with PeerTLS
// when it is set, with the peer token loaded last when the nodes use
// tokens. One type serves replication (a connection per peer), partition
// requests, drain checks and identity forwarding (a connection per call).
type peers struct {
	admin  client.Admin // its Token is set per connection, from tokens
	tokens *security.Tokens
}

func newPeers(cfg Config, tokens *security.Tokens) *peers {
	return &peers{tokens: tokens, admin: client.Admin{
		TLS: cfg.Security.PeerTLS,
		// Answers carry viewer states (LinkDevice) and topologies.
		MaxFrame: max(cfg.MaxFrame, proto.MaxReplicateBytes+1<<16),
	}}
}

// as is the admin a new connection dials with.
func (p *peers) as() *client.Admin {
	a := p.admin
	a.Token = p.tokens.Peer()
	return &a
}

// Dial opens a connection for a series of calls (a replication sender).
func (p *peers) Dial(ctx context.Context, addr string) (replication.Conn, error) {
	c, err := p.as().Dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Call sends one request on a connection of its own and decodes the
// answer into resp, within ctx and at most peerCallTimeout.
func (p *peers) Call(ctx context.Context, addr string, req, resp proto.Message) error {
	ctx, cancel := context.WithTimeout(ctx, peerCallTimeout)
	defer cancel()
	return p.as().Call(ctx, addr, req, resp)
}

// nodeLog is the node's write-ahead log as replication sees it.
type nodeLog struct{ n *Node }

func (l nodeLog) Changed(key uint64) uint64 { return l.n.logChange(key) }
func (l nodeLog) Wait(seq uint64)           { l.n.waitLogged(seq) }

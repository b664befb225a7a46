package node

import (
	"errors"

	"github.com/fcap-io/fcap/node/conns"
	"github.com/fcap-io/fcap/node/preauth"
	"github.com/fcap-io/fcap/proto"
)

// Plain-TCP data-plane connections wait for their first complete frame
// in node/preauth's poller, all on one goroutine, and get a goroutine of
// their own (serveFrames) when it has arrived. TLS connections, whose
// handshake needs a goroutine, and every connection where there is no
// poller (not Linux) are served a goroutine each from their connect
// (serveConn).

// startPreauth starts the pre-authentication poller of a plain-TCP data
// plane; nil with TLS or where there is none.
func (n *Node) startPreauth() *preauth.Poller {
	if n.cfg.Security.TLS != nil {
		return nil
	}
	p, err := preauth.New(preauth.Config{
		IdleTimeout:      n.cfg.IdleTimeout,
		HandshakeTimeout: n.cfg.HandshakeTimeout,
		Done:             n.preauthDone,
	})
	if err != nil {
		if !errors.Is(err, errors.ErrUnsupported) {
			n.log.Warn("connections are served a goroutine each from their connect", "err", err)
		}
		return nil
	}
	n.wg.Go(p.Run)
	return p
}

// preauthDone takes a connection the poller let go: serves it when its
// first frame has arrived, else counts why and closes it. It runs on the
// poller's goroutine.
func (n *Node) preauthDone(st *conns.Conn, r preauth.Result) {
	switch r {
	case preauth.Ready:
		n.wg.Go(func() {
			defer n.conns.Untrack(st)
			n.serveFrames(st, n.tokens.Required())
		})
		return
	case preauth.Idle:
		n.metrics.IdleClosed.Inc()
	case preauth.Handshake:
		n.metrics.HandshakeClosed.Inc()
	case preauth.Evicted:
		n.say(st, proto.CodeOverloaded, evictedMessage)
	}
	n.conns.Untrack(st)
}

package gossip

import "errors"

var (
	// ErrShutdown is returned by Membership methods called after Shutdown.
	ErrShutdown = errors.New("gossip: membership is shut down")

	// ErrLeft is returned by SetState after Leave: a node that has left
	// the gossip pool cannot announce itself again.
	ErrLeft = errors.New("gossip: membership has left the cluster")
)

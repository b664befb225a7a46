package gossip

import (
	"errors"
	"fmt"
)

var (
	// ErrShutdown is returned by Membership methods called after Shutdown.
	ErrShutdown = errors.New("gossip: membership is shut down")

	// ErrLeft is returned by SetState after Leave: a node that has left
	// the gossip pool cannot announce itself again.
	ErrLeft = errors.New("gossip: membership has left the cluster")

	// ErrReachable is returned by Forget for a member that is alive: only
	// a member that failed may be forgotten (drain a live one).
	ErrReachable = errors.New("gossip: member is alive")

	// ErrNotFailed is returned by Forget for a name that is not a failed
	// member of this node's member set.
	ErrNotFailed = errors.New("gossip: not a failed member")
)

// ErrNameTaken: another live member of the cluster already uses this
// node's name. Names place nodes on the ring, so two nodes cannot share
// one; the newcomer must stop.
type ErrNameTaken struct {
	Name string
	// Addr is the gossip address of the member that holds the name.
	Addr string
}

func (e *ErrNameTaken) Error() string {
	return fmt.Sprintf("the name %q is taken by a live member at %s: give this node another --name", e.Name, e.Addr)
}

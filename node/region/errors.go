package region

import "errors"

// Configuration errors: a region setting that cannot work. Each is
// wrapped with %w and the offending value.
var (
	// ErrName rejects a region name that is not 1-32 of [a-z0-9-].
	ErrName = errors.New("region: a region name is 1-32 characters of a-z, 0-9 and -")
	// ErrPeerSpec rejects a peer region not written NAME=host:port[,host:port...].
	ErrPeerSpec = errors.New("region: a peer region is NAME=host:port[,host:port...]")
	// ErrNoRegion rejects peer regions on a node that does not name its own.
	ErrNoRegion = errors.New("region: peer regions need this node's own region (--region)")
	// ErrOwnName rejects a peer region that carries this node's region name.
	ErrOwnName = errors.New("region: a peer region may not carry this node's own region name")
	// ErrDuplicate rejects a peer region named twice.
	ErrDuplicate = errors.New("region: peer region named twice")
	// ErrDeps rejects links to peer regions made without what they need
	// of the node.
	ErrDeps = errors.New("region: links to peer regions need the node's view of what it is primary of")
)

// The digest catch-up's own signals (digest.go), never returned by the
// package.
var (
	// errStopped: the links closed while a round ran.
	errStopped = errors.New("region links closed")
	// errTooLarge: a slice's cap keys or answer overflowed its bound;
	// the partition is compared in more slices.
	errTooLarge = errors.New("region digest: slice too large")
)

// Retire errors (Links.Retire): an operator's retire that cannot be
// taken. Each is wrapped with %w and the region's name.
var (
	// ErrNotPeer refuses to retire a region that is not a configured
	// peer region (this node's own region included).
	ErrNotPeer = errors.New("region: not a peer region of this node")
	// ErrReachable refuses to retire a peer region this node's link
	// reaches now (without force): a region that answers is not lost.
	ErrReachable = errors.New("region: the peer region is reachable from this node")
)

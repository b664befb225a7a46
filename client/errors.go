package client

import (
	"errors"

	"github.com/fcap-io/fcap/proto"
)

// Errors a caller may see. Cluster failures are not among them: a call
// the cluster cannot answer returns a verdict marked FailOpen or
// FailClosed and no error.
var (
	// ErrBadRequest: the request itself is invalid (empty viewer, bad cap,
	// ...). The same as proto.ErrBadRequest, so errors.Is works on both.
	ErrBadRequest = proto.ErrBadRequest
	// ErrFutureTime: the call's time (At) is further ahead of the owner's
	// clock than the owner accepts. It wraps ErrBadRequest.
	ErrFutureTime = proto.ErrFutureTime
	// ErrUnknownReservation: Release named a reservation the owner does
	// not hold (released, confirmed or expired).
	ErrUnknownReservation = proto.ErrUnknownReservation
	// ErrClosed: the client was closed.
	ErrClosed = errors.New("fcap client: closed")
	// ErrQueueFull: Record found Config.RecordQueue impressions already
	// waiting; the impression was not queued.
	ErrQueueFull = errors.New("fcap client: record queue full")
	// ErrProtocol: a node answered with something this client does not
	// understand.
	ErrProtocol = errors.New("fcap client: protocol error")
)

// Internal failures that turn into fail-open or fail-closed verdicts.
var (
	errClientClosed = ErrClosed
	errNoConn       = errors.New("no live connection")
	errTimeout      = errors.New("deadline exceeded")
	errNoOwner      = errors.New("no owner known for the viewer")
	errSilent       = errors.New("connection silent")
	errPeerGone     = errors.New("node left the topology")
)

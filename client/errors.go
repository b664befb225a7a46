package client

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/fcap-io/fcap/proto"
)

// Errors a caller may see.
//
// A Check, Allow or Reserve the cluster cannot answer by its deadline
// (Config.Timeout, or the context's deadline if sooner) returns no error
// but verdicts decided by the failure policy and marked FailOpen or
// FailClosed: the policy is for a cluster that is late or down. Until the
// client has reached the cluster once (a node answered it), the same
// verdicts come with an error wrapping ErrUnavailable that names each
// seed and what answered there (a *DialError each): a cluster never
// reached is a configuration to fix, not a cluster that is slow, and a
// caller that ignores err == nil would not see it. A call
// whose context is cancelled before it is answered returns an error
// wrapping context.Canceled and no verdict: the caller gave up, and
// nothing should be decided in its name. Operations without a failure
// policy (Release, Link, Unlink, Resolve) return an error wrapping
// ErrUnavailable when the cluster cannot answer them, which also wraps
// context.DeadlineExceeded when the call ran out of time and the
// context's error when it ended. Every call after Close returns
// ErrClosed.
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
	// ErrClosed: the client was closed (Close was called). Every call
	// returns it from then on; Check, Allow and Reserve give no verdict.
	ErrClosed = errors.New("fcap client: closed")
	// ErrQueueFull: Record found Config.RecordQueue impressions already
	// waiting; the impression was not queued.
	ErrQueueFull = errors.New("fcap client: record queue full")
	// ErrUnavailable: WaitReady's error when the client is not ready by
	// the context's end; the error beside the policy's verdicts (and
	// from Record) while the client has never reached the cluster; and
	// the cluster not answering an operation that has
	// no failure policy (Release, Link, Unlink, Resolve): its owners
	// were unreachable, overloaded or leaving, or did not answer by the
	// deadline. The operation may or may not have been applied (a Link
	// half made, which its node finishes in the background; a Release
	// done whose answer was lost); all are idempotent, so call again.
	ErrUnavailable = errors.New("fcap client: cluster unavailable")
	// ErrBadConfig: New (or Config.Validate) refused the configuration:
	// a configuration that can never work, such as no seeds, a seed that
	// is not host:port or a negative timeout. The message names the
	// field and the value at fault.
	ErrBadConfig = errors.New("fcap client: invalid config")
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

// closed reports whether Close has stopped the client.
func (c *Client) closed() bool {
	select {
	case <-c.stop:
		return true
	default:
		return false
	}
}

// cancelled returns the error of a call whose context was cancelled (not
// merely past its deadline), or nil.
func cancelled(ctx context.Context, op string) error {
	if err := ctx.Err(); errors.Is(err, context.Canceled) {
		return fmt.Errorf("fcap client: %s: %w", op, err)
	}
	return nil
}

// unavailable is the package's unavailable, with the report of what each
// seed answered while the client has never reached the cluster.
func (c *Client) unavailable(ctx context.Context, err error) error {
	out := unavailable(ctx, err)
	if !errors.Is(out, ErrUnavailable) {
		return out
	}
	nr := c.neverReached()
	if nr == nil {
		return out
	}
	return &causedError{msg: nr.Error() + "; this call: " + strings.TrimPrefix(out.Error(), ErrUnavailable.Error()+": "), causes: []error{nr, out}}
}

// unavailable turns a failure of an operation without a failure policy
// into the error its caller sees: an answer about the request itself
// (bad request, unknown reservation, permission) and ErrClosed as they
// are; anything else, the cluster failing to answer, wrapped in
// ErrUnavailable, with the context's error when it has ended and
// context.DeadlineExceeded when the call ran out of time.
func unavailable(ctx context.Context, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrClosed), errors.Is(err, proto.ErrBadRequest), errors.Is(err, proto.ErrUnknownReservation),
		errors.Is(err, proto.ErrPermissionDenied), errors.Is(err, proto.ErrUnauthenticated),
		errors.Is(err, proto.ErrUnsupported), errors.Is(err, ErrProtocol):
		return err
	}
	if cerr := ctx.Err(); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("%w: %w: %w", ErrUnavailable, cerr, err)
	}
	if errors.Is(err, errTimeout) && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: %w: %w", ErrUnavailable, context.DeadlineExceeded, err)
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}

// causedError is an error with a message of its own that wraps several
// causes (ErrUnavailable, a context's error, each address's DialError),
// so errors.Is and errors.As find each.
type causedError struct {
	msg    string
	causes []error
}

func (e *causedError) Error() string   { return e.msg }
func (e *causedError) Unwrap() []error { return e.causes }

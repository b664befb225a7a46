package fcap

import (
	"errors"
	"fmt"
)

// ErrInvalid is wrapped by every error that rejects a request for what it
// says rather than for the state of the engine. errors.Is(err, ErrInvalid)
// tells a caller (and the wire layer, which maps it to a "bad request" code)
// that retrying the same request cannot succeed. An invalid request never
// changes state.
var ErrInvalid = errors.New("invalid request")

// Validation errors. Each wraps ErrInvalid.
var (
	ErrEmptyViewer        = fmt.Errorf("%w: empty viewer id", ErrInvalid)
	ErrEmptyScope         = fmt.Errorf("%w: empty cap scope", ErrInvalid)
	ErrEmptyID            = fmt.Errorf("%w: empty cap id", ErrInvalid)
	ErrEmptyImpressionID  = fmt.Errorf("%w: empty impression id", ErrInvalid)
	ErrIDTooLong          = fmt.Errorf("%w: id longer than the configured maximum", ErrInvalid)
	ErrUnknownScope       = fmt.Errorf("%w: unknown cap scope", ErrInvalid)
	ErrBadLimit           = fmt.Errorf("%w: cap limit must be between 1 and %d", ErrInvalid, MaxLimit)
	ErrBadWindow          = fmt.Errorf("%w: cap window must be a whole number of milliseconds from 1ms to %v (400 days)", ErrInvalid, MaxWindow)
	ErrBadTime            = fmt.Errorf("%w: time must be between 0 and %d", ErrInvalid, MaxTime)
	ErrBadTTL             = fmt.Errorf("%w: reservation ttl must be between 1 and %d milliseconds", ErrInvalid, MaxTime)
	ErrUnknownAlgorithm   = fmt.Errorf("%w: unknown cap algorithm", ErrInvalid)
	ErrUnknownMode        = fmt.Errorf("%w: unknown cap mode", ErrInvalid)
	ErrNoCaps             = fmt.Errorf("%w: no caps given", ErrInvalid)
	ErrTooManyCaps        = fmt.Errorf("%w: more caps than the configured maximum", ErrInvalid)
	ErrTooManyCandidates  = fmt.Errorf("%w: more candidates than the configured maximum", ErrInvalid)
	ErrZeroReservationID  = fmt.Errorf("%w: reservation id 0 is reserved for \"none\"", ErrInvalid)
	ErrUnknownReservation = errors.New("unknown or expired reservation")
	// ErrVoidMismatch refuses a Void whose impression time or caps are
	// not those the impression id was recorded with.
	ErrVoidMismatch = fmt.Errorf("%w: the impression's time or caps are not those it was recorded with", ErrInvalid)
)

// ErrFutureTime refuses a time further ahead of the engine's Clock than
// Config.MaxFuture: a caller's clock is trusted only within that skew.
// It wraps ErrInvalid; the wire gives it a code of its own
// (proto.ErrFutureTime).
var ErrFutureTime = fmt.Errorf("%w: time too far ahead of the engine's clock", ErrInvalid)

// Capacity errors: the request was well formed but the engine will not grow
// to serve it. The client fails open (or closed, for strict caps) on them.
var (
	// ErrMemoryLimit refuses a request that would create a viewer or a
	// counter while the engine's estimated memory is at or above
	// Config.MemoryLimit. Existing counters keep working.
	ErrMemoryLimit = errors.New("memory limit reached: new counters are refused")

	// ErrTooManyKeys refuses a request that would give one viewer more
	// than Config.MaxKeysPerViewer counters.
	ErrTooManyKeys = errors.New("viewer has the maximum number of counters")

	// ErrTooManyReservations refuses a reservation that would give one
	// viewer more than Config.MaxReservationsPerViewer live reservations.
	ErrTooManyReservations = errors.New("viewer has the maximum number of live reservations")
)

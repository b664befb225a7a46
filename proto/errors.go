package proto

import (
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/fcap-io/fcap"
)

// Code is an error code carried by an Error message. Codes map to the
// sentinel errors below, so errors.Is works on an error that crossed the
// wire. The enum is append-only, like Type: a value is never renumbered
// or reused.
type Code uint16

// The error codes. 0 is no code.
const (
	// CodeBadRequest: the request is malformed or invalid; retrying it
	// cannot help.
	CodeBadRequest Code = 1
	// CodeNotOwner: this node does not own the viewer; Error.Epoch says
	// which ring it used. The client refreshes its topology and asks
	// the new owner.
	CodeNotOwner Code = 2
	// CodeOverloaded: the node sheds load; try another replica or later.
	CodeOverloaded Code = 3
	// CodeShuttingDown: the node is leaving; try another replica.
	CodeShuttingDown Code = 4
	// CodeInternal: the node failed in a way the request did not cause.
	CodeInternal Code = 5
	// CodeCapacity: the memory limit or a per-viewer limit refused new
	// state (fcap.ErrMemoryLimit, ErrTooManyKeys,
	// ErrTooManyReservations).
	CodeCapacity Code = 6
	// CodeUnknownReservation: Release named a reservation the viewer does
	// not hold (released, confirmed or expired).
	CodeUnknownReservation Code = 7
	// CodeUnsupported: the node does not know the message type or the
	// protocol version of the request.
	CodeUnsupported Code = 8
	// CodeUnauthenticated: the node requires a token and the connection
	// has not presented a valid one (Hello). Nothing was done.
	CodeUnauthenticated Code = 9
	// CodePermissionDenied: the connection's role may not send this
	// request. Nothing was done.
	CodePermissionDenied Code = 10
	// CodeDeadlineExceeded: the request's budget (Allow.Budget and the
	// like) ran out before the node could answer in time: it did not
	// start the request, or it undid the strict grant it could not
	// answer in time. Nothing the request asked for counts.
	CodeDeadlineExceeded Code = 11
	// CodeFutureTime: the request's time (Check, Allow or Reserve's now,
	// an impression's time) is further ahead of the node's clock than
	// the node accepts (fcap.ErrFutureTime, fcapd --max-clock-skew).
	// Nothing was done. A kind of bad request: its sentinel wraps
	// ErrBadRequest.
	CodeFutureTime Code = 12
	// CodeNoQuorum: a strict cap's write refused because this node may
	// not grant strict writes now: it does not hold a majority of the
	// cluster's member set (a network partition, failed members not yet
	// forgotten), or the viewer's partition was claimed without any of
	// its holders' copies. Nothing was done. Strict caps fail closed; soft
	// caps are never refused for it. A kind of overload: its sentinel
	// wraps ErrOverloaded, so a caller retries it within its deadline.
	CodeNoQuorum Code = 13
)

// The sentinel errors, one per code. An *Error of a code matches its
// sentinel with errors.Is. Where the vocabulary (package fcap) has an
// error for the same thing, the sentinel wraps it, so one check of the
// fcap sentinel holds whether the error came from an engine in process
// or from a node over the wire: ErrBadRequest is an fcap.ErrInvalid,
// ErrUnknownReservation an fcap.ErrUnknownReservation and ErrFutureTime
// an fcap.ErrFutureTime.
var (
	ErrBadRequest         = &kindOf{"fcap: bad request", []error{fcap.ErrInvalid}}
	ErrNotOwner           = errors.New("fcap: not owner")
	ErrOverloaded         = errors.New("fcap: overloaded")
	ErrShuttingDown       = errors.New("fcap: shutting down")
	ErrInternal           = errors.New("fcap: internal error")
	ErrCapacity           = errors.New("fcap: capacity exceeded")
	ErrUnknownReservation = &kindOf{"fcap: unknown reservation", []error{fcap.ErrUnknownReservation}}
	ErrUnsupported        = errors.New("fcap: unsupported")
	ErrUnauthenticated    = errors.New("fcap: unauthenticated")
	ErrPermissionDenied   = errors.New("fcap: permission denied")
	ErrDeadlineExceeded   = errors.New("fcap: deadline exceeded")
	// ErrFutureTime wraps ErrBadRequest: a caller that treats every bad
	// request alike (the client returns them rather than failing open)
	// needs no case of its own for it.
	ErrFutureTime = &kindOf{"fcap: bad request: time ahead of the node's clock", []error{ErrBadRequest, fcap.ErrFutureTime}}
	// ErrNoQuorum wraps ErrOverloaded: the strict write may succeed on a
	// later try, once a majority is back (or on another node).
	ErrNoQuorum = fmt.Errorf("%w: strict caps need a majority of the cluster", ErrOverloaded)
)

// kindOf is a sentinel that is also a kind of the errors it wraps: its
// own text, and errors.Is matches each of of as well.
type kindOf struct {
	msg string
	of  []error
}

func (e *kindOf) Error() string   { return e.msg }
func (e *kindOf) Unwrap() []error { return e.of }

// Framing errors, from Reader.Next.
var (
	// ErrFrameTooLarge: a frame's length is over the reader's maximum.
	// The stream cannot be resynchronised; close the connection.
	ErrFrameTooLarge = errors.New("fcap: frame too large")
	// ErrFrameTooShort: a frame's length cannot hold its header. The
	// stream cannot be resynchronised; close the connection.
	ErrFrameTooShort = errors.New("fcap: frame too short")
	// ErrUnsupportedVersion: a frame of another protocol version. Its
	// body was skipped and the stream is still in sync.
	ErrUnsupportedVersion = errors.New("fcap: unsupported protocol version")
)

// codeInfo names each code and gives its sentinel.
var codeInfo = [...]struct {
	name     string // snake case, for String
	sentinel error
}{
	CodeBadRequest:         {"bad_request", ErrBadRequest},
	CodeNotOwner:           {"not_owner", ErrNotOwner},
	CodeOverloaded:         {"overloaded", ErrOverloaded},
	CodeShuttingDown:       {"shutting_down", ErrShuttingDown},
	CodeInternal:           {"internal", ErrInternal},
	CodeCapacity:           {"capacity", ErrCapacity},
	CodeUnknownReservation: {"unknown_reservation", ErrUnknownReservation},
	CodeUnsupported:        {"unsupported", ErrUnsupported},
	CodeUnauthenticated:    {"unauthenticated", ErrUnauthenticated},
	CodePermissionDenied:   {"permission_denied", ErrPermissionDenied},
	CodeDeadlineExceeded:   {"deadline_exceeded", ErrDeadlineExceeded},
	CodeFutureTime:         {"future_time", ErrFutureTime},
	CodeNoQuorum:           {"no_quorum", ErrNoQuorum},
}

// String returns the code's name in snake case ("not_owner"), fit for a
// metric label, or "code(N)" for an unknown code.
func (c Code) String() string {
	if int(c) < len(codeInfo) && codeInfo[c].name != "" {
		return codeInfo[c].name
	}
	return "code(" + strconv.Itoa(int(c)) + ")"
}

// Sentinel returns the sentinel error of the code, or nil for 0 and
// codes this version does not know.
func (c Code) Sentinel() error {
	if int(c) < len(codeInfo) {
		return codeInfo[c].sentinel
	}
	return nil
}

// maxErrorMessage bounds the Message NewError takes from an error.
const maxErrorMessage = 1 << 10

// Error is the message a node answers a failed request with. *Error also
// implements error: the client returns it as is, and errors.Is(err,
// ErrNotOwner) (and so on for each code) tells what happened.
type Error struct {
	// Code says what failed.
	Code Code
	// Message is the node's description, for people: do not parse it.
	Message string
	// Epoch is the epoch of the ring the node used. For CodeNotOwner it
	// tells the client whether its topology is older than the node's.
	Epoch uint64
}

// Type returns TypeError.
func (*Error) Type() Type { return TypeError }

// Error formats the error as "fcap: not owner (epoch 00000000000004d2):
// message"; the epoch appears when it is not 0, in the 16 hex digits
// fcapctl prints epochs in, the message when it is not empty.
func (e *Error) Error() string {
	s := "fcap: "
	if sentinel := e.Code.Sentinel(); sentinel != nil {
		s = sentinel.Error()
	} else {
		s += "error " + e.Code.String()
	}
	if e.Epoch != 0 {
		s += fmt.Sprintf(" (epoch %016x)", e.Epoch)
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	return s
}

// Is reports whether target is the sentinel of e's code, or one it
// wraps, so that errors.Is(err, ErrNotOwner) works on an error from the
// wire, and errors.Is(err, ErrOverloaded) on a CodeNoQuorum.
func (e *Error) Is(target error) bool {
	s := e.Code.Sentinel()
	return s != nil && errors.Is(s, target)
}

// Unwrap returns the sentinel of e's code (nil for an unknown code).
func (e *Error) Unwrap() error { return e.Code.Sentinel() }

// CodeOf returns the code a server answers err with:
//   - an *Error in err's chain: its code;
//   - fcap.ErrFutureTime (which ErrFutureTime wraps): CodeFutureTime;
//   - anything wrapping fcap.ErrInvalid (ErrBadRequest does), or a
//     framing error (ErrFrameTooLarge, ErrFrameTooShort): CodeBadRequest;
//   - fcap.ErrMemoryLimit, fcap.ErrTooManyKeys,
//     fcap.ErrTooManyReservations or ErrCapacity: CodeCapacity;
//   - fcap.ErrUnknownReservation (which ErrUnknownReservation wraps):
//     CodeUnknownReservation;
//   - ErrUnsupportedVersion: CodeUnsupported;
//   - another sentinel of this package: its code;
//   - anything else: CodeInternal.
//
// CodeOf(nil) is 0.
func CodeOf(err error) Code {
	var pe *Error
	switch {
	case err == nil:
		return 0
	case errors.As(err, &pe):
		return pe.Code
	case errors.Is(err, fcap.ErrFutureTime):
		return CodeFutureTime
	case errors.Is(err, fcap.ErrInvalid), errors.Is(err, ErrFrameTooLarge), errors.Is(err, ErrFrameTooShort):
		return CodeBadRequest
	case errors.Is(err, fcap.ErrMemoryLimit), errors.Is(err, fcap.ErrTooManyKeys), errors.Is(err, fcap.ErrTooManyReservations):
		return CodeCapacity
	case errors.Is(err, fcap.ErrUnknownReservation):
		return CodeUnknownReservation
	case errors.Is(err, ErrUnsupportedVersion):
		return CodeUnsupported
	}
	for c := range codeInfo {
		if s := codeInfo[c].sentinel; s != nil && errors.Is(err, s) {
			return Code(c)
		}
	}
	return CodeInternal
}

// NewError returns the Error message a server answers err with: the
// code CodeOf gives, Message err.Error() truncated to 1 KiB (at a UTF-8
// boundary), and the epoch of the node's ring. An err that is itself an
// *Error (a peer's answer passed on) keeps its Message rather than
// nesting "fcap: ..." in it, and a bare sentinel gets no Message, as its
// text is what Error() prints for the code.
func NewError(err error, epoch uint64) *Error {
	e := &Error{Code: CodeOf(err), Epoch: epoch}
	var pe *Error
	switch {
	case err == nil:
	case errors.As(err, &pe) && error(pe) == err:
		e.Message = pe.Message
	case err == e.Code.Sentinel():
	default:
		e.Message = err.Error()
	}
	e.Message = truncate(e.Message, maxErrorMessage)
	return e
}

// truncate cuts s to at most n bytes, at the start of a rune.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func (e *Error) encode(enc *encoder) {
	enc.array(3)
	enc.uint(uint64(e.Code))
	enc.str(e.Message)
	enc.uint(e.Epoch)
}

func (e *Error) decode(d *decoder) {
	extra := d.array(3)
	e.Code = Code(d.uintN(0xFFFF))
	e.Message = d.str()
	e.Epoch = d.uint()
	d.end(extra)
}

package proto

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"time"
)

// Version is the protocol version every frame carries. A reader refuses
// a frame of another version with ErrUnsupportedVersion.
const Version = 1

// HeaderSize is the size of what precedes a frame's body: the 4-byte
// length and the 12-byte header.
const HeaderSize = 16

// DefaultMaxFrame is the default bound on a frame's length field (header
// and body; see NewReader).
const DefaultMaxFrame = 1 << 20

// headerLen is the part of the header the length field counts.
const headerLen = HeaderSize - 4

// Limits Decode applies to what a message may hold. A message over one
// is refused with an error wrapping ErrBadRequest, and AppendFrame
// refuses to encode it. They bound what a peer can make a node allocate;
// the engine's own limits (engine.Config) are usually tighter.
const (
	// MaxCheckCaps bounds the distinct caps of a Check. Refs index them
	// with a uint16, so this is also the most they can address.
	MaxCheckCaps = 65536
	// MaxCandidates bounds the candidates of a Check and the verdicts of
	// a CheckResult.
	MaxCandidates = 65536
	// MaxRecordItems bounds the items of a Record and the results of a
	// RecordResult.
	MaxRecordItems = 4096
	// MaxCapsPerMessage bounds the caps of an Allow, a Reserve and each
	// impression of a Record.
	MaxCapsPerMessage = 256
	// MaxMembers bounds the members of a Topology.
	MaxMembers = 4096
	// MaxStringLen bounds every string, in bytes.
	MaxStringLen = 65536
	// MaxBudget bounds a request's budget (Allow.Budget and the like):
	// a minute, far beyond any call's deadline. A longer one is refused
	// as a bad request, as a field that cannot be meant.
	MaxBudget = time.Minute
)

// noLimit is the count limit of lists bounded only by the body's size.
const noLimit = math.MaxInt32

// Header is a frame's header.
type Header struct {
	// Version is the protocol version of the frame (Version).
	Version uint8
	// Type is the type of the message in the body.
	Type Type
	// ID is chosen by the sender of a request and echoed in its
	// response, so requests can be pipelined and answered out of order
	// on one connection.
	ID uint64
}

// Message is a message that travels in a frame's body. The messages are
// the pointer types of this package (*Check, *CheckResult, ...).
type Message interface {
	// Type returns the message's type.
	Type() Type

	// encode appends the message's body to e.
	encode(e *encoder)
	// decode reads the message's body from d, reusing the message's
	// slices.
	decode(d *decoder)
}

// AppendFrame appends one complete frame carrying m, with request id
// id, to dst and returns the extended slice. The body is encoded in
// place after the header and the length is patched in after it, so the
// frame is built without a copy; steady-state encoding into a dst with
// room does not allocate.
//
// A message that breaks a limit Decode applies (MaxStringLen,
// MaxCheckCaps, ...) is refused with an error wrapping ErrBadRequest,
// and dst is returned unchanged: what AppendFrame accepts, Decode
// accepts. AppendFrame does not know the peer's maximum frame; a caller
// that may build large frames compares the length it added with it.
func AppendFrame(dst []byte, id uint64, m Message) ([]byte, error) {
	start := len(dst)
	var hdr [HeaderSize]byte
	hdr[4] = Version
	hdr[5] = byte(m.Type())
	binary.BigEndian.PutUint64(hdr[8:], id)
	e := encoders.Get().(*encoder)
	e.buf = append(dst, hdr[:]...)
	m.encode(e)
	out, err := e.buf, e.err
	e.buf, e.err = nil, nil
	encoders.Put(e)
	if err == nil && uint64(len(out)-start-4) > math.MaxUint32 {
		err = errors.New("frame longer than 4 GiB")
	}
	if err != nil {
		return out[:start], fmt.Errorf("%w: encoding %s: %w", ErrBadRequest, m.Type(), err)
	}
	binary.BigEndian.PutUint32(out[start:], uint32(len(out)-start-4))
	return out, nil
}

// Decode decodes a frame body into m. The caller picks m by the
// header's Type (NewMessage, or a long-lived message of that type);
// Decode cannot tell a body of another type that happens to parse.
//
// ZERO-COPY: every string in the decoded message (viewer ids, cap
// scopes and ids, impression ids, member names, error messages) ALIASES
// body. It is valid only while body is: for a body from Reader.Next,
// until the next call to Next. A caller that keeps a string past that,
// in a map, a queue, another goroutine or a log line written later, must
// copy it first (strings.Clone).
//
// Slices in m (caps, refs, members, items, verdicts, ...) are reused:
// truncated and appended to, growing only when a message is larger than
// any decoded into m before. A long-lived message per connection or
// worker therefore decodes without allocating in steady state.
//
// Every length is checked against the limits (MaxCheckCaps, ...) and
// against the rest of the body before anything is allocated for it, so
// what Decode allocates is bounded by the size of body. An array may
// hold more fields than this version knows: a later version may append
// fields, and Decode skips them. Fewer fields, a wrong msgpack type,
// bytes after the message or a limit broken is an error wrapping
// ErrBadRequest; m is then left partly decoded and must not be used.
func Decode(body []byte, m Message) error {
	if m == nil {
		return fmt.Errorf("%w: Decode into a nil message", ErrBadRequest)
	}
	d := decoders.Get().(*decoder)
	d.body, d.off, d.err, d.scope = body, 0, nil, ""
	m.decode(d)
	if d.err == nil && d.off != len(d.body) {
		d.err = fmt.Errorf("%d bytes after the message", len(d.body)-d.off)
	}
	err := d.err
	d.body, d.err, d.scope = nil, nil, ""
	decoders.Put(d)
	if err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("%w: decoding %s: %w", ErrBadRequest, m.Type(), err)
	}
	return nil
}

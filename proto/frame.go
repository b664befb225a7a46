package proto

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
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

// Type is the message type. The enum is append-only: a value is never
// renumbered or reused, even when its message is retired, so peers of
// different versions never mistake one message for another. A reader
// does not refuse an unknown type; a server answers it with an Error of
// CodeUnsupported.
type Type uint8

// The message types. Requests and their responses come in pairs: a
// response carries the request's id. Any request may be answered with
// an Error instead.
const (
	TypeError            Type = 1  // Error: the request failed
	TypePing             Type = 2  // Ping: liveness probe
	TypePong             Type = 3  // Pong: answers Ping
	TypeTopologyRequest  Type = 4  // TopologyRequest: asks for the ring
	TypeTopology         Type = 5  // Topology: the ring
	TypeCheck            Type = 6  // Check: read-only verdicts
	TypeCheckResult      Type = 7  // CheckResult: answers Check
	TypeAllow            Type = 8  // Allow: atomic check-and-record
	TypeAllowResult      Type = 9  // AllowResult: answers Allow
	TypeRecord           Type = 10 // Record: impressions that played
	TypeRecordResult     Type = 11 // RecordResult: answers Record
	TypeReserve          Type = 12 // Reserve: take a reservation
	TypeReserveResult    Type = 13 // ReserveResult: answers Reserve
	TypeRelease          Type = 14 // Release: drop a reservation
	TypeReleaseResult    Type = 15 // ReleaseResult: answers Release
	TypeReplicate        Type = 16 // Replicate: viewer states, node to node
	TypeReplicateResult  Type = 17 // ReplicateResult: answers Replicate
	TypeStatusRequest    Type = 18 // StatusRequest: asks a node how it is
	TypeStatus           Type = 19 // Status: answers StatusRequest
	TypeDrain            Type = 20 // Drain: hand partitions over and leave
	TypeDrainResult      Type = 21 // DrainResult: answers Drain
	TypeSyncRequest      Type = 22 // SyncRequest: a new owner asks for partitions
	TypeSyncResult       Type = 23 // SyncResult: answers SyncRequest
	TypeGossipKey        Type = 24 // GossipKey: change or list a node's gossip keyring
	TypeGossipKeyResult  Type = 25 // GossipKeyResult: answers GossipKey
	TypeHello            Type = 26 // Hello: authenticates a connection with a token
	TypeHelloResult      Type = 27 // HelloResult: answers Hello
	TypeInspect          Type = 40 // Inspect: one viewer's state, for operators
	TypeViewerState      Type = 41 // ViewerState: answers Inspect
	TypeVerify           Type = 42 // Verify: digests of a node's counters, for reconciliation
	TypeVerifyResult     Type = 43 // VerifyResult: answers Verify
	TypeLink             Type = 44 // Link: link a device to a viewer
	TypeLinkResult       Type = 45 // LinkResult: answers Link
	TypeUnlink           Type = 46 // Unlink: make a device its own viewer again
	TypeUnlinkResult     Type = 47 // UnlinkResult: answers Unlink
	TypeResolve          Type = 48 // Resolve: the viewers devices count as
	TypeResolveResult    Type = 49 // ResolveResult: answers Resolve
	TypeLinkDevice       Type = 50 // LinkDevice: one side of a link or unlink, node to node
	TypeLinkDeviceResult Type = 51 // LinkDeviceResult: answers LinkDevice
	TypeUndo             Type = 52 // Undo: give back a strict grant the caller gave up on
	TypeUndoResult       Type = 53 // UndoResult: answers Undo
	TypeErase            Type = 54 // Erase: forget a viewer (privacy requests)
	TypeEraseResult      Type = 55 // EraseResult: answers Erase
	TypeVoid             Type = 56 // Void: take a recorded impression back (invalid traffic)
	TypeVoidResult       Type = 57 // VoidResult: answers Void
	TypePull             Type = 58 // Pull: a peer's copies of some viewers, node to node (anti-entropy)
	TypePullResult       Type = 59 // PullResult: answers Pull
)

var typeNames = [...]string{
	TypeError:            "error",
	TypePing:             "ping",
	TypePong:             "pong",
	TypeTopologyRequest:  "topology_request",
	TypeTopology:         "topology",
	TypeCheck:            "check",
	TypeCheckResult:      "check_result",
	TypeAllow:            "allow",
	TypeAllowResult:      "allow_result",
	TypeRecord:           "record",
	TypeRecordResult:     "record_result",
	TypeReserve:          "reserve",
	TypeReserveResult:    "reserve_result",
	TypeRelease:          "release",
	TypeReleaseResult:    "release_result",
	TypeReplicate:        "replicate",
	TypeReplicateResult:  "replicate_result",
	TypeStatusRequest:    "status_request",
	TypeStatus:           "status",
	TypeDrain:            "drain",
	TypeDrainResult:      "drain_result",
	TypeSyncRequest:      "sync_request",
	TypeSyncResult:       "sync_result",
	TypeGossipKey:        "gossip_key",
	TypeGossipKeyResult:  "gossip_key_result",
	TypeHello:            "hello",
	TypeHelloResult:      "hello_result",
	TypeInspect:          "inspect",
	TypeViewerState:      "viewer_state",
	TypeVerify:           "verify",
	TypeVerifyResult:     "verify_result",
	TypeLink:             "link",
	TypeLinkResult:       "link_result",
	TypeUnlink:           "unlink",
	TypeUnlinkResult:     "unlink_result",
	TypeResolve:          "resolve",
	TypeResolveResult:    "resolve_result",
	TypeLinkDevice:       "link_device",
	TypeLinkDeviceResult: "link_device_result",
	TypeUndo:             "undo",
	TypeUndoResult:       "undo_result",
	TypeErase:            "erase",
	TypeEraseResult:      "erase_result",
	TypeVoid:             "void",
	TypeVoidResult:       "void_result",
	TypePull:             "pull",
	TypePullResult:       "pull_result",
}

// String returns the type's name in snake case ("check_result"), fit for
// a metric label, or "type(N)" for an unknown type.
func (t Type) String() string {
	if int(t) < len(typeNames) && typeNames[t] != "" {
		return typeNames[t]
	}
	return "type(" + strconv.Itoa(int(t)) + ")"
}

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

// NewMessage returns a new, empty message of type t, or nil if t is not
// a known type.
func NewMessage(t Type) Message {
	switch t {
	case TypeError:
		return new(Error)
	case TypePing:
		return new(Ping)
	case TypePong:
		return new(Pong)
	case TypeTopologyRequest:
		return new(TopologyRequest)
	case TypeTopology:
		return new(Topology)
	case TypeCheck:
		return new(Check)
	case TypeCheckResult:
		return new(CheckResult)
	case TypeAllow:
		return new(Allow)
	case TypeAllowResult:
		return new(AllowResult)
	case TypeRecord:
		return new(Record)
	case TypeRecordResult:
		return new(RecordResult)
	case TypeReserve:
		return new(Reserve)
	case TypeReserveResult:
		return new(ReserveResult)
	case TypeRelease:
		return new(Release)
	case TypeReleaseResult:
		return new(ReleaseResult)
	case TypeReplicate:
		return new(Replicate)
	case TypeReplicateResult:
		return new(ReplicateResult)
	case TypeStatusRequest:
		return new(StatusRequest)
	case TypeStatus:
		return new(Status)
	case TypeDrain:
		return new(Drain)
	case TypeDrainResult:
		return new(DrainResult)
	case TypeSyncRequest:
		return new(SyncRequest)
	case TypeSyncResult:
		return new(SyncResult)
	case TypeGossipKey:
		return new(GossipKey)
	case TypeGossipKeyResult:
		return new(GossipKeyResult)
	case TypeHello:
		return new(Hello)
	case TypeHelloResult:
		return new(HelloResult)
	case TypeInspect:
		return new(Inspect)
	case TypeViewerState:
		return new(ViewerState)
	case TypeVerify:
		return new(Verify)
	case TypeVerifyResult:
		return new(VerifyResult)
	case TypeLink:
		return new(Link)
	case TypeLinkResult:
		return new(LinkResult)
	case TypeUnlink:
		return new(Unlink)
	case TypeUnlinkResult:
		return new(UnlinkResult)
	case TypeResolve:
		return new(Resolve)
	case TypeResolveResult:
		return new(ResolveResult)
	case TypeLinkDevice:
		return new(LinkDevice)
	case TypeLinkDeviceResult:
		return new(LinkDeviceResult)
	case TypeUndo:
		return new(Undo)
	case TypeUndoResult:
		return new(UndoResult)
	case TypeErase:
		return new(Erase)
	case TypeEraseResult:
		return new(EraseResult)
	case TypeVoid:
		return new(Void)
	case TypeVoidResult:
		return new(VoidResult)
	case TypePull:
		return new(Pull)
	case TypePullResult:
		return new(PullResult)
	}
	return nil
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

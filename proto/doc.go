// Package proto is fcap's wire protocol: length-prefixed msgpack frames
// with a request id, pipelined and multiplexed on a few long-lived TCP
// connections per node.
//
// # Frames
//
// A frame is
//
//	length   uint32, big-endian: the bytes after this field (12 + body)
//	version  uint8: Version
//	type     uint8: Type (append-only enum)
//	reserved 2 bytes, 0
//	id       uint64, big-endian: the request id, echoed by the response
//	body     length-12 bytes of msgpack
//
// A Reader refuses a length over its maximum (DefaultMaxFrame unless
// said) before it allocates anything for the frame. AppendFrame builds a
// frame; Decode reads a body into a message.
//
// # Bodies
//
// Each message is one msgpack array of its fields, in the order each
// type's documentation gives ("Wire: ..."), with no field names.
// Integers use the smallest msgpack encoding; engine enums (Algorithm,
// Mode, RecordStatus) travel as small unsigned integers. A time the
// request leaves to the node's clock is nil. The bulk lists of a Check
// (refs, ends), its CheckResult (verdicts) and a Topology (owners) are
// msgpack bins of little-endian integers.
//
// Compatibility: a reader accepts and skips fields appended to any array
// after those it knows, so a later version may add a field at the end of
// a message (or of a cap, member, item, ...) without a new Version. A
// field added that way is optional to the readers that know it (a body
// from an older sender decodes with it empty), as CheckResult's left is.
// Removing, reordering or retyping a field, or renumbering a Type or a
// Code, needs a new Version.
//
// # Deadlines
//
// The requests a client waits for with a deadline (Check, Allow,
// Reserve) carry a budget: how long, from when it sent the request, the
// client will wait for the answer, in whole microseconds (0: no
// deadline). It is relative, not an instant, so it does not depend on
// the client's and the node's clocks agreeing: a node counts it from
// when the request reached it, which is later than the client sent it
// by the one-way delay, so the node's deadline is a little generous. A
// node does not start a request whose budget ran out before its turn
// came (it answers CodeDeadlineExceeded and does nothing), and undoes a
// strict grant whose answer it could give only after the budget ran out
// (see the node's ARCHITECTURE.md, "Deadlines").
//
// # Zero copy
//
// Decode does not copy strings: every string of a decoded message
// aliases the body it was decoded from, and is valid only while that
// body is (for a body from Reader.Next, until the next call to Next). A
// message value reused across Decode calls reuses its slices, so
// steady-state decoding does not allocate.
//
// # Errors
//
// A failed request is answered with an Error message: a numeric Code
// that maps to a sentinel error (ErrNotOwner, ...), so errors.Is works
// on the client. CodeOf and NewError build it from a server-side error.
package proto

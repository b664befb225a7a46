package proto

import (
	"strconv"
	"strings"
)

// One row per message type: everything fcap knows of a type beyond its
// wire form lives in its row of table, and the node's dispatch, its
// token roles, its requests run apart and the client's delivery all read
// it. A new message is a Type constant below, its row, and its struct in
// a file of its own (encode, decode); TestTypeTable fails when a constant
// lacks a row or a row lacks what its message needs.

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
	TypeError             Type = 1  // Error: the request failed
	TypePing              Type = 2  // Ping: liveness probe
	TypePong              Type = 3  // Pong: answers Ping
	TypeTopologyRequest   Type = 4  // TopologyRequest: asks for the ring
	TypeTopology          Type = 5  // Topology: the ring
	TypeCheck             Type = 6  // Check: read-only verdicts
	TypeCheckResult       Type = 7  // CheckResult: answers Check
	TypeAllow             Type = 8  // Allow: atomic check-and-record
	TypeAllowResult       Type = 9  // AllowResult: answers Allow
	TypeRecord            Type = 10 // Record: impressions that played
	TypeRecordResult      Type = 11 // RecordResult: answers Record
	TypeReserve           Type = 12 // Reserve: take a reservation
	TypeReserveResult     Type = 13 // ReserveResult: answers Reserve
	TypeRelease           Type = 14 // Release: drop a reservation
	TypeReleaseResult     Type = 15 // ReleaseResult: answers Release
	TypeReplicate         Type = 16 // Replicate: viewer states, node to node
	TypeReplicateResult   Type = 17 // ReplicateResult: answers Replicate
	TypeStatusRequest     Type = 18 // StatusRequest: asks a node how it is
	TypeStatus            Type = 19 // Status: answers StatusRequest
	TypeDrain             Type = 20 // Drain: hand partitions over and leave
	TypeDrainResult       Type = 21 // DrainResult: answers Drain
	TypeSyncRequest       Type = 22 // SyncRequest: a new owner asks for partitions
	TypeSyncResult        Type = 23 // SyncResult: answers SyncRequest
	TypeGossipKey         Type = 24 // GossipKey: change or list a node's gossip keyring
	TypeGossipKeyResult   Type = 25 // GossipKeyResult: answers GossipKey
	TypeHello             Type = 26 // Hello: authenticates a connection with a token
	TypeHelloResult       Type = 27 // HelloResult: answers Hello
	TypeInspect           Type = 40 // Inspect: one viewer's state, for operators
	TypeViewerState       Type = 41 // ViewerState: answers Inspect
	TypeVerify            Type = 42 // Verify: digests of a node's counters, for reconciliation
	TypeVerifyResult      Type = 43 // VerifyResult: answers Verify
	TypeLink              Type = 44 // Link: link a device to a viewer
	TypeLinkResult        Type = 45 // LinkResult: answers Link
	TypeUnlink            Type = 46 // Unlink: make a device its own viewer again
	TypeUnlinkResult      Type = 47 // UnlinkResult: answers Unlink
	TypeResolve           Type = 48 // Resolve: the viewers devices count as
	TypeResolveResult     Type = 49 // ResolveResult: answers Resolve
	TypeLinkDevice        Type = 50 // LinkDevice: one side of a link or unlink, node to node
	TypeLinkDeviceResult  Type = 51 // LinkDeviceResult: answers LinkDevice
	TypeUndo              Type = 52 // Undo: give back a strict grant the caller gave up on
	TypeUndoResult        Type = 53 // UndoResult: answers Undo
	TypeErase             Type = 54 // Erase: forget a viewer (privacy requests)
	TypeEraseResult       Type = 55 // EraseResult: answers Erase
	TypeVoid              Type = 56 // Void: take a recorded impression back (invalid traffic)
	TypeVoidResult        Type = 57 // VoidResult: answers Void
	TypeForget            Type = 58 // Forget: drop a failed member from the member set
	TypeForgetResult      Type = 59 // ForgetResult: answers Forget
	TypePull              Type = 60 // Pull: a peer's copies of some viewers, node to node (anti-entropy)
	TypePullResult        Type = 61 // PullResult: answers Pull
	TypeRegionMerge       Type = 62 // RegionMerge: viewer states from another region's node (region link)
	TypeRegionMergeResult Type = 63 // RegionMergeResult: answers RegionMerge
	TypeShareAsk          Type = 64 // ShareAsk: one unit of a strict cap's share, from another region's node (escrow)
	TypeShareGive         Type = 65 // ShareGive: answers ShareAsk

	TypeRetireRegion       Type = 66 // RetireRegion: retire a peer region lost for good (operators)
	TypeRetireRegionResult Type = 67 // RetireRegionResult: answers RetireRegion
)

// The message types of the region links' digest catch-up (appended
// after the block above, whose alignment they would change).
const (
	TypeRegionDigest       Type = 68 // RegionDigest: digests of one region's lane, from another region's node (digest catch-up)
	TypeRegionDigestResult Type = 69 // RegionDigestResult: answers RegionDigest
)

// Sender is a set of the connections that may send a request, by their
// token's role. An operator may send every request, so the set names
// only the other roles; a node without tokens takes every request from
// anyone.
type Sender uint8

// The senders.
const (
	// SenderAdServer is an ad server (client.Client).
	SenderAdServer Sender = 1 << iota
	// SenderPeer is another node: replication, partitions, identity
	// forwarding.
	SenderPeer
)

// row is one message type.
type row struct {
	// name is the type's name in snake case: String, metric labels.
	name string
	// new returns a new, empty message of the type.
	new func() Message
	// answer is a request's response type; 0 for a response. (Any
	// request may be answered with an Error instead.)
	answer Type
	// senders are who may send the request besides operators. Hello has
	// none: it is answered before any permission is checked.
	senders Sender
	// apart: a node runs the request whole apart from its connection's
	// reader, because it calls other nodes, waits for replication, or is
	// an admin request that may run long.
	apart bool
	// epoch reads the ring epoch the message carries; nil when it
	// carries none.
	epoch func(Message) uint64
	// own detaches a decoded message that a caller keeps from what it
	// may alias (the body, slices reused by the next decode); nil when
	// no caller keeps one or there is nothing to detach.
	own func(Message)
}

// table holds the rows by type; a type without a row has an empty one.
var table = [256]row{
	TypeError: {name: "error", new: func() Message { return new(Error) },
		epoch: func(m Message) uint64 { return m.(*Error).Epoch },
		own:   func(m Message) { e := m.(*Error); e.Message = strings.Clone(e.Message) }},
	TypePing: {name: "ping", new: func() Message { return new(Ping) },
		answer: TypePong, senders: SenderAdServer | SenderPeer},
	TypePong: {name: "pong", new: func() Message { return new(Pong) },
		epoch: func(m Message) uint64 { return m.(*Pong).Epoch },
		own:   func(m Message) { p := m.(*Pong); p.Name = strings.Clone(p.Name) }},
	TypeTopologyRequest: {name: "topology_request", new: func() Message { return new(TopologyRequest) },
		answer: TypeTopology, senders: SenderAdServer | SenderPeer},
	TypeTopology: {name: "topology", new: func() Message { return new(Topology) },
		epoch: func(m Message) uint64 { return m.(*Topology).Epoch },
		own:   func(m Message) { ownTopology(m.(*Topology)) }},
	TypeCheck: {name: "check", new: func() Message { return new(Check) },
		answer: TypeCheckResult, senders: SenderAdServer},
	TypeCheckResult: {name: "check_result", new: func() Message { return new(CheckResult) },
		epoch: func(m Message) uint64 { return m.(*CheckResult).Epoch }},
	TypeAllow: {name: "allow", new: func() Message { return new(Allow) },
		answer: TypeAllowResult, senders: SenderAdServer},
	TypeAllowResult: {name: "allow_result", new: func() Message { return new(AllowResult) },
		epoch: func(m Message) uint64 { return m.(*AllowResult).Epoch }},
	TypeRecord: {name: "record", new: func() Message { return new(Record) },
		answer: TypeRecordResult, senders: SenderAdServer},
	TypeRecordResult: {name: "record_result", new: func() Message { return new(RecordResult) },
		epoch: func(m Message) uint64 { return m.(*RecordResult).Epoch }},
	TypeReserve: {name: "reserve", new: func() Message { return new(Reserve) },
		answer: TypeReserveResult, senders: SenderAdServer},
	TypeReserveResult: {name: "reserve_result", new: func() Message { return new(ReserveResult) },
		epoch: func(m Message) uint64 { return m.(*ReserveResult).Epoch }},
	TypeRelease: {name: "release", new: func() Message { return new(Release) },
		answer: TypeReleaseResult, senders: SenderAdServer},
	TypeReleaseResult: {name: "release_result", new: func() Message { return new(ReleaseResult) },
		epoch: func(m Message) uint64 { return m.(*ReleaseResult).Epoch }},
	TypeReplicate: {name: "replicate", new: func() Message { return new(Replicate) },
		answer: TypeReplicateResult, senders: SenderPeer,
		epoch: func(m Message) uint64 { return m.(*Replicate).Epoch }},
	TypeReplicateResult: {name: "replicate_result", new: func() Message { return new(ReplicateResult) },
		epoch: func(m Message) uint64 { return m.(*ReplicateResult).Epoch }},
	TypeStatusRequest: {name: "status_request", new: func() Message { return new(StatusRequest) },
		answer: TypeStatus},
	TypeStatus: {name: "status", new: func() Message { return new(Status) },
		epoch: func(m Message) uint64 { return m.(*Status).Epoch }},
	TypeDrain: {name: "drain", new: func() Message { return new(Drain) },
		answer: TypeDrainResult, apart: true},
	TypeDrainResult: {name: "drain_result", new: func() Message { return new(DrainResult) }},
	TypeSyncRequest: {name: "sync_request", new: func() Message { return new(SyncRequest) },
		answer: TypeSyncResult, senders: SenderPeer},
	TypeSyncResult: {name: "sync_result", new: func() Message { return new(SyncResult) }},
	TypeGossipKey: {name: "gossip_key", new: func() Message { return new(GossipKey) },
		answer: TypeGossipKeyResult, apart: true},
	TypeGossipKeyResult: {name: "gossip_key_result", new: func() Message { return new(GossipKeyResult) }},
	TypeHello: {name: "hello", new: func() Message { return new(Hello) },
		answer: TypeHelloResult},
	TypeHelloResult: {name: "hello_result", new: func() Message { return new(HelloResult) }},
	TypeInspect: {name: "inspect", new: func() Message { return new(Inspect) },
		answer: TypeViewerState},
	TypeViewerState: {name: "viewer_state", new: func() Message { return new(ViewerState) }},
	TypeVerify: {name: "verify", new: func() Message { return new(Verify) },
		answer: TypeVerifyResult, senders: SenderPeer, apart: true}, // peers: anti-entropy compares copies
	TypeVerifyResult: {name: "verify_result", new: func() Message { return new(VerifyResult) },
		epoch: func(m Message) uint64 { return m.(*VerifyResult).Epoch }},
	TypeLink: {name: "link", new: func() Message { return new(Link) },
		answer: TypeLinkResult, apart: true,
		senders: SenderAdServer | SenderPeer}, // a node finishes a link on the viewer's owner
	TypeLinkResult: {name: "link_result", new: func() Message { return new(LinkResult) },
		epoch: func(m Message) uint64 { return m.(*LinkResult).Epoch }},
	TypeUnlink: {name: "unlink", new: func() Message { return new(Unlink) },
		answer: TypeUnlinkResult, apart: true,
		senders: SenderAdServer | SenderPeer}, // an Erase unlinks the viewer's devices on their owners
	TypeUnlinkResult: {name: "unlink_result", new: func() Message { return new(UnlinkResult) },
		epoch: func(m Message) uint64 { return m.(*UnlinkResult).Epoch },
		own:   func(m Message) { r := m.(*UnlinkResult); r.Viewer = strings.Clone(r.Viewer) }},
	TypeResolve: {name: "resolve", new: func() Message { return new(Resolve) },
		answer: TypeResolveResult, senders: SenderAdServer},
	TypeResolveResult: {name: "resolve_result", new: func() Message { return new(ResolveResult) },
		epoch: func(m Message) uint64 { return m.(*ResolveResult).Epoch },
		own:   func(m Message) { ownResolveResult(m.(*ResolveResult)) }},
	TypeLinkDevice: {name: "link_device", new: func() Message { return new(LinkDevice) },
		answer: TypeLinkDeviceResult, senders: SenderPeer, apart: true},
	TypeLinkDeviceResult: {name: "link_device_result", new: func() Message { return new(LinkDeviceResult) }},
	TypeUndo: {name: "undo", new: func() Message { return new(Undo) },
		answer: TypeUndoResult, senders: SenderAdServer},
	TypeUndoResult: {name: "undo_result", new: func() Message { return new(UndoResult) },
		epoch: func(m Message) uint64 { return m.(*UndoResult).Epoch }},
	TypeErase: {name: "erase", new: func() Message { return new(Erase) },
		answer: TypeEraseResult, senders: SenderAdServer, apart: true},
	TypeEraseResult: {name: "erase_result", new: func() Message { return new(EraseResult) },
		epoch: func(m Message) uint64 { return m.(*EraseResult).Epoch }},
	TypeVoid: {name: "void", new: func() Message { return new(Void) },
		answer: TypeVoidResult, senders: SenderAdServer, apart: true},
	TypeVoidResult: {name: "void_result", new: func() Message { return new(VoidResult) },
		epoch: func(m Message) uint64 { return m.(*VoidResult).Epoch }},
	TypeForget: {name: "forget", new: func() Message { return new(Forget) },
		answer: TypeForgetResult, apart: true},
	TypeForgetResult: {name: "forget_result", new: func() Message { return new(ForgetResult) }},
	TypePull: {name: "pull", new: func() Message { return new(Pull) },
		answer: TypePullResult, senders: SenderPeer},
	TypePullResult: {name: "pull_result", new: func() Message { return new(PullResult) }},
	TypeRegionMerge: {name: "region_merge", new: func() Message { return new(RegionMerge) },
		answer: TypeRegionMergeResult, senders: SenderPeer}, // a node of a peer region, with its peer token
	TypeRegionMergeResult: {name: "region_merge_result", new: func() Message { return new(RegionMergeResult) },
		epoch: func(m Message) uint64 { return m.(*RegionMergeResult).Epoch }},
	TypeShareAsk: {name: "share_ask", new: func() Message { return new(ShareAsk) },
		answer: TypeShareGive, senders: SenderPeer, apart: true}, // a node of a peer region; waits for the loan's backups
	TypeShareGive: {name: "share_give", new: func() Message { return new(ShareGive) },
		epoch: func(m Message) uint64 { return m.(*ShareGive).Epoch }},
	TypeRetireRegion: {name: "retire_region", new: func() Message { return new(RetireRegion) },
		answer: TypeRetireRegionResult, apart: true}, // operators only: it writes the data dir
	TypeRetireRegionResult: {name: "retire_region_result", new: func() Message { return new(RetireRegionResult) }},
	TypeRegionDigest: {name: "region_digest", new: func() Message { return new(RegionDigest) },
		answer: TypeRegionDigestResult, senders: SenderPeer, apart: true}, // a node of a peer region; a pass over the engine
	TypeRegionDigestResult: {name: "region_digest_result", new: func() Message { return new(RegionDigestResult) },
		epoch: func(m Message) uint64 { return m.(*RegionDigestResult).Epoch }},
}

// String returns the type's name in snake case ("check_result"), fit for
// a metric label, or "type(N)" for an unknown type.
func (t Type) String() string {
	if n := table[t].name; n != "" {
		return n
	}
	return "type(" + strconv.Itoa(int(t)) + ")"
}

// NewMessage returns a new, empty message of type t, or nil if t is not
// a known type.
func NewMessage(t Type) Message {
	if r := &table[t]; r.new != nil {
		return r.new()
	}
	return nil
}

// Answer returns the type of the response to a request of type t, or 0
// when t is not a request (a response, an unknown type).
func (t Type) Answer() Type { return table[t].answer }

// IsRequest reports whether t is a request type.
func (t Type) IsRequest() bool { return table[t].answer != 0 }

// Senders returns who besides operators may send a request of type t.
func (t Type) Senders() Sender { return table[t].senders }

// Apart reports whether a node runs a request of type t whole apart from
// its connection's reader: it calls other nodes or waits for
// replication (identity writes, Erase, Void), or it is an admin request
// that may run long (Drain, Verify, GossipKey).
func (t Type) Apart() bool { return table[t].apart }

// EpochOf returns the ring epoch m carries, or false when its type
// carries none.
func EpochOf(m Message) (uint64, bool) {
	if f := table[m.Type()].epoch; f != nil {
		return f(m), true
	}
	return 0, false
}

// Own detaches a decoded message from what it may alias, so its holder
// may keep it past the body it was decoded from (see Decode) and past the
// next decode into the same message: its strings are copied and its
// reused slices reallocated. Messages no caller keeps are left as they
// are.
func Own(m Message) {
	if f := table[m.Type()].own; f != nil {
		f(m)
	}
}

func ownTopology(t *Topology) {
	for i := range t.Members {
		m := &t.Members[i]
		m.Name, m.Addr, m.HTTPAddr = strings.Clone(m.Name), strings.Clone(m.Addr), strings.Clone(m.HTTPAddr)
	}
	t.Members = append([]Member(nil), t.Members...)
	t.Owners = append([]uint16(nil), t.Owners...)
}

func ownResolveResult(r *ResolveResult) {
	vs := make([]string, len(r.Viewers))
	for i, v := range r.Viewers {
		vs[i] = strings.Clone(v)
	}
	r.Viewers = vs
}

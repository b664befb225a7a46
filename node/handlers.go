package node

import (
	"sync/atomic"
	"time"

	"github.com/fcap-io/fcap/node/metrics"
	"github.com/fcap-io/fcap/node/security"
	"github.com/fcap-io/fcap/proto"
	"github.com/fcap-io/fcap/ring"
)

// handler answers one connection's requests. Its message values are
// reused from request to request, so steady-state handling decodes and
// encodes without allocating. Strings in decoded requests alias the read
// buffer: nothing here keeps them past the request (the engine keeps only
// hashes).
type handler struct {
	n    *Node
	slot int // spreads writers over a plan's in-flight counters

	checkMsg     proto.Check
	checkRes     proto.CheckResult
	allowMsg     proto.Allow
	allowRes     proto.AllowResult
	recordMsg    proto.Record
	recordRes    proto.RecordResult
	reserveMsg   proto.Reserve
	reserveRes   proto.ReserveResult
	releaseMsg   proto.Release
	releaseRes   proto.ReleaseResult
	replicateMsg proto.Replicate
	left         []int64 // per-cap impressions left of the last check
	wr           write   // the write in progress (writes.go)
	refusal      string  // why authority refused the last strict write (authority.go)

	// perms are the request types this connection may send: all of
	// them when the node has no tokens, else those of role, set by Hello.
	perms   security.Perms
	role    security.Role
	session security.Session // what its Hello was granted
	// hangup closes the connection once the response is written (a
	// failed Hello: no guessing tokens on one connection).
	hangup bool
	// arrived is when the request being handled reached the node, as
	// near as the connection's reader knows: its budget counts from
	// then (deadline.go). Zero: when its handling started.
	arrived time.Time
	// conn is the connection's write side: requests that wait are
	// answered through it, apart from the reader (pending.go). Nil: they
	// are answered in line.
	conn *connWriter
	// start is when the request being handled began.
	start time.Time
}

var handlerSlots atomic.Int64

func newHandler(n *Node) *handler {
	h := &handler{n: n, slot: int(handlerSlots.Add(1)), perms: security.AllPerms}
	if n.tokens.Required() {
		h.perms = security.Perms{}
	}
	return h
}

// enter starts a client write under the plan of the view it is checked
// against: the view is loaded, its plan entered, and the view re-checked,
// so a hand-over that waits for the plan to go idle also waits for this
// write. The write marks the viewers it changed through that plan, then
// leaves.
func (h *handler) enter() *view {
	for {
		v := h.n.view.Load()
		v.plan.Enter(h.slot)
		if h.n.view.Load() == v {
			return v
		}
		v.plan.Leave(h.slot)
	}
}

func (h *handler) leave(v *view) { v.plan.Leave(h.slot) }

// handle answers one request, appending the response frame to out.
func (h *handler) handle(out []byte, hdr proto.Header, body []byte) []byte {
	h.start = time.Now()
	var op metrics.Op
	var oc metrics.Outcome
	if h.conn != nil && hdr.Type.Apart() {
		out, op, oc = h.apart(out, h.start, hdr, body)
	} else {
		out, op, oc = h.dispatch(out, h.n.view.Load(), hdr, body)
	}
	if oc != metrics.OutcomeApart {
		h.n.metrics.Observe(op, oc, time.Since(h.start))
	}
	return out
}

// op answers one request type: parse, operate, answer (appending the
// response frame to out). v is the view the request is routed by.
type op func(h *handler, out []byte, v *view, hdr proto.Header, body []byte) ([]byte, metrics.Op, metrics.Outcome)

// ops are the handlers by request type; Hello is answered before the
// permission check, every other type after it.
var ops = [70]op{
	proto.TypePing:            (*handler).ping,
	proto.TypeTopologyRequest: (*handler).topology,
	proto.TypeCheck:           (*handler).check,
	proto.TypeAllow:           (*handler).allow,
	proto.TypeRecord:          (*handler).record,
	proto.TypeReserve:         (*handler).reserve,
	proto.TypeUndo:            (*handler).undo,
	proto.TypeErase:           (*handler).erase,
	proto.TypeVoid:            (*handler).void,
	proto.TypeRelease:         (*handler).release,
	proto.TypeReplicate:       (*handler).replicate,
	proto.TypeSyncRequest:     (*handler).syncRequest,
	proto.TypePull:            (*handler).pull,
	proto.TypeStatusRequest:   (*handler).statusRequest,
	proto.TypeInspect:         (*handler).inspect,
	proto.TypeVerify:          (*handler).verify,
	proto.TypeResolve:         (*handler).resolveOp,
	proto.TypeLink:            (*handler).linkOp,
	proto.TypeUnlink:          (*handler).unlinkOp,
	proto.TypeLinkDevice:      (*handler).linkDeviceOp,
	proto.TypeDrain:           (*handler).drain,
	proto.TypeGossipKey:       (*handler).gossipKey,
	proto.TypeForget:          (*handler).forget,
	proto.TypeRegionMerge:     (*handler).regionMerge,
	proto.TypeShareAsk:        (*handler).shareAsk,
	proto.TypeRetireRegion:    (*handler).retireRegion,
	proto.TypeRegionDigest:    (*handler).regionDigest,
}

func (h *handler) dispatch(out []byte, v *view, hdr proto.Header, body []byte) ([]byte, metrics.Op, metrics.Outcome) {
	if hdr.Type == proto.TypeHello {
		return h.hello(out, hdr, body, v.ring.Epoch())
	}
	if h.perms != security.AllPerms && ((h.role != 0 && !h.current()) || !h.perms.May(hdr.Type)) {
		return h.deny(out, hdr, v.ring.Epoch())
	}
	if int(hdr.Type) < len(ops) && ops[hdr.Type] != nil {
		return ops[hdr.Type](h, out, v, hdr, body)
	}
	return h.fail(out, hdr, proto.CodeUnsupported, "unknown message type "+hdr.Type.String()), metrics.OpUnknown, metrics.OutcomeBadRequest
}

// identityReply answers an identity request: its result, a refusal, or
// an error.
func (h *handler) identityReply(out []byte, hdr proto.Header, res proto.Message, code proto.Code, err error, epoch uint64) ([]byte, metrics.Op, metrics.Outcome) {
	switch {
	case err != nil:
		return h.failErr(out, hdr, err, epoch, metrics.OpIdentity)
	case code != 0:
		return h.refuse(out, hdr, code, epoch, metrics.OpIdentity)
	}
	return h.reply(out, hdr.ID, res, metrics.OpIdentity)
}

// serves returns 0 when this node answers for the viewer: it is the
// primary owner and holds the viewer's partition. Otherwise the code to
// refuse with: NotOwner (the client refreshes its topology), or
// Overloaded while the partition is still arriving (soft caps ask a
// backup, strict caps fail closed). It hashes the viewer id once.
func (h *handler) serves(v *view, viewer string) proto.Code {
	if h.n.left.Load() || !v.in {
		return proto.CodeNotOwner
	}
	p, owners := v.ring.Lookup(viewer)
	if len(owners) == 0 || owners[0] != v.self {
		return proto.CodeNotOwner
	}
	if h.n.repl.Syncing(p) {
		return proto.CodeOverloaded
	}
	return 0
}

func partitionOf(v *view, viewer string) int {
	p, _ := v.ring.Lookup(viewer)
	return p
}

// refuse answers a request this node does not serve.
func (h *handler) refuse(out []byte, hdr proto.Header, code proto.Code, epoch uint64, op metrics.Op) ([]byte, metrics.Op, metrics.Outcome) {
	if code == proto.CodeNotOwner {
		return h.notOwner(out, hdr, epoch, op)
	}
	msg := &proto.Error{Code: code, Message: "partition not received yet", Epoch: epoch}
	if code == proto.CodeNoQuorum {
		msg.Message = h.refusal
	} else {
		h.n.metrics.SyncingRefusals.Inc()
	}
	b, _ := proto.AppendFrame(out, hdr.ID, msg)
	return b, op, metrics.OutcomeError
}

// owns reports whether this node is the primary owner of the viewer.
func (v *view) owns(viewer string) bool {
	_, owners := v.ring.Lookup(viewer)
	return v.in && len(owners) > 0 && owners[0] == v.self
}

// backs reports whether this node is one of the viewer's backup owners.
func (v *view) backs(viewer string) bool {
	if !v.in {
		return false
	}
	_, owners := v.ring.Lookup(viewer)
	for _, o := range owners[min(1, len(owners)):] {
		if o == v.self {
			return true
		}
	}
	return false
}

// now is the request's time, or the node's clock when it has none.
func (h *handler) now(t int64, has bool) int64 {
	if has {
		return t
	}
	return h.n.clock()
}

func (h *handler) reply(out []byte, id uint64, m proto.Message, op metrics.Op) ([]byte, metrics.Op, metrics.Outcome) {
	b, err := proto.AppendFrame(out, id, m)
	if err != nil {
		// Our own message failed to encode: a bug, not the client's.
		h.n.log.Error("encode response", "type", m.Type().String(), "err", err)
		return h.fail(out, proto.Header{ID: id}, proto.CodeInternal, "encode response"), op, metrics.OutcomeError
	}
	return b, op, metrics.OutcomeOK
}

func (h *handler) notOwner(out []byte, hdr proto.Header, epoch uint64, op metrics.Op) ([]byte, metrics.Op, metrics.Outcome) {
	h.n.metrics.NotOwner.Inc()
	msg := &proto.Error{Code: proto.CodeNotOwner, Message: "not the owner of this viewer", Epoch: epoch}
	b, _ := proto.AppendFrame(out, hdr.ID, msg)
	return b, op, metrics.OutcomeNotOwner
}

func (h *handler) failErr(out []byte, hdr proto.Header, err error, epoch uint64, op metrics.Op) ([]byte, metrics.Op, metrics.Outcome) {
	h.n.metrics.Time.RefusedTime(op, err)
	msg := proto.NewError(err, epoch)
	b, encErr := proto.AppendFrame(out, hdr.ID, msg)
	if encErr != nil {
		return out, op, metrics.OutcomeError
	}
	return b, op, metrics.OutcomeOf(msg.Code)
}

// fail appends an Error frame.
func (h *handler) fail(out []byte, hdr proto.Header, code proto.Code, text string) []byte {
	msg := &proto.Error{Code: code, Message: text, Epoch: h.n.view.Load().ring.Epoch()}
	b, err := proto.AppendFrame(out, hdr.ID, msg)
	if err != nil {
		return out
	}
	return b
}

// topologyOf describes a ring for clients.
func topologyOf(r *ring.Ring) *proto.Topology {
	ms := r.Members()
	t := &proto.Topology{
		Epoch:      r.Epoch(),
		Partitions: r.Partitions(),
		Replicas:   r.Replicas(),
		Members:    make([]proto.Member, len(ms)),
		Owners:     r.Table(),
	}
	for i, m := range ms {
		t.Members[i] = proto.Member{Name: m.Name, Addr: m.Addr, HTTPAddr: m.HTTPAddr, State: uint8(m.State), Incarnation: m.Incarnation}
	}
	return t
}

package node

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/node/engine"
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

	check      proto.Check
	checkRes   proto.CheckResult
	allow      proto.Allow
	record     proto.Record
	recordRes  proto.RecordResult
	allowRes   proto.AllowResult
	reserve    proto.Reserve
	reserveRes proto.ReserveResult
	release    proto.Release
	releaseRes proto.ReleaseResult
	replicate  proto.Replicate
	left       []int64 // per-cap impressions left of the last check

	// perms are the request types this connection may send: all of
	// them when the node has no tokens, else those of role, set by Hello.
	perms perms
	role  Role
	// hangup closes the connection once the response is written (a
	// failed Hello: no guessing tokens on one connection).
	hangup bool
	logged uint64 // the newest log record of the request (durable.go), 0 for none
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
	h := &handler{n: n, slot: int(handlerSlots.Add(1)), perms: allPerms}
	if len(n.tokens) > 0 {
		h.perms = 0
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
	var op opKind
	var oc outcome
	if h.conn != nil && runsApart(hdr.Type) {
		out, op, oc = h.apart(out, h.start, hdr, body)
	} else {
		out, op, oc = h.dispatch(out, h.n.view.Load(), hdr, body)
	}
	if oc != outcomeApart {
		h.n.metrics.observe(op, oc, time.Since(h.start))
	}
	return out
}

func (h *handler) dispatch(out []byte, v *view, hdr proto.Header, body []byte) ([]byte, opKind, outcome) {
	epoch := v.ring.Epoch()
	if hdr.Type == proto.TypeHello {
		return h.hello(out, hdr, body, epoch)
	}
	if h.perms != allPerms && !h.perms.may(hdr.Type) {
		return h.deny(out, hdr, epoch)
	}
	switch hdr.Type {
	case proto.TypePing:
		return h.reply(out, hdr.ID, &proto.Pong{Epoch: epoch, Name: h.n.cfg.Name}, opPing)

	case proto.TypeTopologyRequest:
		return h.reply(out, hdr.ID, topologyOf(v.ring), opTopology)

	case proto.TypeCheck:
		m := &h.check
		if err := proto.Decode(body, m); err != nil {
			return h.failErr(out, hdr, err, epoch, opCheck)
		}
		if late(h.deadline(m.Budget)) {
			return h.tooLate(out, hdr, epoch, opCheck)
		}
		stale := false
		if code := h.serves(v, m.Viewer); code != 0 {
			// A backup answers only a client that asked for it (the
			// owner did not answer); strict caps never ask.
			if code != proto.CodeNotOwner || !m.Backup || !v.backs(m.Viewer) || h.n.repl.Syncing(partitionOf(v, m.Viewer)) {
				return h.refuse(out, hdr, code, epoch, opCheck)
			}
			stale = true
			h.n.metrics.backupReads.Inc()
		}
		now := h.now(m.Now, m.HasNow)
		res := &h.checkRes
		res.Stale = stale
		var err error
		res.Verdicts, h.left, err = h.n.engine.CheckTableCaps(m.Viewer, &m.Table, now, res.Verdicts[:0], h.left[:0])
		if err != nil {
			return h.failErr(out, hdr, err, epoch, opCheck)
		}
		res.Left = res.Left[:0]
		for _, l := range h.left {
			res.Left = append(res.Left, uint16(min(l, 0xFFFF)))
		}
		res.Epoch, res.Now = epoch, now
		return h.reply(out, hdr.ID, res, opCheck)

	case proto.TypeAllow:
		m := &h.allow
		if err := proto.Decode(body, m); err != nil {
			return h.failErr(out, hdr, err, epoch, opAllow)
		}
		deadline := h.deadline(m.Budget)
		if late(deadline) {
			return h.tooLate(out, hdr, epoch, opAllow)
		}
		wv := h.enter()
		standIn := false
		if code := h.serves(wv, m.Viewer); code != 0 {
			if !m.Backup || !h.standsIn(wv, code, m.Viewer, m.Caps) {
				h.leave(wv)
				return h.refuse(out, hdr, code, epoch, opAllow)
			}
			standIn = true
		}
		now := h.now(m.Now, m.HasNow)
		vd, err := h.n.engine.Allow(m.Viewer, now, m.Caps...)
		var seq uint64
		if err == nil && vd.Allowed {
			key := engine.ViewerKey(m.Viewer)
			if standIn {
				wv.plan.MarkStandIn(key)
				h.n.metrics.standInWrites.Inc()
			} else {
				wv.plan.Mark(key)
			}
			seq = h.n.logChange(key)
		}
		h.leave(wv)
		if err != nil {
			return h.failErr(out, hdr, err, epoch, opAllow)
		}
		sync := vd.Allowed && strict(m.Caps)
		if seq == 0 && !sync {
			h.allowRes = proto.AllowResult{Epoch: epoch, Now: now, Verdict: vd}
			return h.reply(out, hdr.ID, &h.allowRes, opAllow)
		}
		// It waits (its log record, its backups): apart from the reader,
		// with its own copies of what the reader's buffer holds.
		viewer, caps := m.Viewer, m.Caps
		if sync {
			viewer, caps = strings.Clone(viewer), cloneCaps(caps)
		}
		return h.later(out, h.start, func(out []byte) ([]byte, opKind, outcome) {
			h.n.waitLogged(seq)
			if sync {
				// A strict grant stands only if the backups hold it and
				// the client will see it: otherwise it is taken back, and
				// the client fails closed on a slot that stays free.
				if err := h.syncStrict(wv, viewer, deadline); err != nil || late(deadline) {
					h.revoke(viewer, now, caps)
					return h.failErr(out, hdr, lateErr(err, deadline), epoch, opAllow)
				}
			}
			var grant uint64
			if sync {
				// Its answer may still reach the client after it gave up:
				// it can give the slot back with an Undo (undo.go).
				grant = h.n.grants.put(viewer, now, caps)
			}
			return h.reply(out, hdr.ID, &proto.AllowResult{Epoch: epoch, Now: now, Verdict: vd, Grant: grant}, opAllow)
		})

	case proto.TypeRecord:
		m := &h.record
		if err := proto.Decode(body, m); err != nil {
			return h.failErr(out, hdr, err, epoch, opRecord)
		}
		res := &h.recordRes
		res.Epoch = epoch
		res.Results = res.Results[:0]
		wv := h.enter()
		h.logged = 0
		for i := range m.Items {
			res.Results = append(res.Results, h.recordItem(wv, &m.Items[i], m.Backup))
		}
		h.leave(wv)
		var syncs []strictItem // items to wait for their backups
		for i := range m.Items {
			if res.Results[i].Code == 0 && res.Results[i].Status == fcap.Recorded && strict(m.Items[i].Impression.Caps) {
				syncs = append(syncs, strictItem{i, engine.ViewerKey(m.Items[i].Viewer), partitionOf(wv, m.Items[i].Viewer)})
			}
		}
		seq := h.logged
		if seq == 0 && len(syncs) == 0 {
			return h.reply(out, hdr.ID, res, opRecord)
		}
		// It waits: apart from the reader, with its own copy of the
		// results (the handler reuses its own).
		res = &proto.RecordResult{Epoch: epoch, Results: slices.Clone(res.Results)}
		return h.later(out, h.start, func(out []byte) ([]byte, opKind, outcome) {
			h.n.waitLogged(seq)
			for _, it := range syncs {
				if err := h.syncKey(wv, it.key, it.part, time.Time{}); err != nil {
					// Counted here, not yet on the backups: the client
					// retries, and the id memory makes the retry a no-op.
					res.Results[it.i] = proto.ItemResult{Code: proto.CodeOverloaded}
				}
			}
			return h.reply(out, hdr.ID, res, opRecord)
		})

	case proto.TypeReserve:
		m := &h.reserve
		if err := proto.Decode(body, m); err != nil {
			return h.failErr(out, hdr, err, epoch, opReserve)
		}
		deadline := h.deadline(m.Budget)
		if late(deadline) {
			return h.tooLate(out, hdr, epoch, opReserve)
		}
		wv := h.enter()
		if code := h.serves(wv, m.Viewer); code != 0 {
			h.leave(wv)
			return h.refuse(out, hdr, code, epoch, opReserve)
		}
		now := h.now(m.Now, m.HasNow)
		vd, id, err := h.n.engine.Reserve(m.Viewer, fcap.Candidate{Caps: m.Caps}, now, m.TTL)
		var seq uint64
		if err == nil && vd.Allowed {
			key := engine.ViewerKey(m.Viewer)
			wv.plan.Mark(key)
			seq = h.n.logChange(key)
		}
		h.leave(wv)
		if err != nil {
			return h.failErr(out, hdr, err, epoch, opReserve)
		}
		sync := vd.Allowed && strict(m.Caps)
		if seq == 0 && !sync {
			h.reserveRes = proto.ReserveResult{Epoch: epoch, Now: now, Verdict: vd, ID: id}
			return h.reply(out, hdr.ID, &h.reserveRes, opReserve)
		}
		viewer := m.Viewer
		if sync {
			viewer = strings.Clone(viewer) // the reader reuses the buffer it aliases
		}
		return h.later(out, h.start, func(out []byte) ([]byte, opKind, outcome) {
			h.n.waitLogged(seq)
			if sync {
				if err := h.syncStrict(wv, viewer, deadline); err != nil || late(deadline) {
					// The reservation holds here but not on the backups,
					// or the client will not see it: drop it, the client
					// fails closed.
					h.unreserve(viewer, id)
					return h.failErr(out, hdr, lateErr(err, deadline), epoch, opReserve)
				}
			}
			return h.reply(out, hdr.ID, &proto.ReserveResult{Epoch: epoch, Now: now, Verdict: vd, ID: id}, opReserve)
		})

	case proto.TypeUndo:
		return h.undo(out, hdr, body, epoch)

	case proto.TypeRelease:
		m := &h.release
		if err := proto.Decode(body, m); err != nil {
			return h.failErr(out, hdr, err, epoch, opRelease)
		}
		wv := h.enter()
		if code := h.serves(wv, m.Viewer); code != 0 {
			h.leave(wv)
			return h.refuse(out, hdr, code, epoch, opRelease)
		}
		err := h.n.engine.Release(m.Viewer, m.ID)
		var seq uint64
		if err == nil {
			key := engine.ViewerKey(m.Viewer)
			wv.plan.Mark(key)
			seq = h.n.logChange(key)
		}
		h.leave(wv)
		if err != nil {
			return h.failErr(out, hdr, err, epoch, opRelease)
		}
		if seq == 0 {
			h.releaseRes = proto.ReleaseResult{Epoch: epoch}
			return h.reply(out, hdr.ID, &h.releaseRes, opRelease)
		}
		return h.later(out, h.start, func(out []byte) ([]byte, opKind, outcome) {
			h.n.waitLogged(seq)
			return h.reply(out, hdr.ID, &proto.ReleaseResult{Epoch: epoch}, opRelease)
		})

	case proto.TypeReplicate:
		m := &h.replicate
		if err := proto.Decode(body, m); err != nil {
			return h.failErr(out, hdr, err, epoch, opReplicate)
		}
		res, err := h.n.repl.Apply(m)
		if err != nil {
			return h.failErr(out, hdr, err, epoch, opReplicate)
		}
		res.Epoch = epoch
		return h.reply(out, hdr.ID, &res, opReplicate)

	case proto.TypeSyncRequest:
		var m proto.SyncRequest
		if err := proto.Decode(body, &m); err != nil {
			return h.failErr(out, hdr, err, epoch, opReplicate)
		}
		return h.reply(out, hdr.ID, &proto.SyncResult{Pushing: h.n.repl.ServeSync(m.From, m.Partitions, m.Handoffs)}, opReplicate)

	case proto.TypeStatusRequest:
		return h.reply(out, hdr.ID, h.n.status(), opStatus)

	case proto.TypeInspect:
		var m proto.Inspect
		if err := proto.Decode(body, &m); err != nil {
			return h.failErr(out, hdr, err, epoch, opStatus)
		}
		return h.reply(out, hdr.ID, h.n.inspect(v, m.Viewer), opStatus)

	case proto.TypeVerify:
		var m proto.Verify
		if err := proto.Decode(body, &m); err != nil {
			return h.failErr(out, hdr, err, epoch, opVerify)
		}
		res, err := h.n.verify(v, &m)
		if err != nil {
			return h.failErr(out, hdr, err, epoch, opVerify)
		}
		return h.reply(out, hdr.ID, res, opVerify)

	case proto.TypeResolve:
		var m proto.Resolve
		if err := proto.Decode(body, &m); err != nil {
			return h.failErr(out, hdr, err, epoch, opIdentity)
		}
		res, code, err := h.resolve(v, &m, epoch)
		return h.identityReply(out, hdr, res, code, err, epoch)

	case proto.TypeLink:
		var m proto.Link
		if err := proto.Decode(body, &m); err != nil {
			return h.failErr(out, hdr, err, epoch, opIdentity)
		}
		res, code, err := h.link(v, &m, epoch)
		return h.identityReply(out, hdr, res, code, err, epoch)

	case proto.TypeUnlink:
		var m proto.Unlink
		if err := proto.Decode(body, &m); err != nil {
			return h.failErr(out, hdr, err, epoch, opIdentity)
		}
		res, code, err := h.unlink(v, &m, epoch)
		return h.identityReply(out, hdr, res, code, err, epoch)

	case proto.TypeLinkDevice:
		var m proto.LinkDevice
		if err := proto.Decode(body, &m); err != nil {
			return h.failErr(out, hdr, err, epoch, opIdentity)
		}
		res, code, err := h.linkDevice(&m)
		return h.identityReply(out, hdr, res, code, err, epoch)

	case proto.TypeDrain:
		var m proto.Drain
		if err := proto.Decode(body, &m); err != nil {
			return h.failErr(out, hdr, err, epoch, opDrain)
		}
		ctx := context.Background()
		if m.TimeoutMillis > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, time.Duration(m.TimeoutMillis)*time.Millisecond)
			defer cancel()
		}
		sent, err := h.n.Drain(ctx)
		if err != nil {
			return h.failErr(out, hdr, err, epoch, opDrain)
		}
		return h.reply(out, hdr.ID, &proto.DrainResult{Partitions: uint64(sent)}, opDrain)

	case proto.TypeGossipKey:
		var m proto.GossipKey
		if err := proto.Decode(body, &m); err != nil {
			return h.failErr(out, hdr, err, epoch, opGossipKey)
		}
		res, err := h.n.gossipKey(&m)
		if err != nil {
			return h.failErr(out, hdr, err, epoch, opGossipKey)
		}
		return h.reply(out, hdr.ID, res, opGossipKey)

	default:
		return h.fail(out, hdr, proto.CodeUnsupported, "unknown message type "+hdr.Type.String()), opUnknown, outcomeBadRequest
	}
}

// identityReply answers an identity request: its result, a refusal, or
// an error.
func (h *handler) identityReply(out []byte, hdr proto.Header, res proto.Message, code proto.Code, err error, epoch uint64) ([]byte, opKind, outcome) {
	switch {
	case err != nil:
		return h.failErr(out, hdr, err, epoch, opIdentity)
	case code != 0:
		return h.refuse(out, hdr, code, epoch, opIdentity)
	}
	return h.reply(out, hdr.ID, res, opIdentity)
}

// serves returns 0 when this node answers for the viewer: it is the
// primary owner and holds the viewer's partition. Otherwise the code to
// refuse with: NotOwner (the client refreshes its topology), or
// Overloaded while the partition is still arriving (soft caps ask a
// backup, strict caps fail closed).
func (h *handler) serves(v *view, viewer string) proto.Code {
	if h.n.left.Load() || !v.owns(viewer) {
		return proto.CodeNotOwner
	}
	if h.n.repl.Syncing(partitionOf(v, viewer)) {
		return proto.CodeOverloaded
	}
	return 0
}

func partitionOf(v *view, viewer string) int {
	p, _ := v.ring.Lookup(viewer)
	return p
}

// refuse answers a request this node does not serve.
func (h *handler) refuse(out []byte, hdr proto.Header, code proto.Code, epoch uint64, op opKind) ([]byte, opKind, outcome) {
	if code == proto.CodeNotOwner {
		return h.notOwner(out, hdr, epoch, op)
	}
	h.n.metrics.syncingRefusals.Inc()
	msg := &proto.Error{Code: code, Message: "partition not received yet", Epoch: epoch}
	b, _ := proto.AppendFrame(out, hdr.ID, msg)
	return b, op, outcomeError
}

// strict reports whether any cap is strict: its writes are acknowledged
// only once every backup applied them.
func strict(caps []fcap.Cap) bool {
	for i := range caps {
		if caps[i].Mode == fcap.Strict {
			return true
		}
	}
	return false
}

// syncStrict waits until every backup of the viewer applied its current
// state, for StrictTimeout at most and never past the request's deadline
// (the zero time: none). Cut short by the deadline, it fails with
// ErrDeadlineExceeded.
func (h *handler) syncStrict(v *view, viewer string, deadline time.Time) error {
	return h.syncKey(v, engine.ViewerKey(viewer), partitionOf(v, viewer), deadline)
}

// strictItem is an item of a Record batch that waits for its backups.
type strictItem struct {
	i    int    // its index in the batch
	key  uint64 // its viewer's key
	part int    // its viewer's partition
}

// cloneCaps copies caps and their strings, which alias the reader's
// buffer, for a request that outlives it.
func cloneCaps(caps []fcap.Cap) []fcap.Cap {
	out := slices.Clone(caps)
	for i := range out {
		out[i].Scope, out[i].ID = strings.Clone(out[i].Scope), strings.Clone(out[i].ID)
	}
	return out
}

// syncKey is syncStrict for the viewer with key, of partition p.
func (h *handler) syncKey(v *view, key uint64, p int, deadline time.Time) error {
	timeout, byDeadline := h.strictTimeout(deadline)
	if err := v.plan.WaitSynced(key, p, timeout); err != nil {
		if byDeadline && late(deadline) {
			return fmt.Errorf("%w: %v", proto.ErrDeadlineExceeded, err)
		}
		h.n.metrics.strictFailures.Inc()
		return fmt.Errorf("%w: %v", proto.ErrOverloaded, err)
	}
	return nil
}

// recordItem applies one impression of a batch; backup says the client
// could not reach the owner and accepts this node standing in for it.
func (h *handler) recordItem(v *view, it *proto.RecordItem, backup bool) proto.ItemResult {
	standIn := false
	if code := h.serves(v, it.Viewer); code != 0 {
		if !backup || it.Impression.Reservation != 0 || !h.standsIn(v, code, it.Viewer, it.Impression.Caps) {
			if code == proto.CodeNotOwner {
				h.n.metrics.notOwner.Inc()
			}
			return proto.ItemResult{Code: code}
		}
		standIn = true
	}
	imp := it.Impression
	if !it.HasTime {
		imp.Time = h.n.clock()
	}
	st, err := h.n.engine.Record(it.Viewer, imp)
	if err != nil {
		h.n.metrics.time.refusedTime(opRecord, err)
		return proto.ItemResult{Code: proto.CodeOf(err)}
	}
	if st == fcap.Recorded || imp.Reservation != 0 {
		key := engine.ViewerKey(it.Viewer)
		if standIn {
			v.plan.MarkStandIn(key)
			h.n.metrics.standInWrites.Inc()
		} else {
			v.plan.Mark(key)
		}
		if seq := h.n.logChange(key); seq != 0 {
			h.logged = seq
		}
	}
	return proto.ItemResult{Status: st}
}

// standsIn reports whether this node takes a write for a viewer it does
// not serve (code) in place of its owner, which the client could not
// reach: only as one of the viewer's backup owners holding its partition,
// and only for soft caps. The write is replicated to the other owners
// (plan.markStandIn), whose copies merge it in; strict caps stay with the
// owner alone and fail closed without it.
func (h *handler) standsIn(v *view, code proto.Code, viewer string, caps []fcap.Cap) bool {
	return code == proto.CodeNotOwner && !h.n.left.Load() && !strict(caps) &&
		v.backs(viewer) && !h.n.repl.Syncing(partitionOf(v, viewer))
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

func (h *handler) reply(out []byte, id uint64, m proto.Message, op opKind) ([]byte, opKind, outcome) {
	b, err := proto.AppendFrame(out, id, m)
	if err != nil {
		// Our own message failed to encode: a bug, not the client's.
		h.n.log.Error("encode response", "type", m.Type().String(), "err", err)
		return h.fail(out, proto.Header{ID: id}, proto.CodeInternal, "encode response"), op, outcomeError
	}
	return b, op, outcomeOK
}

func (h *handler) notOwner(out []byte, hdr proto.Header, epoch uint64, op opKind) ([]byte, opKind, outcome) {
	h.n.metrics.notOwner.Inc()
	msg := &proto.Error{Code: proto.CodeNotOwner, Message: "not the owner of this viewer", Epoch: epoch}
	b, _ := proto.AppendFrame(out, hdr.ID, msg)
	return b, op, outcomeNotOwner
}

func (h *handler) failErr(out []byte, hdr proto.Header, err error, epoch uint64, op opKind) ([]byte, opKind, outcome) {
	h.n.metrics.time.refusedTime(op, err)
	msg := proto.NewError(err, epoch)
	b, encErr := proto.AppendFrame(out, hdr.ID, msg)
	if encErr != nil {
		return out, op, outcomeError
	}
	return b, op, outcomeOf(msg.Code)
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

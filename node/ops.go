package node

import (
	"context"
	"time"

	"github.com/fcap-io/fcap/node/metrics"
	"github.com/fcap-io/fcap/node/storage"
	"github.com/fcap-io/fcap/proto"
)

// The handlers of the requests that are not client writes (writes.go):
// reads, peer traffic, identity and admin requests. Each parses its
// request, operates and answers.

func (h *handler) ping(out []byte, v *view, hdr proto.Header, body []byte) ([]byte, metrics.Op, metrics.Outcome) {
	var m proto.Ping
	if proto.Decode(body, &m) != nil {
		// A liveness probe: its body was always ignored, and one that
		// does not decode names no peer, so it is answered as a
		// client's (no promise is made or read).
		m = proto.Ping{}
	}
	if m.From != "" && !h.peerPing(v, m.From) {
		m.From = "" // only a member, on a peer's connection, asks for the quorum
	}
	// A peer asking for the quorum gets the epoch only while this node
	// stands by no other (quorum.Promises); a client always gets it.
	now := time.Now()
	epoch := h.n.promises.Answer(m.From, m.FromEpoch, v.ring.Epoch(), now)
	absent := m.From != "" && h.n.absent.was(m.From, now)
	return h.reply(out, hdr.ID, &proto.Pong{Epoch: epoch, Name: h.n.cfg.Name, Absent: absent}, metrics.OpPing)
}

func (h *handler) topology(out []byte, v *view, hdr proto.Header, body []byte) ([]byte, metrics.Op, metrics.Outcome) {
	if len(body) > 1 { // not the empty form: a peer region's link (escrow.go)
		if err := h.regionSet(body); err != nil {
			return h.failErr(out, hdr, err, v.ring.Epoch(), metrics.OpTopology)
		}
	}
	return h.reply(out, hdr.ID, topologyOf(v.ring), metrics.OpTopology)
}

func (h *handler) check(out []byte, v *view, hdr proto.Header, body []byte) ([]byte, metrics.Op, metrics.Outcome) {
	m := &h.checkMsg
	epoch := v.ring.Epoch()
	if err := proto.Decode(body, m); err != nil {
		return h.failErr(out, hdr, err, epoch, metrics.OpCheck)
	}
	if late(h.deadline(m.Budget)) {
		return h.tooLate(out, hdr, epoch, metrics.OpCheck)
	}
	stale := false
	if code := h.serves(v, m.Viewer); code != 0 {
		// A backup answers only a client that asked for it (the owner
		// did not answer); strict caps never ask.
		if code != proto.CodeNotOwner || !m.Backup || !v.backs(m.Viewer) || h.n.repl.Syncing(partitionOf(v, m.Viewer)) {
			return h.refuse(out, hdr, code, epoch, metrics.OpCheck)
		}
		stale = true
		h.n.metrics.BackupReads.Inc()
	}
	now := h.now(m.Now, m.HasNow)
	res := &h.checkRes
	res.Stale = stale
	var err error
	res.Verdicts, h.left, err = h.n.engine.CheckTableCaps(m.Viewer, &m.Table, now, res.Verdicts[:0], h.left[:0])
	if err != nil {
		return h.failErr(out, hdr, err, epoch, metrics.OpCheck)
	}
	res.Left = res.Left[:0]
	for _, l := range h.left {
		res.Left = append(res.Left, uint16(min(l, 0xFFFF)))
	}
	res.Epoch, res.Now = epoch, now
	return h.reply(out, hdr.ID, res, metrics.OpCheck)
}

func (h *handler) replicate(out []byte, v *view, hdr proto.Header, body []byte) ([]byte, metrics.Op, metrics.Outcome) {
	m := &h.replicateMsg
	epoch := v.ring.Epoch()
	if err := proto.Decode(body, m); err != nil {
		return h.failErr(out, hdr, err, epoch, metrics.OpReplicate)
	}
	res, err := h.n.repl.Apply(m)
	if err != nil {
		return h.failErr(out, hdr, err, epoch, metrics.OpReplicate)
	}
	res.Epoch = epoch
	return h.reply(out, hdr.ID, &res, metrics.OpReplicate)
}

func (h *handler) syncRequest(out []byte, v *view, hdr proto.Header, body []byte) ([]byte, metrics.Op, metrics.Outcome) {
	var m proto.SyncRequest
	if err := proto.Decode(body, &m); err != nil {
		return h.failErr(out, hdr, err, v.ring.Epoch(), metrics.OpReplicate)
	}
	return h.reply(out, hdr.ID, &proto.SyncResult{Pushing: h.n.repl.ServeSync(m.From, m.Partitions, m.Handoffs, m.Relays, m.Copies)}, metrics.OpReplicate)
}

func (h *handler) pull(out []byte, v *view, hdr proto.Header, body []byte) ([]byte, metrics.Op, metrics.Outcome) {
	var m proto.Pull
	if err := proto.Decode(body, &m); err != nil {
		return h.failErr(out, hdr, err, v.ring.Epoch(), metrics.OpReplicate)
	}
	return h.reply(out, hdr.ID, h.n.repl.ServePull(&m), metrics.OpReplicate)
}

func (h *handler) statusRequest(out []byte, _ *view, hdr proto.Header, _ []byte) ([]byte, metrics.Op, metrics.Outcome) {
	return h.reply(out, hdr.ID, h.n.status(), metrics.OpStatus)
}

func (h *handler) inspect(out []byte, v *view, hdr proto.Header, body []byte) ([]byte, metrics.Op, metrics.Outcome) {
	var m proto.Inspect
	if err := proto.Decode(body, &m); err != nil {
		return h.failErr(out, hdr, err, v.ring.Epoch(), metrics.OpStatus)
	}
	return h.reply(out, hdr.ID, h.n.inspect(v, m.Viewer), metrics.OpStatus)
}

func (h *handler) verify(out []byte, v *view, hdr proto.Header, body []byte) ([]byte, metrics.Op, metrics.Outcome) {
	var m proto.Verify
	if err := proto.Decode(body, &m); err != nil {
		return h.failErr(out, hdr, err, v.ring.Epoch(), metrics.OpVerify)
	}
	res, err := storage.Verify(h.n.engine, h.n.durable, h.n.cfg.Engine, v.ring, h.n.cfg.Name, v.in, h.n.repl.Holds, &m)
	if err != nil {
		return h.failErr(out, hdr, err, v.ring.Epoch(), metrics.OpVerify)
	}
	return h.reply(out, hdr.ID, res, metrics.OpVerify)
}

func (h *handler) resolveOp(out []byte, v *view, hdr proto.Header, body []byte) ([]byte, metrics.Op, metrics.Outcome) {
	return identityOp(h, out, v, hdr, body, func(m *proto.Resolve) (proto.Message, proto.Code, error) {
		return h.resolve(v, m, v.ring.Epoch())
	})
}

func (h *handler) linkOp(out []byte, v *view, hdr proto.Header, body []byte) ([]byte, metrics.Op, metrics.Outcome) {
	return identityOp(h, out, v, hdr, body, func(m *proto.Link) (proto.Message, proto.Code, error) {
		return h.link(v, m, v.ring.Epoch())
	})
}

func (h *handler) unlinkOp(out []byte, v *view, hdr proto.Header, body []byte) ([]byte, metrics.Op, metrics.Outcome) {
	return identityOp(h, out, v, hdr, body, func(m *proto.Unlink) (proto.Message, proto.Code, error) {
		return h.unlink(v, m, v.ring.Epoch())
	})
}

func (h *handler) linkDeviceOp(out []byte, v *view, hdr proto.Header, body []byte) ([]byte, metrics.Op, metrics.Outcome) {
	return identityOp(h, out, v, hdr, body, func(m *proto.LinkDevice) (proto.Message, proto.Code, error) {
		return h.linkDevice(m)
	})
}

// identityOp decodes an identity request and answers with what do
// returns: its result, a refusal, or an error.
func identityOp[M any, P interface {
	*M
	proto.Message
}](h *handler, out []byte, v *view, hdr proto.Header, body []byte, do func(P) (proto.Message, proto.Code, error)) ([]byte, metrics.Op, metrics.Outcome) {
	m := P(new(M))
	if err := proto.Decode(body, m); err != nil {
		return h.failErr(out, hdr, err, v.ring.Epoch(), metrics.OpIdentity)
	}
	res, code, err := do(m)
	return h.identityReply(out, hdr, res, code, err, v.ring.Epoch())
}

func (h *handler) drain(out []byte, v *view, hdr proto.Header, body []byte) ([]byte, metrics.Op, metrics.Outcome) {
	var m proto.Drain
	if err := proto.Decode(body, &m); err != nil {
		return h.failErr(out, hdr, err, v.ring.Epoch(), metrics.OpDrain)
	}
	ctx := context.Background()
	if m.TimeoutMillis > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(m.TimeoutMillis)*time.Millisecond)
		defer cancel()
	}
	sent, err := h.n.Drain(ctx)
	if err != nil {
		return h.failErr(out, hdr, err, v.ring.Epoch(), metrics.OpDrain)
	}
	return h.reply(out, hdr.ID, &proto.DrainResult{Partitions: uint64(sent)}, metrics.OpDrain)
}

func (h *handler) gossipKey(out []byte, v *view, hdr proto.Header, body []byte) ([]byte, metrics.Op, metrics.Outcome) {
	var m proto.GossipKey
	if err := proto.Decode(body, &m); err != nil {
		return h.failErr(out, hdr, err, v.ring.Epoch(), metrics.OpGossipKey)
	}
	res, err := h.n.gossipKeys.Apply(&m)
	if err != nil {
		return h.failErr(out, hdr, err, v.ring.Epoch(), metrics.OpGossipKey)
	}
	return h.reply(out, hdr.ID, res, metrics.OpGossipKey)
}

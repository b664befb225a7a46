package replication

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/fcap-io/fcap/proto"
	"github.com/fcap-io/fcap/ring"
)

// Pulling partitions. A node that owns a partition it does not hold
// waits for its pusher, but when nodes passed through different rings
// (two failures in a row, say) they may disagree on who that is, and
// nobody pushes. So a node that has waited a moment asks, one at a time
// and in turn, the members likely to hold the partition (its previous
// owners first) to push it; any that holds it does.

// pullAfter is how long a node waits for a push before it asks: long
// enough for a pusher to reach the partition in a batch of transfers
// (each partition's Done follows its data), so that asking rarely
// duplicates a push already on its way.
const pullAfter = time.Second

// ServeSync queues a full transfer to the asking node of every requested
// partition this node holds; the hand-over of every partition in
// handoffs once this node has left (a drain); and, for those in handoffs
// or relays, one it passes on (relays).
func (r *Replicator) ServeSync(from string, ps, handoffs, relayed, copies []uint32) []uint32 {
	r.mu.Lock()
	defer r.mu.Unlock()
	pl := r.plan.Load()
	if pl == nil {
		return nil
	}
	var pushing []uint32
	// A node that left answers for its own hand-overs: it writes nothing
	// any more, and once the writes in flight under its plans end,
	// everything it acknowledged goes before the marker. A member still in
	// the ring sends its hand-over when its own ring moves; one whose ring
	// went another way may not be the partition's last writer, and a
	// marker from it would end the wait (any hand-over does) before the
	// real writer's last changes came, unless it relays the real writer's
	// hand-over.
	left := r.left()
	for i, list := range [][]uint32{handoffs, relayed} {
		own := i == 0 // handoffs: this node is the sender awaited
		for _, p := range list {
			if int(p) >= len(r.parts) {
				continue
			}
			rep := r.replicaLocked(pl.ring, pl.future, from)
			if rep == nil {
				continue
			}
			if rep.handingOff(int(p)) {
				pushing = append(pushing, p) // on its way: the asker waits behind a transfer
				continue
			}
			switch handedBy, relays := r.relays(pl, int(p)); {
			case left && own:
				rep.handoff(int(p), pl)
				r.log.Debug("partition: handing over again on request", "partition", p, "to", from)
			case !left && relays:
				rep.forget(int(p))
				rep.transfer(int(p))
				rep.handoff(int(p), nil)
				r.log.Debug("partition: relaying a hand-over", "partition", p, "to", from, "from", handedBy)
			default:
				continue
			}
			pushing = append(pushing, p)
		}
	}
	for _, p := range ps {
		if int(p) >= len(r.parts) {
			continue
		}
		if !r.current(int(p)) {
			part := &r.parts[p]
			r.log.Debug("partition: declining a pull: no current copy", "partition", p, "to", from,
				"have", part.have.Load(), "waiting", part.waitSince.Load() != 0, "claimed", part.claimed.Load(),
				"lost", part.lostAt.Load() != 0, "whole_at_loss", part.wholeAtLoss.Load())
			// Not a current copy: none, one still awaited, or a claimed
			// one, which may miss what the members that served p
			// meanwhile granted (rule 5). A copy held whole until the
			// ring moved p away just now is current: after a split
			// heals it may be the only one holding the majority's
			// grants, and the new owners ask for it.
			continue
		}
		rep := r.replicaLocked(pl.ring, pl.future, from)
		if rep == nil {
			continue
		}
		rep.forget(int(p))
		rep.transfer(int(p))
		pushing = append(pushing, p)
	}
	// Copies: whatever this node holds of each (all of it, current or
	// not, or nothing), then a Copied marker (or Done, if current).
	for _, p := range copies {
		if int(p) >= len(r.parts) {
			continue
		}
		rep := r.replicaLocked(pl.ring, pl.future, from)
		if rep == nil {
			continue
		}
		rep.mu.Lock()
		rep.copyAsked[int(p)] = time.Now().UnixNano()
		rep.transferLocked(int(p))
		rep.mu.Unlock()
		rep.poke()
		pushing = append(pushing, p)
	}
	if len(pushing) > 0 {
		r.log.Debug("partition: pushing on request", "to", from, "partitions", len(pushing))
	}
	return pushing
}

// relays reports whether this node, a member still in the ring asked for
// partition p's hand-over, passes on one it received instead. Nodes that
// change rings together may pass over a ring: a node whose ring went
// from "A primary" straight to "C primary" never served p, though the
// ring it passed over made it p's primary, A handed p over to it, and C,
// which saw that ring, waits for its hand-over. It has every write A
// acknowledged (A's changes went before A's marker) and wrote none
// itself, so its whole copy followed by a marker is the hand-over C
// waits for. It relays only when all of that holds: it is not p's
// primary and has not been since it started, a hand-over of p reached it
// within the sync timeout, and it held p whole (or did when it stopped
// owning it, and has not dropped it since). Any other member declines:
// it may not hold the last writer's writes.
func (r *Replicator) relays(pl *Plan, p int) (handedBy string, ok bool) {
	part := &r.parts[p]
	if owners := names(pl.ring, p); len(owners) > 0 && owners[0] == r.cfg.Name || part.wasPrimary.Load() {
		return "", false
	}
	h := part.handed.Load()
	if h == nil || r.now().UnixNano()-h.at > int64(r.cfg.SyncTimeout) {
		return "", false
	}
	whole := part.have.Load() && part.waitSince.Load() == 0
	return h.from, whole || part.lostAt.Load() > 0 && part.wholeAtLoss.Load()
}

// pull asks likely holders for the partitions this node has waited for,
// and the expected sender for hand-overs that have not come: a sender
// that finished (its marker came too early and expired, or it left the
// ring's way before this node's ring moved) sends it again, so the wait
// ends in about pullAfter rather than at SyncTimeout. From the second
// ask on, every other member is asked to relay the hand-over (relays):
// the one the expected sender handed it to, when rings went different
// ways, has it.
func (r *Replicator) pull(ctx context.Context) {
	pl, prev := r.views()
	if pl == nil {
		return
	}
	self := r.cfg.Name
	now := r.now().UnixNano()
	asks := map[string]*proto.SyncRequest{}
	ask := func(addr string) *proto.SyncRequest {
		if asks[addr] == nil {
			asks[addr] = &proto.SyncRequest{From: self}
		}
		return asks[addr]
	}
	for p := range r.parts {
		part := &r.parts[p]
		if part.claimed.Load() {
			r.askForClaimed(p, pl.ring, prev, now, ask)
		}
		since := part.waitSince.Load()
		if since == 0 {
			continue
		}
		if part.askNow.Swap(false) {
			// Its copy was dropped as not current (planner.holding): a
			// member that sent it does not send it again unasked, and
			// asking one holder a second left the 3/2 split's majority
			// waiting past SyncTimeout. Ask every likely holder now; a
			// current one pushes it, the others decline.
			for _, m := range holders(prev, pl.ring, p, self) {
				ask(m.Addr).Partitions = append(ask(m.Addr).Partitions, uint32(p))
			}
			r.log.Debug("partition: asking every holder for a dropped copy", "partition", p)
			continue
		}
		if now-since < int64(pullAfter) {
			continue
		}
		if from := part.handoffFrom(); from != "" {
			for _, m := range pl.ring.Members() {
				switch {
				case m.Name == from:
					ask(m.Addr).Handoffs = append(ask(m.Addr).Handoffs, uint32(p))
				case m.Name != self && now-since >= int64(2*pullAfter):
					ask(m.Addr).Relays = append(ask(m.Addr).Relays, uint32(p))
				}
			}
			if !part.needWhole.Load() {
				continue
			}
			// Its hand-over completes a copy it dropped: it needs a
			// holder's whole copy too.
		}
		cands := holders(prev, pl.ring, p, self)
		if len(cands) == 0 {
			continue
		}
		// A different candidate on each attempt.
		who := cands[int((now-since)/int64(pullAfter))%len(cands)]
		ask(who.Addr).Partitions = append(ask(who.Addr).Partitions, uint32(p))
		r.log.Debug("partition: pulling", "partition", p, "from", who.Name, "waited", time.Duration(now-since))
	}
	r.askAll(ctx, asks)
}

// askTimeout bounds one pull's ask: a connection that went through a
// silent cut may sit in TCP's retransmission back-off for seconds after
// the heal, and the next pull redials it.
const askTimeout = 2 * pullAfter

// askAll sends the asks at once, each bounded by askTimeout, and waits
// for them. One after the other, an ask on a connection still backing
// off after a heal held up the asks behind it: a 3/2 split's minority
// asked for the copies its claims waited for 1.6 s after it regained the
// quorum.
func (r *Replicator) askAll(ctx context.Context, asks map[string]*proto.SyncRequest) {
	var wg sync.WaitGroup
	for addr, req := range asks {
		wg.Go(func() {
			actx, cancel := context.WithTimeout(ctx, askTimeout)
			defer cancel()
			if err := r.ask(actx, addr, req); err != nil {
				r.log.Debug("partition: pull", "from", addr, "partitions", len(req.Partitions), "handoffs", len(req.Handoffs), "relays", len(req.Relays), "copies", len(req.Copies), "err", err)
			}
		})
	}
	wg.Wait()
}

// askForClaimed asks for copies of partition p, which this node claimed
// without any holder's copy, when that is due: its current co-owners
// each time (once the link to them heals, a current one answers with its
// Done marker, which ends the claim, and strict caps are served again),
// and one other possible holder in turn. Claims are asked for at once
// after a ring change and then after 1, 2, 4 ... up to 16 s, so a long
// cut costs few transfers (an answer without Done still carries the
// sender's states, which merge).
func (r *Replicator) askForClaimed(p int, cur, prev *ring.Ring, now int64, ask func(string) *proto.SyncRequest) {
	part := &r.parts[p]
	if now < part.claimAsk.Load() || cur.Rank(p, r.cfg.Name) < 0 {
		return
	}
	if !r.holdsQuorum(cur) {
		// A copy sent now could miss grants the old ring's primary
		// still makes: ask once this node holds the quorum (then no
		// other node grants strict writes on p, rule 2).
		part.claimAsk.Store(0)
		return
	}
	n := part.claimAsks.Add(1) - 1
	part.claimAsk.Store(now + int64(pullAfter)<<min(n, 4))
	r.startCopies(p, cur.Epoch())
	if r.collectable(cur) {
		// Every member that ever could hold a grant is in the ring: the
		// union of every member's copy holds every grant. Ask each for
		// whatever it holds.
		for _, m := range cur.Members() {
			if m.Name != r.cfg.Name {
				ask(m.Addr).Copies = append(ask(m.Addr).Copies, uint32(p))
			}
		}
		r.endClaimIfCopied(p)
		return
	}
	// A member is failed: only a current copy ends the claim. Ask the
	// co-owners, and one other possible holder in turn.
	asked := map[string]bool{r.cfg.Name: true}
	for _, name := range names(cur, p) {
		if i, ok := cur.Find(name); ok && !asked[name] {
			asked[name] = true
			ask(cur.Member(i).Addr).Copies = append(ask(cur.Member(i).Addr).Copies, uint32(p))
		}
	}
	var others []ring.Member
	for _, m := range holders(prev, cur, p, r.cfg.Name) {
		if !asked[m.Name] {
			others = append(others, m)
		}
	}
	if len(others) > 0 {
		m := others[int(n)%len(others)]
		ask(m.Addr).Copies = append(ask(m.Addr).Copies, uint32(p))
	}
}

// holders lists the members that may hold partition p, most likely
// first: its previous owners, its current owners, then everyone else.
func holders(prev, cur *ring.Ring, p int, self string) []ring.Member {
	var out []ring.Member
	seen := map[string]bool{self: true}
	add := func(name string) {
		if seen[name] {
			return
		}
		seen[name] = true
		if i, ok := cur.Find(name); ok {
			out = append(out, cur.Member(i))
		}
	}
	for _, name := range names(prev, p) {
		add(name)
	}
	for _, name := range names(cur, p) {
		add(name)
	}
	rest := append([]ring.Member(nil), cur.Members()...)
	sort.Slice(rest, func(i, j int) bool { return rest[i].Name < rest[j].Name })
	for _, m := range rest {
		add(m.Name)
	}
	return out
}

// ask sends one SyncRequest and waits for its answer.
func (r *Replicator) ask(ctx context.Context, addr string, req *proto.SyncRequest) error {
	var res proto.SyncResult
	return r.peers.Call(ctx, addr, req, &res)
}

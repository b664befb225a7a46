package gossip

import (
	"bytes"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/fcap-io/fcap/ring"
)

// Failed members. memberlist forgets a node it declared dead; fcap does
// not. A member that stopped answering without leaving (killed, cut off
// by a partition, paused) stays in the member set as failed until it
// comes back, or an operator forgets it (fcapctl forget). A member that
// left is gone at once: one whose last metadata said Leaving (a drain;
// Membership.Leave gossips Leaving before it leaves). memberlist's own
// StateLeft is not visible to its event delegate (NotifyLeave gets a
// Node whose State field memberlist never updates).
//
// The member set (live members plus failed ones) is what a strict
// majority is counted against (node/quorum): a node cut off from the
// others must not shrink the set it counts, or a lone node would be a
// majority of one.
//
// The set is agreed through gossip, not guessed: each node pushes its
// failed members and its tombstones (members that left or were
// forgotten) with memberlist's push-pull (LocalState, MergeRemoteState),
// so a node that joins during a partition learns of the members the
// others are missing, and a forget reaches every node.

// FailedMember is a member that vanished without leaving.
type FailedMember struct {
	// Name is the member's stable node name.
	Name string `msgpack:"n"`
	// Addr is the data-plane address it last advertised.
	Addr string `msgpack:"a"`
	// GossipAddr is its last gossip address.
	GossipAddr string `msgpack:"g"`
	// Incarnation is the incarnation (process start, Unix ns) that failed.
	Incarnation int64 `msgpack:"i"`
	// Since is when this node first counted it failed.
	Since time.Time `msgpack:"s"`

	// dialable says this node took GossipAddr from the member's own
	// gossip when it found it failed (lost), not from another node's
	// push-pull: only such an address is dialed by the reconnect loop,
	// so no member can make every node dial an address it names.
	// Unexported, so never pushed.
	dialable bool
}

// tombstone says a member's incarnation left or was forgotten: a failed
// entry for it, or any older incarnation, gossiped by a node that missed
// the news, is not taken back in.
type tombstone struct {
	Name        string    `msgpack:"n"`
	Incarnation int64     `msgpack:"i"`
	At          time.Time `msgpack:"t"`
	Forgotten   bool      `msgpack:"f"` // by an operator; otherwise it left
}

// pushState is what a node pushes to another in memberlist's push-pull.
type pushState struct {
	Failed     []FailedMember `msgpack:"f"`
	Tombstones []tombstone    `msgpack:"t"`
	// Retired are the peer regions an operator retired (retired.go);
	// a node of an older version ignores the field.
	Retired []RetiredRegion `msgpack:"r,omitempty"`
}

// Bounds on what a push-pull may carry: a hostile or corrupt state must
// not grow a node's memory without bound.
const (
	maxFailed     = 1024
	maxTombstones = 4096
	maxNameLen    = 256
	maxStateBytes = 1 << 20
)

// lost records a node memberlist found dead or gone (with memberlist's
// node lock held): a node that left is dropped; one that died stays,
// failed.
func (m *Membership) lost(n *memberlist.Node) {
	mem, err := ring.UnmarshalMeta(n.Name, n.Meta)
	left := err == nil && mem.State == ring.Leaving
	gossipAddr := netip.AddrPortFrom(addrOf(n.Addr), n.Port).String()
	now := time.Now()
	m.viewMu.Lock()
	delete(m.view, n.Name)
	if left {
		delete(m.failed, n.Name)
		m.tombLocked(tombstone{Name: n.Name, Incarnation: mem.Incarnation, At: now})
	} else if !m.buriedLocked(n.Name, mem.Incarnation) {
		f, ok := m.failed[n.Name]
		if !ok || f.Incarnation != mem.Incarnation {
			f = FailedMember{Name: n.Name, Incarnation: mem.Incarnation, Since: now}
		}
		f.Addr, f.GossipAddr, f.dialable = mem.Addr, gossipAddr, true
		m.failed[n.Name] = f
	}
	m.viewMu.Unlock()
	m.markDirty()
}

// tombLocked records t, keeping the newest incarnation per name and at
// most maxTombstones (the oldest go first). viewMu must be held.
func (m *Membership) tombLocked(t tombstone) {
	if old, ok := m.tombs[t.Name]; ok && old.Incarnation > t.Incarnation {
		return
	}
	m.tombs[t.Name] = t
	if len(m.tombs) <= maxTombstones {
		return
	}
	oldest := ""
	for name, x := range m.tombs {
		if oldest == "" || x.At.Before(m.tombs[oldest].At) {
			oldest = name
		}
	}
	delete(m.tombs, oldest)
}

// buriedLocked reports whether name's incarnation inc left or was
// forgotten. viewMu must be held.
func (m *Membership) buriedLocked(name string, inc int64) bool {
	t, ok := m.tombs[name]
	return ok && inc <= t.Incarnation
}

// Failed returns the failed members, oldest failure first.
func (m *Membership) Failed() []FailedMember {
	m.viewMu.Lock()
	out := make([]FailedMember, 0, len(m.failed))
	for _, f := range m.failed {
		out = append(out, f)
	}
	m.viewMu.Unlock()
	slices.SortFunc(out, func(a, b FailedMember) int {
		if c := a.Since.Compare(b.Since); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

// Departure is a member that is gone from the member set: it left (a
// drain, or a graceful stop) or, failed, was forgotten by an operator.
type Departure struct {
	// Name is the member's node name.
	Name string
	// At is when this node learnt of it.
	At time.Time
	// Forgotten says an operator forgot it (fcapctl forget); otherwise
	// it left.
	Forgotten bool
}

// Departed returns the members that left or were forgotten and have not
// come back since, newest first, at most max (0: all this node keeps,
// up to maxTombstones).
func (m *Membership) Departed(max int) []Departure {
	m.viewMu.Lock()
	out := make([]Departure, 0, len(m.tombs))
	for name, t := range m.tombs {
		if _, alive := m.view[name]; alive {
			continue // back, as a new incarnation
		}
		out = append(out, Departure{Name: name, At: t.At, Forgotten: t.Forgotten})
	}
	m.viewMu.Unlock()
	slices.SortFunc(out, func(a, b Departure) int {
		if c := b.At.Compare(a.At); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	if max > 0 && len(out) > max {
		out = out[:max]
	}
	return out
}

// NumFailed returns how many members are failed.
func (m *Membership) NumFailed() int {
	m.viewMu.Lock()
	defer m.viewMu.Unlock()
	return len(m.failed)
}

// OutsideRing counts the members of the member set that ring r does not
// hold: failed members, and live members r does not show yet. A member
// back from a cut leaves the failed set when gossip sees it alive, but
// enters the ring only at the next ring change, which waits
// Config.Coalesce for others; counted as neither meanwhile, it shrank
// the member set, and a minority's quorum formed on its old ring (the
// partition suite's 3/2 split: n5 held a majority of 3 with n4 at the
// heal and granted a viewer its ninth). A failed member the ring still
// holds (the change that drops it waits too) counts once.
func (m *Membership) OutsideRing(r *ring.Ring) int {
	m.viewMu.Lock()
	defer m.viewMu.Unlock()
	n := 0
	for name := range m.failed {
		if _, in := r.Find(name); !in {
			n++
		}
	}
	for name := range m.view {
		if _, failed := m.failed[name]; failed {
			continue
		}
		if _, in := r.Find(name); !in {
			n++
		}
	}
	return n
}

// Forget removes a failed member from the member set: an operator's
// word that it will not come back (or, if it does, as a new member). It
// refuses a member that is alive (drain it instead), this node, and a
// name that is not failed here. The forget spreads with gossip.
func (m *Membership) Forget(name string) error {
	if name == m.Self().Name {
		return fmt.Errorf("%w: %q is this node", ErrNotFailed, name)
	}
	m.viewMu.Lock()
	if _, alive := m.view[name]; alive {
		m.viewMu.Unlock()
		return fmt.Errorf("%w: %q is alive and reachable from this node; drain it instead", ErrReachable, name)
	}
	f, ok := m.failed[name]
	if !ok {
		m.viewMu.Unlock()
		return fmt.Errorf("%w: no failed member named %q", ErrNotFailed, name)
	}
	delete(m.failed, name)
	m.tombLocked(tombstone{Name: name, Incarnation: f.Incarnation, At: time.Now(), Forgotten: true})
	m.viewMu.Unlock()
	m.log.Warn("member forgotten by an operator: it no longer counts toward the majority", "member", name, "failed_since", f.Since)
	m.markDirty()
	if m.cfg.OnForget != nil {
		m.cfg.OnForget(name)
	}
	return nil
}

// localState encodes the failed members and tombstones for a push-pull.
func (m *Membership) localState() []byte {
	m.viewMu.Lock()
	st := pushState{Failed: make([]FailedMember, 0, len(m.failed)), Tombstones: make([]tombstone, 0, len(m.tombs))}
	for _, f := range m.failed {
		st.Failed = append(st.Failed, f)
	}
	for _, t := range m.tombs {
		st.Tombstones = append(st.Tombstones, t)
	}
	for _, r := range m.retired {
		st.Retired = append(st.Retired, r)
	}
	m.viewMu.Unlock()
	if len(st.Failed) == 0 && len(st.Tombstones) == 0 && len(st.Retired) == 0 {
		return nil
	}
	b, err := msgpack.Marshal(&st)
	if err != nil || len(b) > maxStateBytes {
		return nil
	}
	return b
}

// mergeState takes in another node's failed members and tombstones. A
// member alive here stays alive: this node's own view of who answers
// wins. What does not decode, or is out of bounds, is ignored.
func (m *Membership) mergeState(buf []byte) error {
	if len(buf) == 0 {
		return nil
	}
	if len(buf) > maxStateBytes {
		return fmt.Errorf("gossip: push-pull state of %d bytes, more than %d", len(buf), maxStateBytes)
	}
	var st pushState
	if err := msgpack.NewDecoder(bytes.NewReader(buf)).Decode(&st); err != nil {
		return fmt.Errorf("gossip: push-pull state does not decode: %w", err)
	}
	if len(st.Failed) > maxFailed || len(st.Tombstones) > maxTombstones || len(st.Retired) > maxRetired {
		return fmt.Errorf("gossip: push-pull state with %d failed members and %d tombstones, more than %d and %d",
			len(st.Failed), len(st.Tombstones), maxFailed, maxTombstones)
	}
	self := m.Self().Name
	changed := false
	var forgotten []string
	m.viewMu.Lock()
	for _, t := range st.Tombstones {
		if t.Name == "" || len(t.Name) > maxNameLen || t.Name == self {
			continue
		}
		if _, alive := m.view[t.Name]; alive {
			continue
		}
		m.tombLocked(t)
		if f, ok := m.failed[t.Name]; ok && m.buriedLocked(t.Name, f.Incarnation) {
			delete(m.failed, t.Name)
			changed = true
			forgotten = append(forgotten, t.Name)
		}
	}
	for _, f := range st.Failed {
		if f.Name == "" || len(f.Name) > maxNameLen || len(f.Addr) > maxNameLen || len(f.GossipAddr) > maxNameLen || f.Name == self {
			continue
		}
		if _, alive := m.view[f.Name]; alive || m.buriedLocked(f.Name, f.Incarnation) {
			continue
		}
		if old, ok := m.failed[f.Name]; ok && old.Incarnation >= f.Incarnation {
			continue
		}
		if len(m.failed) >= maxFailed {
			break
		}
		m.failed[f.Name] = f
		changed = true
	}
	m.viewMu.Unlock()
	if changed {
		m.markDirty()
	}
	if m.cfg.OnForget != nil {
		for _, name := range forgotten {
			m.cfg.OnForget(name)
		}
	}
	m.mergeRetired(st.Retired)
	return nil
}

package gossip

import (
	"fmt"
	"net"
	"sort"
	"strconv"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/fcap-io/fcap/ring"
)

// Formation: what an operator needs to see while a node looks for its
// cluster. A typo in the seeds must not pass silently (the node would sit
// alone), and a second node started with a name already taken must not
// linger beside the first, each gossiping the other's address.

// joinWarnEvery bounds how often a node still alone repeats its warning
// that no seed answered.
const joinWarnEvery = 30 * time.Second

// SeedFailure is the last failed join of one seed.
type SeedFailure struct {
	Seed string
	Err  string
	At   time.Time
}

// JoinStatus says whether the node has joined other members, and why the
// seeds that failed did (the failures of the last round that reached
// none, or of seeds that keep failing since).
type JoinStatus struct {
	// Seeds is how many seeds the node was given.
	Seeds int
	// Joined is true once memberlist knows another live node.
	Joined bool
	// Failures are the seeds whose last join failed, by seed.
	Failures []SeedFailure
}

// Summary is one line for /readyz, fcapctl status and logs: "" when
// the node has no seeds or has joined.
func (s JoinStatus) Summary() string {
	if s.Seeds == 0 || s.Joined {
		return ""
	}
	if len(s.Failures) == 0 {
		return "not joined yet: no seed has answered"
	}
	msg := "not joined: no seed answered"
	for i, f := range s.Failures {
		if i == 3 {
			msg += fmt.Sprintf("; and %d more", len(s.Failures)-i)
			break
		}
		msg += fmt.Sprintf("; %s: %s", f.Seed, f.Err)
	}
	return msg
}

// JoinStatus reports the node's joins.
func (m *Membership) JoinStatus() JoinStatus {
	st := JoinStatus{Seeds: len(m.cfg.Seeds), Joined: m.list.NumMembers() > 1}
	m.joinMu.Lock()
	for _, f := range m.joinFailures {
		st.Failures = append(st.Failures, f)
	}
	m.joinMu.Unlock()
	sort.Slice(st.Failures, func(i, j int) bool { return st.Failures[i].Seed < st.Failures[j].Seed })
	return st
}

// joined records that seed answered.
func (m *Membership) joined(seed string) {
	m.joinMu.Lock()
	delete(m.joinFailures, seed)
	m.joinMu.Unlock()
}

// joinFailed records why seed did not answer.
func (m *Membership) joinFailed(seed string, err error) {
	m.joinMu.Lock()
	m.joinFailures[seed] = SeedFailure{Seed: seed, Err: err.Error(), At: time.Now()}
	m.joinMu.Unlock()
}

// quietRounds is how many rounds in a row may reach no seed before the
// node warns: nodes started together often miss each other's first
// round.
const quietRounds = 3

// warnAlone logs, from the quietRounds-th round in a row that reached no
// seed and then at most every joinWarnEvery, each seed's reason.
func (m *Membership) warnAlone(rounds int) {
	if rounds < quietRounds {
		return
	}
	m.joinMu.Lock()
	due := time.Since(m.lastJoinWarn) >= joinWarnEvery
	if due {
		m.lastJoinWarn = time.Now()
	}
	m.joinMu.Unlock()
	if !due {
		return
	}
	st := m.JoinStatus()
	for _, f := range st.Failures {
		m.log.Warn("join failed: seed did not answer", "seed", f.Seed, "reason", f.Err)
	}
	m.log.Warn("not part of any cluster: no seed answered; retrying. Check --join; a node given seeds never forms a cluster alone unless started with --bootstrap",
		"seeds", m.cfg.Seeds)
}

// NameTaken returns a channel that receives, once, the conflict found
// while this node was still Joining: a live member of the cluster it
// joined already has its name. A node already Active only logs a
// conflict (it holds the name; the newcomer is the one to stop).
func (m *Membership) NameTaken() <-chan *ErrNameTaken { return m.nameTaken }

// NotifyConflict is memberlist's ConflictDelegate: another node claims
// a name memberlist already knows at a different address. Runs on a
// memberlist goroutine; it never blocks.
func (h hooks) NotifyConflict(existing, other *memberlist.Node) {
	m := h.m
	self := m.Self()
	if existing.Name != self.Name {
		return // two other nodes conflict: theirs to sort out
	}
	addr := net.JoinHostPort(other.Addr.String(), strconv.Itoa(int(other.Port)))
	if self.State != ring.Joining {
		m.log.Error("another node claims this node's name; it should stop", "name", self.Name, "other", addr)
		return
	}
	select {
	case m.nameTaken <- &ErrNameTaken{Name: self.Name, Addr: addr}:
	default: // already reported
	}
}

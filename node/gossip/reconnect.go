package gossip

import (
	"math/rand/v2"
	"net"
	"time"
)

// Reconnecting to failed members.
//
// memberlist probes only the members it holds alive, and push-pulls only
// with them. When a cut heals, two nodes that declared each other dead
// may not find out: each is alive to itself, and the other ignores its
// "alive" at the incarnation it was declared dead at until it refutes,
// which it does only once some node tells it of its death. A node cut
// off alone learns it by joining its seeds, but not always: in the
// partition suite's split-kill9 the restarted majority node reached the
// cut-off node first (it had never seen it die, so told it nothing),
// and the other majority node learned the heal only from its next
// reconcile round, 6.8 s later. Serf reconnects to its failed members for
// this reason (every 30 s); fcap does it every ReconnectInterval, since
// a minority's strict caps wait on it.
//
// Each round picks up to reconnectFanout failed members at random (no
// try already under way for them, and an address this node saw the
// member gossip from itself: one learned from another node's push-pull
// is never dialed, so a member cannot make the others dial an address
// it names) and, for each on its own goroutine,
// dials its last gossip address for at most ReconnectInterval: a
// silent cut costs one SYN, a dead node's closed port a reset. A dial
// that connects is followed by two push-pulls (memberlist's Join): the
// first tells each side the other declared it dead, and each refutes
// with a higher incarnation; the second carries the refutations, and each
// side takes the other back in.

// reconnectFanout bounds the failed members one round tries: a cluster
// with many failed members tries each every few rounds.
const reconnectFanout = 4

// reconnectLoop tries failed members again until Leave or Shutdown.
func (m *Membership) reconnectLoop() {
	defer m.wg.Done()
	i := m.cfg.ReconnectInterval
	for {
		if !m.wait(i*3/4+rand.N(i/2+1), nil) {
			return
		}
		for _, f := range m.reconnectTargets(reconnectFanout) {
			m.wg.Add(1)
			go m.reconnect(f)
		}
	}
}

// reconnectTargets picks up to n failed members at random that have a
// gossip address this node recorded itself (FailedMember.dialable) and
// no try under way, and marks them under way.
func (m *Membership) reconnectTargets(n int) []FailedMember {
	m.viewMu.Lock()
	defer m.viewMu.Unlock()
	var all []FailedMember
	for name, f := range m.failed {
		if f.dialable && f.GossipAddr != "" && !m.reconnecting[name] {
			all = append(all, f)
		}
	}
	rand.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	all = all[:min(n, len(all))]
	for _, f := range all {
		m.reconnecting[f.Name] = true
	}
	return all
}

// reconnect tries to reach the failed member f once.
func (m *Membership) reconnect(f FailedMember) {
	defer m.wg.Done()
	defer func() {
		m.viewMu.Lock()
		delete(m.reconnecting, f.Name)
		m.viewMu.Unlock()
	}()
	conn, err := m.dial(f.GossipAddr, m.cfg.ReconnectInterval)
	if err != nil {
		return // still out of reach: the usual case, not worth a log line
	}
	conn.Close()
	for range 2 {
		select {
		case <-m.stop:
			return
		case <-m.left:
			return
		default:
		}
		if _, err := m.list.Join([]string{f.GossipAddr}); err != nil {
			m.log.Debug("ring: a failed member's address answered, but the push-pull did not", "node", f.Name, "addr", f.GossipAddr, "err", err)
			return
		}
	}
	m.log.Info("ring: reached a failed member again", "node", f.Name, "addr", f.GossipAddr, "failed_for", time.Since(f.Since).Round(time.Millisecond))
}

// dial connects to a gossip address through memberlist's transport when
// the config gives one (so a fault-injecting transport cuts it too).
func (m *Membership) dial(addr string, timeout time.Duration) (net.Conn, error) {
	if t := m.cfg.Memberlist.Transport; t != nil {
		return t.DialTimeout(addr, timeout)
	}
	return net.DialTimeout("tcp", addr, timeout)
}

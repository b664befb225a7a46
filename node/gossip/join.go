package gossip

import (
	"context"
	"math/rand/v2"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// Joining.
//
// Nodes started together, each listing the others as seeds, must form one
// cluster, and clusters that formed apart must merge (peers started
// together splitting into separate clusters is a known failure of
// gubernator and olric). So:
//
//   - while memberlist knows no node but us, join every seed that is not
//     us, one at a time, with exponential backoff and jitter between
//     rounds until some other node is known: a round that reached only
//     ourselves does not count;
//   - once joined, every ReconcileInterval (jittered), join the seeds whose
//     addresses are not current members': a seed in another cluster is
//     never one of ours, and the join merges the two;
//   - a rebuild that finds us alone wakes the loop at once.
//
// A join is a memberlist push-pull, so joining a node already in our
// cluster is harmless; recognizing members and ourselves only saves work.

// seedLookupTimeout bounds one DNS lookup of a seed's host.
const seedLookupTimeout = 2 * time.Second

// joinLoop joins seeds until Leave or Shutdown (which also cancels ctx).
func (m *Membership) joinLoop(ctx context.Context) {
	defer m.wg.Done()
	if len(m.cfg.Seeds) == 0 {
		return
	}
	var backoff, wait time.Duration
	failed := 0 // rounds in a row that reached no seed
	for {
		if !m.sleep(wait) {
			return
		}
		if m.list.NumMembers() <= 1 {
			m.joinSeeds(m.seeds(ctx, false))
			if m.list.NumMembers() <= 1 {
				backoff = nextBackoff(backoff, m.cfg.JoinBackoffMin, m.cfg.JoinBackoffMax)
				wait = backoff/2 + rand.N(backoff/2+1)
				m.log.Debug("ring: no seed answered; retrying", "in", wait)
				failed++
				m.warnAlone(failed)
				continue
			}
		} else if missing := m.seeds(ctx, true); len(missing) > 0 {
			m.joinSeeds(missing)
		}
		backoff, failed = 0, 0
		i := m.cfg.ReconcileInterval
		wait = i*3/4 + rand.N(i/2+1)
	}
}

// nextBackoff doubles d within [lo, hi].
func nextBackoff(d, lo, hi time.Duration) time.Duration {
	return min(max(2*d, lo), hi)
}

// sleep waits for d, or less if a rebuild found us alone. It returns false
// once we leave or shut down.
func (m *Membership) sleep(d time.Duration) bool { return m.wait(d, m.kick) }

// wait waits for d, or less if kick (which may be nil) fires. It returns
// false once we leave or shut down.
func (m *Membership) wait(d time.Duration, kick <-chan struct{}) bool {
	select {
	case <-m.stop:
		return false
	case <-m.left:
		return false
	default:
	}
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-m.stop:
		return false
	case <-m.left:
		return false
	case <-kick:
		return true
	case <-t.C:
		return true
	}
}

// kickJoin wakes the join loop without blocking.
func (m *Membership) kickJoin() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// joinSeeds joins the seeds one at a time, stopping early on Leave or
// Shutdown, and returns how many answered.
func (m *Membership) joinSeeds(seeds []string) int {
	joined := 0
	for _, s := range seeds {
		select {
		case <-m.stop:
			return joined
		case <-m.left:
			return joined
		default:
		}
		if _, err := m.list.Join([]string{s}); err != nil {
			m.log.Debug("ring: seed did not answer", "seed", s, "err", err)
			m.joinFailed(s, err)
			continue
		}
		m.joined(s)
		joined++
		m.log.Debug("ring: joined seed", "seed", s, "members", m.list.NumMembers())
	}
	return joined
}

// seeds returns the seeds that are not us; with missing, only those with
// an address that is neither us nor a current member's. A seed whose host
// does not resolve counts as missing (memberlist's Join reports why).
func (m *Membership) seeds(ctx context.Context, missing bool) []string {
	self := m.gossip
	bind, _ := netip.ParseAddr(m.cfg.Memberlist.BindAddr)
	members := make(map[netip.AddrPort]bool)
	if missing {
		for _, n := range m.snapshot() {
			members[n.addr] = true
		}
	}
	var out []string
	for _, s := range m.cfg.Seeds {
		addrs := resolveSeed(ctx, s, int(self.Port()))
		others, absent := 0, 0
		for _, a := range addrs {
			if isSelf(a, self, bind) {
				continue
			}
			others++
			if !members[a] {
				absent++
			}
		}
		switch {
		case len(addrs) == 0:
			out = append(out, s)
		case others == 0:
			// Only us: never join.
		case !missing || absent > 0:
			out = append(out, s)
		}
	}
	return out
}

// isSelf reports whether a is our gossip address: our advertised address,
// or, when we bound a loopback or unspecified address, a loopback or
// unspecified address with our port.
func isSelf(a, self netip.AddrPort, bind netip.Addr) bool {
	if a == self {
		return true
	}
	if a.Port() != self.Port() {
		return false
	}
	if a.Addr() == bind {
		return true
	}
	local := !bind.IsValid() || bind.IsUnspecified() || bind.IsLoopback()
	return local && (a.Addr().IsLoopback() || a.Addr().IsUnspecified())
}

// resolveSeed returns the addresses a seed names, as memberlist's Join
// reads it ("[name/]host[:port]", port defaulting to ours), or none if it
// does not resolve.
func resolveSeed(ctx context.Context, seed string, defaultPort int) []netip.AddrPort {
	if i := strings.Index(seed, "/"); i >= 0 {
		seed = seed[i+1:]
	}
	host, portStr, err := net.SplitHostPort(seed)
	if err != nil {
		host, portStr = strings.Trim(seed, "[]"), strconv.Itoa(defaultPort)
	}
	port, err := strconv.ParseUint(portStr, 10, 16)
	if err != nil {
		return nil
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return []netip.AddrPort{netip.AddrPortFrom(ip.Unmap(), uint16(port))}
	}
	ctx, cancel := context.WithTimeout(ctx, seedLookupTimeout)
	defer cancel()
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil
	}
	out := make([]netip.AddrPort, len(ips))
	for i, ip := range ips {
		out[i] = netip.AddrPortFrom(ip.Unmap(), uint16(port))
	}
	return out
}

// addrOf converts a memberlist address to a netip.Addr (invalid if it is
// not an IP).
func addrOf(ip net.IP) netip.Addr {
	a, _ := netip.AddrFromSlice(ip)
	return a.Unmap()
}

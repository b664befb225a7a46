package proto

import "fmt"

// NoOwner marks a replica slot of Topology.Owners that no member holds.
const NoOwner = 0xFFFF

// Ping asks a node whether it is alive. It is answered with a Pong.
// Clients send it empty. A node asking a peer for the quorum of strict
// writes (node/quorum) names itself and the epoch of its ring: the peer
// then confirms that epoch only while it promised no other (Pong.Epoch 0
// when it withholds).
//
// Wire: [] from a client, [from str, epoch uint] from a node.
type Ping struct {
	// From is the asking node's name; empty from a client.
	From string
	// FromEpoch is the asking node's ring epoch (with From).
	FromEpoch uint64
}

// Type returns TypePing.
func (*Ping) Type() Type { return TypePing }

func (m *Ping) encode(e *encoder) {
	if m.From == "" {
		e.array(0)
		return
	}
	e.array(2)
	e.str(m.From)
	e.uint(m.FromEpoch)
}

func (m *Ping) decode(d *decoder) {
	extra := d.array(0)
	m.From, m.FromEpoch = "", 0
	if extra >= 2 {
		m.From, m.FromEpoch = d.str(), d.uint()
		extra -= 2
	}
	d.end(extra)
}

// Pong answers a Ping.
//
// Wire: [epoch uint, name str] or [epoch uint, name str, absent bool].
type Pong struct {
	// Epoch is the epoch of the node's ring; a client whose topology is
	// older asks for the new one.
	Epoch uint64
	// Name is the node's stable name in the membership.
	Name string
	// Absent, to a node's Ping (Ping.From), says this node recently routed
	// by a ring without the asker: others may have taken over the asker's
	// partitions meanwhile, so an asker whose quorum lapsed must fetch
	// their copies before it grants strict writes again (node/quorum).
	Absent bool
}

// Type returns TypePong.
func (*Pong) Type() Type { return TypePong }

func (m *Pong) encode(e *encoder) {
	if !m.Absent {
		e.array(2)
		e.uint(m.Epoch)
		e.str(m.Name)
		return
	}
	e.array(3)
	e.uint(m.Epoch)
	e.str(m.Name)
	e.bool(true)
}

func (m *Pong) decode(d *decoder) {
	extra := d.array(2)
	m.Epoch = d.uint()
	m.Name = d.str()
	m.Absent = false
	if extra >= 1 {
		m.Absent = d.bool()
		extra--
	}
	d.end(extra)
}

// TopologyRequest asks a node for its view of the ring. It is answered
// with a Topology. A peer region's link names its region and the sorted
// set of regions it splits strict caps among: a node that splits among
// another set refuses it (BadRequest), so the link stays down until the
// configurations agree (escrow: the shares would not sum to the limits).
//
// Wire: [] from a client; [region str, regions [str...]] from a region
// link (both fields added after the empty form).
type TopologyRequest struct {
	// Region is the asking node's region; empty from a client.
	Region string
	// Regions are the regions the asking node splits strict caps among,
	// its own included, sorted; at most MaxPeerRegions+1.
	Regions []string
}

// Type returns TypeTopologyRequest.
func (*TopologyRequest) Type() Type { return TypeTopologyRequest }

func (m *TopologyRequest) encode(e *encoder) {
	if m.Region == "" && len(m.Regions) == 0 {
		e.array(0)
		return
	}
	e.array(2)
	e.regionNames(m.Region, m.Regions)
}

func (m *TopologyRequest) decode(d *decoder) {
	extra := d.array(0)
	m.Region, m.Regions = "", m.Regions[:0]
	if extra >= 2 { // optional: a region link's
		m.Region, m.Regions = d.regionNames(m.Regions)
		extra -= 2
	}
	d.end(extra)
}

// Member is one node of the cluster as a Topology carries it.
//
// Wire: [name str, addr str, http_addr str, state uint8, incarnation int].
type Member struct {
	// Name is the node's stable name; it places the node on the ring.
	Name string
	// Addr is the host:port of the node's data plane (this protocol).
	Addr string
	// HTTPAddr is the host:port of the node's HTTP endpoint (metrics,
	// admin), or empty.
	HTTPAddr string
	// State is the node's membership state (joining, active, leaving),
	// as the ring package numbers it; proto carries it without meaning.
	State uint8
	// Incarnation is the membership incarnation the state comes from;
	// a higher one is newer.
	Incarnation int64
}

func (e *encoder) member(m *Member) {
	e.array(5)
	e.str(m.Name)
	e.str(m.Addr)
	e.str(m.HTTPAddr)
	e.uint(uint64(m.State))
	e.int(m.Incarnation)
}

func (d *decoder) member(m *Member) {
	extra := d.array(5)
	m.Name = d.str()
	m.Addr = d.str()
	m.HTTPAddr = d.str()
	m.State = uint8(d.uintN(0xFF))
	m.Incarnation = d.int()
	d.end(extra)
}

// Topology is a node's view of the ring: the members and, for each
// partition, the members that own it. Partitions of a viewer's key and
// replica order are the ring package's business; proto only checks that
// the table has the shape it claims, so a decoded Topology is always
// safe to index: len(Owners) == Partitions*Replicas, and every owner is
// an index into Members or NoOwner.
//
// Wire: [epoch uint, partitions int, replicas int, members [member...],
// owners bin] where owners is 2 bytes per entry, little-endian.
type Topology struct {
	// Epoch numbers the ring: it grows with every membership change.
	Epoch uint64
	// Partitions is the ring's partition count.
	Partitions int
	// Replicas is the number of owners per partition (owner, then
	// backups).
	Replicas int
	// Members are the nodes of the ring. At most MaxMembers.
	Members []Member
	// Owners holds Partitions*Replicas entries: partition p's owners are
	// Owners[p*Replicas : (p+1)*Replicas], the primary first. Each is an
	// index into Members, or NoOwner (0xFFFF) for a slot no member
	// holds.
	Owners []uint16
}

// Type returns TypeTopology.
func (*Topology) Type() Type { return TypeTopology }

func (m *Topology) encode(e *encoder) {
	if err := m.checkShape(); err != nil {
		e.fail(err)
	}
	e.array(5)
	e.uint(m.Epoch)
	e.int(int64(m.Partitions))
	e.int(int64(m.Replicas))
	e.list("members", len(m.Members), MaxMembers)
	for i := range m.Members {
		e.member(&m.Members[i])
	}
	e.uint16s(m.Owners)
}

func (m *Topology) decode(d *decoder) {
	extra := d.array(5)
	m.Epoch = d.uint()
	m.Partitions = int(d.int())
	m.Replicas = int(d.int())
	m.Members = resize(m.Members, d.list("members", MaxMembers, minMemberSize))
	for i := range m.Members {
		d.member(&m.Members[i])
	}
	m.Owners = d.uint16s(m.Owners, noLimit)
	d.end(extra)
	if d.err == nil {
		d.fail(m.checkShape())
	}
}

// checkShape checks the owners table against the counts.
func (m *Topology) checkShape() error {
	p, r, n := m.Partitions, m.Replicas, len(m.Owners)
	if p < 0 || r < 0 || (r == 0 && n != 0) || (r != 0 && (n%r != 0 || n/r != p)) {
		return fmt.Errorf("topology: %d owners for %d partitions of %d replicas", n, p, r)
	}
	for i, o := range m.Owners {
		if o != NoOwner && int(o) >= len(m.Members) {
			return fmt.Errorf("topology: owner %d is member %d of %d", i, o, len(m.Members))
		}
	}
	return nil
}

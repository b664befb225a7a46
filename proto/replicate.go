package proto

// MaxReplicateBytes bounds the viewer states of one Replicate message. A
// node sends bigger transfers in many messages (and its MaxFrame must be
// larger than this).
const MaxReplicateBytes = 512 << 10

// Replicate carries viewer states from the node that owns them to
// another owner of their partitions: ongoing replication of changed
// viewers, or the transfer of whole partitions (a join, a drain, a
// re-replication after a node died). The receiver replaces each viewer
// with the state given. It is answered with a ReplicateResult, or an
// Error (a state that does not decode changes nothing).
//
// Wire: [from str, epoch uint, high_water int, states bin, done bin,
// handoff bin] or [..., handoff bin, copied bin], where done, handoff and
// copied hold little-endian uint32 partition numbers. handoff was added
// after the first five fields, copied after the first six (sent only
// when not empty).
type Replicate struct {
	// From is the sending node's name.
	From string
	// Epoch is the sender's ring epoch.
	Epoch uint64
	// HighWater is the newest time the sender's engine has seen; the
	// receiver ages state by it too.
	HighWater int64
	// States are engine exports (engine.Engine.Export), concatenated; at
	// most MaxReplicateBytes. They alias the frame body when decoded.
	States []byte
	// Done lists the partitions whose full transfer to the receiver ends
	// with this message: every viewer of them has been sent.
	Done []uint32
	// Handoff lists the partitions the sender, their previous primary,
	// hands to the receiver, their new primary: it has stopped writing
	// them and every change it acknowledged has been sent.
	Handoff []uint32
	// Copied lists the partitions whose copy, asked for with
	// SyncRequest.Copies, the sender has sent whole with this message,
	// though it may not be current (a claimed or awaited copy): merged
	// with every other member's, it ends a claim (node/replication).
	Copied []uint32
}

// Type returns TypeReplicate.
func (*Replicate) Type() Type { return TypeReplicate }

func (m *Replicate) encode(e *encoder) {
	if len(m.Copied) == 0 {
		e.array(6)
	} else {
		e.array(7)
	}
	e.str(m.From)
	e.uint(m.Epoch)
	e.int(m.HighWater)
	if len(m.States) > MaxReplicateBytes {
		e.fail(errTooMany("state bytes", len(m.States), MaxReplicateBytes))
	}
	e.binHeader(len(m.States))
	e.buf = append(e.buf, m.States...)
	e.uint32s(m.Done)
	e.uint32s(m.Handoff)
	if len(m.Copied) > 0 {
		e.uint32s(m.Copied)
	}
}

func (m *Replicate) decode(d *decoder) {
	extra := d.array(5)
	m.From = d.str()
	m.Epoch = d.uint()
	m.HighWater = d.int()
	m.States = d.bytes(MaxReplicateBytes)
	m.Done = d.uint32s(m.Done, 1<<16)
	m.Handoff, m.Copied = m.Handoff[:0], m.Copied[:0]
	if extra > 0 {
		m.Handoff = d.uint32s(m.Handoff, 1<<16)
		extra--
	}
	if extra > 0 {
		m.Copied = d.uint32s(m.Copied, 1<<16)
		extra--
	}
	d.end(extra)
}

// ReplicateResult answers Replicate.
//
// Wire: [epoch uint, applied uint, refused uint].
type ReplicateResult struct {
	// Epoch is the receiver's ring epoch.
	Epoch uint64
	// Applied is the number of viewer states applied.
	Applied uint64
	// Refused is the number of viewer states not applied because the
	// receiver is the primary owner of their partitions and holds them:
	// the sender's ring is behind, and its state may be older.
	Refused uint64
}

// Type returns TypeReplicateResult.
func (*ReplicateResult) Type() Type { return TypeReplicateResult }

func (m *ReplicateResult) encode(e *encoder) {
	e.array(3)
	e.uint(m.Epoch)
	e.uint(m.Applied)
	e.uint(m.Refused)
}

func (m *ReplicateResult) decode(d *decoder) {
	extra := d.array(3)
	m.Epoch = d.uint()
	m.Applied = d.uint()
	m.Refused = d.uint()
	d.end(extra)
}

// StatusRequest asks a node for its Status.
//
// Wire: [].
type StatusRequest struct{}

// Type returns TypeStatusRequest.
func (*StatusRequest) Type() Type { return TypeStatusRequest }

func (*StatusRequest) encode(e *encoder) { e.array(0) }

func (*StatusRequest) decode(d *decoder) { d.end(d.array(0)) }

// Status is one node's account of itself, for operators (fcapctl status).
//
// Wire: [name str, epoch uint, state uint, viewers uint, keys uint,
// bytes uint, primaries uint, backups uint, syncing uint, handing uint,
// replication_queue uint, under_replicated uint, members uint,
// requests uint?, lag_ms uint?, join_error str?, authority bool?,
// quorum_members uint?, quorum_confirmed uint?, claimed uint?,
// failed [FailedMember]?, replicas uint?, drifting uint?,
// departed [DepartedMember]?, version str?, uptime_ms uint?,
// memory_limit uint?, recent_ms uint?, recent_requests uint?,
// recent_errors uint?, p99_ns uint?, p99_over bool?,
// regions [RegionStatus]?] (the fields after members optional: older
// nodes omit them; the eight before regions come together; regions is
// sent only when not empty).
type Status struct {
	Name  string
	Epoch uint64
	// State is the node's ring state (1 joining, 2 active, 3 leaving).
	State uint8
	// Viewers, Keys and Bytes are the engine's figures.
	Viewers, Keys, Bytes uint64
	// Primaries and Backups count the partitions it owns, by rank.
	Primaries, Backups uint64
	// Syncing counts partitions it owns but has not received yet (it
	// refuses their requests meanwhile).
	Syncing uint64
	// Handing counts partition transfers it is sending.
	Handing uint64
	// ReplicationQueue counts changed viewers not yet sent to a replica.
	ReplicationQueue uint64
	// UnderReplicated counts partitions it is primary of whose backups do
	// not all hold them yet.
	UnderReplicated uint64
	// Members is the number of members in its ring.
	Members uint64
	// Requests counts the data-plane requests it answered since it
	// started (0 from a node that does not say).
	Requests uint64
	// LagMillis is how long its oldest change not yet sent to a replica
	// has waited.
	LagMillis uint64
	// JoinError says why a node given seeds has not joined any of them
	// (each failing seed and its reason); empty once it has, or from a
	// node that does not say.
	JoinError string
	// Authority says the node holds a majority of the cluster's member
	// set and may grant strict writes (node/quorum).
	Authority bool
	// QuorumMembers is the member set a majority is counted against (ring
	// members plus failed ones); QuorumConfirmed how many of them (the
	// node included) confirmed its ring within the lease.
	QuorumMembers, QuorumConfirmed uint64
	// Claimed counts partitions it claimed without any holder's copy
	// (strict caps fail closed on them).
	Claimed uint64
	// Failed lists the members it counts as failed: vanished without
	// leaving, not yet forgotten. At most MaxMembers.
	Failed []FailedMember
	// Replicas is the ring's replica count (R); 0 from a node that does
	// not say.
	Replicas uint64
	// Drifting counts the viewers whose copies still differed from a
	// backup's after settling (two anti-entropy comparisons in a row),
	// repaired in the last round: 0 once every copy agrees.
	Drifting uint64
	// Departed lists the members that left the cluster (a drain) or were
	// forgotten, newest first, as far as the node remembers: fcapctl
	// drain tells a node already gone from a name no member had. At most
	// MaxMembers; empty from a node that does not say.
	Departed []DepartedMember
	// Version is the node's build (node/buildinfo: "v1.2.0", "devel").
	// Empty, and the fields below zero, from a node that does not say.
	Version string
	// UptimeMillis is how long the node has been running.
	UptimeMillis uint64
	// MemoryLimit is the engine's memory limit in bytes (--memory-limit;
	// 0: none): at Bytes >= MemoryLimit it refuses new counters.
	MemoryLimit uint64
	// RecentMillis is the span the recent figures below cover: about the
	// last minute (less just after a start); 0 when the node has none yet.
	RecentMillis uint64
	// RecentRequests and RecentErrors count the requests of ad servers
	// (check, allow, record, reserve, release, identity, undo, erase,
	// void) the node answered over RecentMillis, and how many of them it
	// answered with an error (bad request, capacity, internal error,
	// deadline exceeded; not "not owner", which the client retries).
	RecentRequests, RecentErrors uint64
	// P99Nanos bounds the 99th percentile of those requests' handling
	// time on the node over RecentMillis: the upper bound of the latency
	// histogram's bucket that holds it (the p99 is at most that). 0
	// without requests. P99Over says it is past the largest bound (which
	// P99Nanos then holds).
	P99Nanos uint64
	P99Over  bool
	// Regions are the node's links to its peer regions (node/region), in
	// the order they are configured; empty on a node of a single region.
	// At most MaxPeerRegions.
	Regions []RegionStatus
}

// MaxPeerRegions bounds the peer regions a Status lists.
const MaxPeerRegions = 64

// RegionStatus is a node's link to one peer region.
//
// Wire: [name str, reachable bool, lag_ms uint, queue uint, lent uint,
// borrowed uint, retired_at_ms int]; lent and borrowed were added after
// the first four fields: a body without them decodes with 0;
// retired_at_ms is there only when the region is retired.
type RegionStatus struct {
	// Name is the peer region's name.
	Name string
	// Reachable says the link's last round reached the region.
	Reachable bool
	// LagMillis is the age of the oldest change not yet acknowledged by
	// the region (0: none waits).
	LagMillis uint64
	// Queue counts the changed viewers waiting to be shipped.
	Queue uint64
	// Lent and Borrowed count the units of strict caps' shares this node
	// lent the region and borrowed from it since it started (escrow).
	Lent, Borrowed uint64
	// Retired says an operator retired the region (RetireRegion), as of
	// RetiredAtMillis (the node's clock, Unix ms): its link no longer
	// runs.
	Retired         bool
	RetiredAtMillis int64
}

// minRegionStatusSize is the smallest encoding of a RegionStatus.
const minRegionStatusSize = 5

// DepartedMember is a member gone from the member set.
//
// Wire: [name str, at_ms int, forgotten bool].
type DepartedMember struct {
	// Name is its node name.
	Name string
	// AtMillis is when the node learnt of it (Unix ms).
	AtMillis int64
	// Forgotten says an operator forgot it (it had failed); otherwise
	// it left.
	Forgotten bool
}

// minDepartedMemberSize is the smallest encoding of a DepartedMember.
const minDepartedMemberSize = 4

// FailedMember is a member a node counts as failed.
//
// Wire: [name str, addr str, since_ms int].
type FailedMember struct {
	// Name is its node name; Addr the data-plane address it last
	// advertised.
	Name, Addr string
	// SinceMillis is when the node first counted it failed (Unix ms).
	SinceMillis int64
}

// minFailedMemberSize is the smallest encoding of a FailedMember.
const minFailedMemberSize = 4

// Type returns TypeStatus.
func (*Status) Type() Type { return TypeStatus }

func (m *Status) encode(e *encoder) {
	if len(m.Regions) == 0 {
		e.array(32)
	} else {
		e.array(33)
	}
	e.str(m.Name)
	e.uint(m.Epoch)
	e.uint(uint64(m.State))
	for _, v := range []uint64{m.Viewers, m.Keys, m.Bytes, m.Primaries, m.Backups, m.Syncing, m.Handing, m.ReplicationQueue, m.UnderReplicated, m.Members, m.Requests, m.LagMillis} {
		e.uint(v)
	}
	e.str(m.JoinError)
	e.bool(m.Authority)
	e.uint(m.QuorumMembers)
	e.uint(m.QuorumConfirmed)
	e.uint(m.Claimed)
	e.list("failed members", len(m.Failed), MaxMembers)
	for _, f := range m.Failed {
		e.array(3)
		e.str(f.Name)
		e.str(f.Addr)
		e.int(f.SinceMillis)
	}
	e.uint(m.Replicas)
	e.uint(m.Drifting)
	e.list("departed members", len(m.Departed), MaxMembers)
	for _, dm := range m.Departed {
		e.array(3)
		e.str(dm.Name)
		e.int(dm.AtMillis)
		e.bool(dm.Forgotten)
	}
	e.str(m.Version)
	for _, v := range []uint64{m.UptimeMillis, m.MemoryLimit, m.RecentMillis, m.RecentRequests, m.RecentErrors, m.P99Nanos} {
		e.uint(v)
	}
	e.bool(m.P99Over)
	if len(m.Regions) > 0 {
		e.list("peer regions", len(m.Regions), MaxPeerRegions)
		for _, r := range m.Regions {
			if r.Retired {
				e.array(7)
			} else {
				e.array(6)
			}
			e.str(r.Name)
			e.bool(r.Reachable)
			e.uint(r.LagMillis)
			e.uint(r.Queue)
			e.uint(r.Lent)
			e.uint(r.Borrowed)
			if r.Retired {
				e.int(r.RetiredAtMillis)
			}
		}
	}
}

func (m *Status) decode(d *decoder) {
	extra := d.array(13)
	m.Name = d.str()
	m.Epoch = d.uint()
	m.State = uint8(d.uintN(0xFF))
	for _, p := range []*uint64{&m.Viewers, &m.Keys, &m.Bytes, &m.Primaries, &m.Backups, &m.Syncing, &m.Handing, &m.ReplicationQueue, &m.UnderReplicated, &m.Members} {
		*p = d.uint()
	}
	m.Requests, m.LagMillis, m.JoinError = 0, 0, ""
	if extra >= 2 {
		m.Requests, m.LagMillis = d.uint(), d.uint()
		extra -= 2
	}
	if extra >= 1 {
		m.JoinError = d.str()
		extra--
	}
	m.Authority, m.QuorumMembers, m.QuorumConfirmed, m.Claimed, m.Failed, m.Replicas, m.Drifting = false, 0, 0, 0, m.Failed[:0], 0, 0
	if extra >= 5 {
		m.Authority = d.bool()
		m.QuorumMembers, m.QuorumConfirmed, m.Claimed = d.uint(), d.uint(), d.uint()
		m.Failed = resize(m.Failed, d.list("failed members", MaxMembers, minFailedMemberSize))
		for i := range m.Failed {
			f := &m.Failed[i]
			x := d.array(3)
			f.Name, f.Addr, f.SinceMillis = d.str(), d.str(), d.int()
			d.end(x)
		}
		extra -= 5
	}
	if extra >= 1 {
		m.Replicas = d.uint()
		extra--
	}
	if extra >= 1 {
		m.Drifting = d.uint()
		extra--
	}
	m.Departed = m.Departed[:0]
	if extra >= 1 {
		m.Departed = resize(m.Departed, d.list("departed members", MaxMembers, minDepartedMemberSize))
		for i := range m.Departed {
			dm := &m.Departed[i]
			x := d.array(3)
			dm.Name, dm.AtMillis, dm.Forgotten = d.str(), d.int(), d.bool()
			d.end(x)
		}
		extra--
	}
	m.Version, m.UptimeMillis, m.MemoryLimit, m.RecentMillis, m.RecentRequests, m.RecentErrors, m.P99Nanos, m.P99Over = "", 0, 0, 0, 0, 0, 0, false
	if extra >= 8 {
		m.Version = d.str()
		for _, p := range []*uint64{&m.UptimeMillis, &m.MemoryLimit, &m.RecentMillis, &m.RecentRequests, &m.RecentErrors, &m.P99Nanos} {
			*p = d.uint()
		}
		m.P99Over = d.bool()
		extra -= 8
	}
	m.Regions = m.Regions[:0]
	if extra >= 1 {
		m.Regions = resize(m.Regions, d.list("peer regions", MaxPeerRegions, minRegionStatusSize))
		for i := range m.Regions {
			r := &m.Regions[i]
			x := d.array(4)
			r.Name, r.Reachable, r.LagMillis, r.Queue = d.str(), d.bool(), d.uint(), d.uint()
			r.Lent, r.Borrowed, r.Retired, r.RetiredAtMillis = 0, 0, false, 0
			if x >= 2 { // optional: added after queue
				r.Lent, r.Borrowed = d.uint(), d.uint()
				x -= 2
			}
			if x >= 1 { // only for a retired region
				r.Retired, r.RetiredAtMillis = true, d.int()
				x--
			}
			d.end(x)
		}
		extra--
	}
	d.end(extra)
}

// Forget asks a node to forget a failed member (fcapctl forget): it no
// longer counts toward the majority strict writes need, and partitions
// claimed for want of their holders are taken as whole. The node refuses
// a member it reaches (drain that one instead). The forget spreads to the
// other nodes with gossip. It is answered with a ForgetResult or an
// Error.
//
// Wire: [node str].
type Forget struct {
	// Node is the member's name.
	Node string
}

// Type returns TypeForget.
func (*Forget) Type() Type { return TypeForget }

func (m *Forget) encode(e *encoder) {
	e.array(1)
	e.str(m.Node)
}

func (m *Forget) decode(d *decoder) {
	extra := d.array(1)
	m.Node = d.str()
	d.end(extra)
}

// ForgetResult answers Forget: the member was forgotten.
//
// Wire: [failed uint].
type ForgetResult struct {
	// Failed is how many members the node still counts as failed.
	Failed uint64
}

// Type returns TypeForgetResult.
func (*ForgetResult) Type() Type { return TypeForgetResult }

func (m *ForgetResult) encode(e *encoder) {
	e.array(1)
	e.uint(m.Failed)
}

func (m *ForgetResult) decode(d *decoder) {
	extra := d.array(1)
	m.Failed = d.uint()
	d.end(extra)
}

// Drain asks a node to hand its partitions to their next owners and
// leave the cluster (fcapctl drain). It is answered with a DrainResult
// once the node has handed everything over, or an Error.
//
// Wire: [timeout_ms int].
type Drain struct {
	// TimeoutMillis bounds the hand-over; 0 means the node's default.
	TimeoutMillis int64
}

// Type returns TypeDrain.
func (*Drain) Type() Type { return TypeDrain }

func (m *Drain) encode(e *encoder) {
	e.array(1)
	e.int(m.TimeoutMillis)
}

func (m *Drain) decode(d *decoder) {
	extra := d.array(1)
	m.TimeoutMillis = d.int()
	d.end(extra)
}

// DrainResult answers Drain: the node handed its partitions over and is
// leaving.
//
// Wire: [partitions uint].
type DrainResult struct {
	// Partitions is how many partition transfers the node completed.
	Partitions uint64
}

// Type returns TypeDrainResult.
func (*DrainResult) Type() Type { return TypeDrainResult }

func (m *DrainResult) encode(e *encoder) {
	e.array(1)
	e.uint(m.Partitions)
}

func (m *DrainResult) decode(d *decoder) {
	extra := d.array(1)
	m.Partitions = d.uint()
	d.end(extra)
}

// SyncRequest is sent by a node that owns partitions it does not hold
// and whose transfer has not come: the receiver pushes every one of them
// it holds (a Replicate stream ending with Done), and says which. It is
// also sent by a new primary whose hand-over has not come, to the node it
// expects it from: that node, if it has left the cluster (a drain), sends
// its last changes and the Handoff marker again (a marker that reached
// the asker before its ring showed the move, and expired, or one never
// sent because the sender's ring went another way). When that does not
// come either, the asker sends Relays to every other member: one that
// received a partition's hand-over while its own ring passed over being
// its primary, and never was, passes that hand-over on (replication's
// relays). A node whose claimed partitions no failed member could hold
// more of asks every member for its copy of them (Copies).
//
// Wire: [from str, partitions bin, handoffs bin, relays bin, copies bin],
// each partition list little-endian uint32; handoffs, relays and copies
// were appended later and are optional (relays is sent only when relays
// or copies is not empty, copies only when not empty).
type SyncRequest struct {
	// From is the asking node's name: where to push.
	From string
	// Partitions are the partitions it waits for.
	Partitions []uint32
	// Handoffs are partitions whose hand-over it waits for.
	Handoffs []uint32
	// Relays are partitions whose hand-over it waits for from another
	// member, and asks this one to pass on if it can.
	Relays []uint32
	// Copies are partitions it claimed and asks every member for:
	// whatever copy the receiver holds (current or not, or nothing),
	// sent whole and ended with a Copied marker.
	Copies []uint32
}

// Type returns TypeSyncRequest.
func (*SyncRequest) Type() Type { return TypeSyncRequest }

func (m *SyncRequest) encode(e *encoder) {
	switch {
	case len(m.Copies) > 0:
		e.array(5)
	case len(m.Relays) > 0:
		e.array(4)
	default:
		e.array(3)
	}
	e.str(m.From)
	e.uint32s(m.Partitions)
	e.uint32s(m.Handoffs)
	if len(m.Relays) > 0 || len(m.Copies) > 0 {
		e.uint32s(m.Relays)
	}
	if len(m.Copies) > 0 {
		e.uint32s(m.Copies)
	}
}

func (m *SyncRequest) decode(d *decoder) {
	extra := d.array(2)
	m.From = d.str()
	m.Partitions = d.uint32s(m.Partitions, 1<<16)
	m.Handoffs, m.Relays, m.Copies = m.Handoffs[:0], m.Relays[:0], m.Copies[:0]
	if extra > 0 {
		m.Handoffs = d.uint32s(m.Handoffs, 1<<16)
		extra--
	}
	if extra > 0 {
		m.Relays = d.uint32s(m.Relays, 1<<16)
		extra--
	}
	if extra > 0 {
		m.Copies = d.uint32s(m.Copies, 1<<16)
		extra--
	}
	d.end(extra)
}

// SyncResult answers a SyncRequest.
//
// Wire: [pushing bin], little-endian uint32.
type SyncResult struct {
	// Pushing are the requested partitions the receiver holds and is
	// pushing.
	Pushing []uint32
}

// Type returns TypeSyncResult.
func (*SyncResult) Type() Type { return TypeSyncResult }

func (m *SyncResult) encode(e *encoder) {
	e.array(1)
	e.uint32s(m.Pushing)
}

func (m *SyncResult) decode(d *decoder) {
	extra := d.array(1)
	m.Pushing = d.uint32s(m.Pushing, 1<<16)
	d.end(extra)
}

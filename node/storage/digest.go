package storage

import (
	"fmt"
	"time"

	"github.com/fcap-io/fcap/node/engine"
	"github.com/fcap-io/fcap/proto"
	"github.com/fcap-io/fcap/ring"
)

// Reconciliation (fcapctl verify). A node digests what each viewer of
// the asked partitions counts at the asked time (engine.Digest), from
// its RAM and, when asked and it keeps a log, from what its snapshot and
// log replay to. fcapctl compares the RAM digests of a partition's
// owners, and each node's RAM with its log, so a counter that drifted
// from its replicas or from the durable record surfaces instead of being
// trusted.
//
// Writes go on while a node verifies. A viewer written after the log
// was cut for the replay has a newer state in RAM than in the replayed
// log; such viewers are found by reading the log written meanwhile, and
// their log digest is taken to be their RAM digest (they are counted in
// Changed, not judged).

// inFlight is how long verify waits before its second cut, so that a
// write that changed a viewer before the RAM pass has logged it (a
// handler logs right after the engine call).
const inFlight = 50 * time.Millisecond

// Digests fills in res the digests of the partitions want marks (res.Partitions
// lists them, in order), of their viewers in slice (every viewer when
// slice is nil): from eng's RAM and, with withLog and a Store, from what
// its snapshot and log replay to; with withViewers, res.Viewers too.
// ecfg configures the scratch engine the log replays into.
func Digests(eng *engine.Engine, st *Store, ecfg engine.Config, want []bool, slice func(key uint64) bool, now int64, withViewers, withLog bool, res *proto.VerifyResult) {
	P := len(want)
	accept := func(key uint64) bool { return want[ring.PartitionOf(key, P)] && (slice == nil || slice(key)) }
	index := make([]int, P)
	for i, pd := range res.Partitions {
		index[pd.Partition] = i
	}
	// The log first: everything logged before the cut, replayed into a
	// scratch engine (only the asked partitions: memory for those alone).
	var replayed *engine.Engine
	var cut uint64
	if withLog && st != nil {
		var err error
		replayed, cut, err = st.Replay(ecfg, accept)
		if err != nil {
			res.LogError = err.Error()
			replayed = nil
		}
	}

	type digests struct{ ram, log uint64 }
	var viewers map[uint64]*digests
	if withViewers {
		viewers = map[uint64]*digests{}
	}
	ram := map[uint64]uint64{} // only while the log is compared: RAM digests to stand in for changed viewers
	eng.PartitionKeys(want, func(key uint64) bool {
		if slice != nil && !slice(key) {
			return true
		}
		p := ring.PartitionOf(key, P)
		d, _ := eng.Digest(key, now)
		if d == 0 {
			return true
		}
		pd := &res.Partitions[index[p]]
		pd.Viewers++
		pd.Sum = engine.CombineDigests(pd.Sum, d)
		if replayed != nil {
			ram[key] = d
		}
		if viewers != nil {
			viewers[key] = &digests{ram: d}
		}
		return true
	})

	if replayed != nil {
		time.Sleep(inFlight)
		changed, err := st.ChangedSince(cut)
		if err != nil {
			res.LogError = err.Error()
		} else {
			res.Logged = true
			res.Changed = uint64(len(changed))
			logDigest := func(key uint64) uint64 {
				if changed[key] {
					return ram[key]
				}
				d, _ := replayed.Digest(key, now)
				return d
			}
			seen := map[uint64]bool{}
			add := func(key uint64) {
				if seen[key] {
					return
				}
				seen[key] = true
				d := logDigest(key)
				if viewers != nil && (d != 0 || viewers[key] != nil) {
					if viewers[key] == nil {
						viewers[key] = &digests{}
					}
					viewers[key].log = d
				}
				if d == 0 {
					return
				}
				pd := &res.Partitions[index[ring.PartitionOf(key, P)]]
				pd.LogViewers++
				pd.LogSum = engine.CombineDigests(pd.LogSum, d)
			}
			replayed.Keys(func(key uint64) bool { add(key); return true })
			for key := range changed {
				if accept(key) {
					add(key)
				}
			}
		}
	}

	for key, d := range viewers {
		if len(res.Viewers) == proto.MaxVerifyViewers {
			res.Truncated = true
			break
		}
		res.Viewers = append(res.Viewers, proto.ViewerDigest{Key: key, Sum: d.ram, Log: d.log})
	}
}

// Verify answers a Verify for a node: the partitions m names (all that
// self owns in r, when it names none, and none while self is not in r),
// each with whether holds says the node holds it whole, digested by
// Digests (of the viewers in m's slice only, when it names one). m.Now 0
// or less means now.
func Verify(eng *engine.Engine, st *Store, ecfg engine.Config, r *ring.Ring, self string, in bool, holds func(p int) bool, m *proto.Verify) (*proto.VerifyResult, error) {
	P := r.Partitions()
	want := make([]bool, P)
	if len(m.Partitions) == 0 {
		for p := range P {
			want[p] = in && r.Rank(p, self) >= 0
		}
	} else {
		for _, p := range m.Partitions {
			if int(p) >= P {
				return nil, fmt.Errorf("%w: partition %d, the ring has %d", proto.ErrBadRequest, p, P)
			}
			want[p] = true
		}
	}
	now := m.Now
	if now <= 0 {
		now = time.Now().UnixMilli()
	}
	res := &proto.VerifyResult{Node: self, Epoch: r.Epoch()}
	for p := range P {
		if want[p] {
			res.Partitions = append(res.Partitions, proto.PartitionDigest{Partition: uint32(p), Held: holds(p)})
		}
	}
	Digests(eng, st, ecfg, want, func(key uint64) bool { return m.InSlice(key, P) }, now, m.Viewers, m.Log, res)
	return res, nil
}

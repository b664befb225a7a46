package node

import (
	"fmt"
	"time"

	"github.com/fcap-io/fcap/node/storage"
	"github.com/fcap-io/fcap/proto"
)

// Reconciliation (fcapctl verify): this node picks the partitions and
// says which it holds; storage.Digests digests them, from RAM and from
// the log.

// verify answers a Verify.
func (n *Node) verify(v *view, m *proto.Verify) (*proto.VerifyResult, error) {
	P := n.repl.Partitions()
	want := make([]bool, P)
	if len(m.Partitions) == 0 {
		for p := range P {
			want[p] = v.in && v.ring.Rank(p, n.cfg.Name) >= 0
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
	res := &proto.VerifyResult{Node: n.cfg.Name, Epoch: v.ring.Epoch()}
	for p := range P {
		if want[p] {
			res.Partitions = append(res.Partitions, proto.PartitionDigest{Partition: uint32(p), Held: n.repl.Holds(p)})
		}
	}
	storage.Digests(n.engine, n.durable, n.cfg.Engine, want, now, m.Viewers, m.Log, res)
	return res, nil
}

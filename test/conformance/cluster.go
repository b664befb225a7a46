package conformance

import (
	"context"
	"fmt"

	"github.com/fcap-io/fcap/client"
	"github.com/fcap-io/fcap/node/engine"
)

// Cluster returns a Factory running each case against a running cluster
// through the client. Cases share the cluster, so each one gets viewer ids
// of its own (prefix, the case number, then the case's viewer). offset is
// added to every tick: the contract only depends on differences of times,
// and a live cluster sweeps by its newest time, so a run against one that
// serves real traffic should use ticks near its clock (the current Unix
// millisecond). A cluster that is unreachable fails the case: the
// client's fail-open verdicts are reported, not counted as answers.
func Cluster(c *client.Client, prefix string, offset int64) Factory {
	return func(n int, limit, window int64) (Capper, error) {
		return clusterCapper{c: c, viewer: fmt.Sprintf("%s%d-", prefix, n), limit: limit, window: window, offset: offset}, nil
	}
}

type clusterCapper struct {
	c             *client.Client
	viewer        string
	limit, window int64
	offset        int64
}

func (cc clusterCapper) Allow(viewer, campaign string, now int64) (bool, error) {
	caps := []engine.Cap{{Scope: "campaign", ID: campaign, Limit: cc.limit, Window: cc.window}}
	vd, err := cc.c.Allow(context.Background(), cc.viewer+viewer, caps, client.At(now+cc.offset))
	if err != nil {
		return false, err
	}
	if vd.Failed() {
		return false, fmt.Errorf("the cluster did not answer in time (verdict by failure policy)")
	}
	return vd.Allowed, nil
}

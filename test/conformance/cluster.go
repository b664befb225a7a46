package conformance

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/client"
)

// Cluster returns a Factory running each case against a running cluster
// through the client. Cases share the cluster, so each one gets viewer ids
// of its own (prefix, the case number, then the case's viewer). offset is
// added to every tick: the contract only depends on differences of times,
// and a live cluster sweeps by its newest time, so a run against one that
// serves real traffic should use ticks near its clock (the current Unix
// millisecond). A cluster that is unreachable fails the case: the
// client's fail-open verdicts are reported, not counted as answers.
//
// Each case's ticks start after every tick an earlier case used. A fresh
// engine starts each case with no newest time; the shared cluster keeps
// the newest time of the cases before, and its sweeper frees what has
// aged out by it. A case whose ticks ran behind an earlier case's by more
// than its window could see its counters swept between two of its calls.
func Cluster(c *client.Client, prefix string, offset int64) Factory {
	next := new(atomic.Int64) // one past the newest tick sent so far
	next.Store(offset)
	return func(n int, limit, window int64) (Capper, error) {
		return clusterCapper{c: c, viewer: fmt.Sprintf("%s%d-", prefix, n), limit: limit, window: window,
			offset: max(offset, next.Load()), next: next}, nil
	}
}

type clusterCapper struct {
	c             *client.Client
	viewer        string
	limit, window int64
	offset        int64
	next          *atomic.Int64
}

// at turns a case's tick into the time sent, and notes it.
func (cc clusterCapper) at(now int64) client.CallOption {
	t := now + cc.offset
	for {
		n := cc.next.Load()
		if t < n || cc.next.CompareAndSwap(n, t+1) {
			return client.At(t)
		}
	}
}

func (cc clusterCapper) Allow(viewer, campaign string, now int64) (bool, error) {
	caps := []fcap.Cap{{Scope: "campaign", ID: campaign, Limit: cc.limit, Window: fcap.Millis(cc.window)}}
	vd, err := cc.c.Allow(context.Background(), cc.viewer+viewer, caps, cc.at(now))
	if err != nil {
		return false, err
	}
	if vd.Failed() {
		return false, fmt.Errorf("the cluster did not answer in time (verdict by failure policy)")
	}
	return vd.Allowed, nil
}

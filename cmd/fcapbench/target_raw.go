package main

import (
	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/proto"
)

// newRawTarget drives fcap nodes with the echo target's caller: one fcap
// request frame of the workload, encoded once (the longest viewer id, the
// node's own clock), written as is and its answer read, not decoded. It
// splits a check's time between the node and the client: raw against a
// node less echo is the node's share; fcap less raw is the client's.
// Every request asks the same viewer, so the node's engine work is that
// of a viewer with no impressions, and a cluster's requests all go to the
// node of the first address.
func newRawTarget(addrs string, w *workload, x *ids, o targetOpts) (*echoTarget, error) {
	viewer := x.viewer(x.viewerCount() - 1)
	mode := fcap.Soft
	if w.Mode == "strict" {
		mode = fcap.Strict
	}
	var chk proto.Check
	chk.Viewer = viewer
	for i := range w.Candidates {
		id := x.campaigns[len(x.campaigns)-1-i]
		chk.Table.Caps = append(chk.Table.Caps, fcap.Cap{Scope: "campaign", ID: id, Limit: w.Limit, Window: fcap.Millis(w.Window), Mode: mode})
		chk.Table.Refs = append(chk.Table.Refs, uint16(i))
		chk.Table.Ends = append(chk.Table.Ends, uint32(i+1))
	}
	alw := proto.Allow{Viewer: viewer, Caps: chk.Table.Caps[:1]}
	check, err := proto.AppendFrame(nil, 0, &chk)
	if err != nil {
		return nil, err
	}
	allow, err := proto.AppendFrame(nil, 0, &alw)
	if err != nil {
		return nil, err
	}
	t, err := newEchoTarget(addrs, w, x, o)
	if err != nil {
		return nil, err
	}
	t.name, t.check, t.allow = "raw", check, allow
	return t, nil
}

package client

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Stats are the client's running totals, for programs that do not scrape
// Prometheus (fcapbench's progress line, tests).
type Stats struct {
	Calls             int64 // calls answered by the cluster
	FailedOver        int64 // calls answered by the failure policy
	FailOpen          int64 // verdicts allowed by policy
	FailClosed        int64 // verdicts denied by policy
	BadRequests       int64
	NotOwnerRefreshes int64
	BackupReads       int64 // checks answered by a backup owner
	BackupWrites      int64 // soft Allows and impressions taken by a backup owner
	HedgesSent        int64 // soft checks also sent to a backup because the owner was slow
	HedgesWon         int64 // hedged checks the backup answered first
	HedgesCancelled   int64 // hedged checks the owner answered first
	RecordsQueued     int64
	RecordsAcked      int64
	RecordRetries     int64
	RecordsDropped    int64
	RecordQueue       int64 // queued or in flight now
	ResolveMisses     int64 // device-keyed calls that missed the resolution cache
	ResolveFailures   int64 // devices that could not be resolved (counted as themselves)
	LateGrants        int64 // Allow and Reserve grants that arrived after their call gave up
	ReturnedGrants    int64 // late strict grants given back to their owner (the slot is free again)
	Reached           bool  // a node has answered with the topology (see ErrUnavailable)
	ActiveNodes       int64 // members that own partitions
	ConnectedNodes    int64 // of those, the ones with a connection up
}

// Stats returns the totals since the client started.
func (c *Client) Stats() Stats {
	m := c.m
	var s Stats
	for op := range numOps {
		s.Calls += value(m.calls[op][outcomeOK])
		s.FailedOver += value(m.calls[op][outcomeFailed])
		s.BadRequests += value(m.calls[op][outcomeBadRequest])
	}
	s.FailOpen = value(m.failOpen)
	s.FailClosed = value(m.failClosed)
	s.NotOwnerRefreshes = value(m.notOwnerRefreshes)
	s.BackupReads = value(m.backupReads)
	s.BackupWrites = value(m.backupWrites)
	s.HedgesSent = value(m.hedgesSent)
	s.HedgesWon = value(m.hedgesWon)
	s.HedgesCancelled = value(m.hedgesCancelled)
	s.RecordsQueued = value(m.recordQueued)
	s.RecordsAcked = value(m.recordSent)
	s.RecordRetries = value(m.recordRetries)
	for _, reason := range []string{"queue_full", "attempts", "invalid", "closed"} {
		s.RecordsDropped += value(m.recordDropped.WithLabelValues(reason))
	}
	s.RecordQueue = c.rec.count.Load()
	s.ResolveMisses = value(m.resolveMisses)
	s.ResolveFailures = value(m.resolveFailures)
	s.LateGrants = value(m.lateGrants)
	s.ReturnedGrants = value(m.undos.WithLabelValues("returned"))
	s.Reached = c.reached()
	s.ActiveNodes, s.ConnectedNodes = c.nodeCounts()
	return s
}

// value reads a counter or gauge.
func value(c prometheus.Metric) int64 {
	var d dto.Metric
	if err := c.Write(&d); err != nil {
		return 0
	}
	if d.Counter != nil {
		return int64(d.Counter.GetValue())
	}
	if d.Gauge != nil {
		return int64(d.Gauge.GetValue())
	}
	return 0
}

package statuspage

import (
	"context"
	"sync"
	"time"
)

// Recent fail-overs, for the status page: every recentStep the node
// samples the counters of events that make an ad server fall back (its
// JSON API's fail-open verdicts, requests it refused while a partition
// was still arriving, checks it answered as a backup, strict writes a
// backup did not acknowledge) and keeps the last recentSteps deltas.
// Go clients count their own fail-opens in their registry
// (fcap_client_policy_verdicts_total): a node cannot see those.

const (
	recentStep  = 10 * time.Second
	recentSteps = 60 // ten minutes
)

// recentSample is one step's events.
type recentSample struct {
	At             time.Time
	APIFailOpen    int64 // JSON API calls answered by the failure policy as open
	SyncRefusals   int64 // requests refused while their partition was arriving
	BackupReads    int64 // checks answered as a backup (the owner was unreachable)
	StrictFailures int64 // strict writes refused: a backup did not acknowledge
}

func (s recentSample) total() int64 {
	return s.APIFailOpen + s.SyncRefusals + s.BackupReads + s.StrictFailures
}

type recentEvents struct {
	mu      sync.Mutex
	samples []recentSample // guarded by mu; oldest first, at most recentSteps
	last    recentSample   // guarded by mu; the counters at the previous step
}

// counters reads the cumulative counters.
func (p *Page) counters() recentSample {
	c := p.src.Counters()
	return recentSample{
		At:             time.Now(),
		APIFailOpen:    c.APIFailOpen,
		SyncRefusals:   c.SyncRefusals,
		BackupReads:    c.BackupReads,
		StrictFailures: c.StrictFailures,
	}
}

// sampleRecent records one step.
func (p *Page) sample() {
	cur := p.counters()
	r := &p.recent
	r.mu.Lock()
	defer r.mu.Unlock()
	d := recentSample{
		At:             cur.At,
		APIFailOpen:    cur.APIFailOpen - r.last.APIFailOpen,
		SyncRefusals:   cur.SyncRefusals - r.last.SyncRefusals,
		BackupReads:    cur.BackupReads - r.last.BackupReads,
		StrictFailures: cur.StrictFailures - r.last.StrictFailures,
	}
	r.last = cur
	r.samples = append(r.samples, d)
	if len(r.samples) > recentSteps {
		r.samples = r.samples[len(r.samples)-recentSteps:]
	}
}

// history returns the steps recorded, oldest first.
func (p *Page) history() []recentSample {
	p.recent.mu.Lock()
	defer p.recent.mu.Unlock()
	return append([]recentSample(nil), p.recent.samples...)
}

// Run samples the recent fail-overs every recentStep until ctx ends.
func (p *Page) Run(ctx context.Context) {
	p.recent.mu.Lock()
	p.recent.last = p.counters()
	p.recent.mu.Unlock()
	t := time.NewTicker(recentStep)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			p.sample()
		}
	}
}

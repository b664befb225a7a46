// Package identity finishes the links and unlinks their caller did not
// see through.
//
// A link or an unlink changes two slots that may live on two owners (the
// device's and the viewer's; node/crossdevice.go). The node that drives one
// notes it here before its first step (Begin) and clears it once both
// are done (End). When the other side could not be reached (down, busy,
// moving), End keeps the job and the Finisher runs it again in the
// background, with backoff, against whichever node owns that side by
// then, until it succeeds, the other side refuses it for good, or
// GiveUp passes. Both steps are idempotent, so running a job again is
// always safe.
//
// With a Dir the jobs are journaled (Begin is on disk, fsynced, before
// the first step changes anything), so a node that restarts runs again
// whatever it had not finished. Without one (a memory-only node) a job
// lives as long as the process.
package identity

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fcap-io/fcap/proto"
)

// Kind is what a job finishes.
type Kind uint8

// The kinds of job.
const (
	// Link runs a whole link again on the viewer's owner (its device's
	// side on the device's owner, then the viewer's).
	Link Kind = iota + 1
	// Unlink removes the device from the viewer's list, on the viewer's
	// owner: the device's side is done.
	Unlink
)

// Job is a link or unlink to finish.
type Job struct {
	Kind           Kind
	Device, Viewer string
	At             int64 // Unlink: when it was decided
}

// JournalFile is the journal's name in Config.Dir.
const JournalFile = "identity-jobs.jsonl"

// Config configures a Finisher.
type Config struct {
	// Dir, when set, is where the jobs are journaled (JournalFile), so a
	// restart runs again what was not finished. Default empty: memory.
	Dir string
	// Try runs a job once; it bounds its own time. Required.
	Try func(ctx context.Context, j Job) error
	// Permanent reports whether an error of Try will not go away by
	// trying again (the other side refused the change): the job is
	// dropped and counted failed. Default: an error a node answers with
	// a refusal's code (bad request, future time, permission denied,
	// unsupported).
	Permanent func(error) bool
	// MaxPending bounds the jobs held at once; Begin refuses past it.
	// Default 10,000.
	MaxPending int
	// GiveUp is how long a job is tried before it is dropped and
	// counted failed. Default 1 h.
	GiveUp time.Duration
	// Logger receives a line per job dropped. Default slog.Default().
	Logger *slog.Logger
	// Registerer receives the metrics (none when nil).
	Registerer prometheus.Registerer
}

// Finisher holds the jobs and runs the unfinished ones again.
type Finisher struct {
	cfg  Config
	wake chan struct{}

	pending  prometheus.Gauge
	outcomes *prometheus.CounterVec

	mu      sync.Mutex // guards the fields below
	jobs    map[uint64]*entry
	next    uint64
	journal *os.File // nil without a Dir, and once closed
}

type entry struct {
	job      Job
	deferred bool      // its caller's try failed: Run owns it
	since    time.Time // when it was begun (or read from the journal)
	due      time.Time // when Run tries it next
	tries    int
}

// New returns a Finisher, with the jobs its journal holds unfinished
// due at once.
func New(cfg Config) (*Finisher, error) {
	if cfg.Try == nil {
		return nil, errors.New("identity finisher: Try is required")
	}
	if cfg.Permanent == nil {
		cfg.Permanent = refused
	}
	if cfg.MaxPending <= 0 {
		cfg.MaxPending = 10_000
	}
	if cfg.GiveUp <= 0 {
		cfg.GiveUp = time.Hour
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	f := &Finisher{cfg: cfg, wake: make(chan struct{}, 1), jobs: map[uint64]*entry{}, next: 1}
	f.pending = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "fcap_node_identity_unfinished",
		Help: "Links and unlinks whose other side could not be reached yet: the node tries them again in the background.",
	})
	f.outcomes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "fcap_node_identity_finishes_total",
		Help: "Unfinished links and unlinks the node finished later (outcome finished), or dropped: refused by the other side, or still failing after the give-up time (outcome failed).",
	}, []string{"outcome"})
	if cfg.Registerer != nil {
		for _, c := range []prometheus.Collector{f.pending, f.outcomes} {
			if err := cfg.Registerer.Register(c); err != nil {
				return nil, err
			}
		}
	}
	if cfg.Dir != "" {
		if err := f.openJournal(); err != nil {
			return nil, fmt.Errorf("identity journal: %w", err)
		}
	}
	return f, nil
}

// Begin notes a job before its first step; End says how it went.
func (f *Finisher) Begin(j Job) (uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.jobs) >= f.cfg.MaxPending {
		return 0, fmt.Errorf("%d links and unlinks are unfinished on this node; try later", len(f.jobs))
	}
	id := f.next
	f.next++
	if err := f.write(begun(id, j), true); err != nil {
		return 0, err
	}
	f.jobs[id] = &entry{job: j, since: time.Now()}
	return id, nil
}

// End closes the caller's try of job id (0: none): err nil (both steps
// done) or permanent drops the job; any other error leaves it to Run.
// It reports whether the job is kept.
func (f *Finisher) End(id uint64, err error) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.jobs[id]
	if !ok {
		return false
	}
	if err == nil || f.cfg.Permanent(err) {
		f.drop(id)
		return false
	}
	for _, o := range f.jobs {
		if o.deferred && o.job.Kind == e.job.Kind && o.job.Device == e.job.Device && o.job.Viewer == e.job.Viewer {
			// A retried call: the job held already finishes it (an
			// unlink's latest time wins on the other side).
			o.job.At = max(o.job.At, e.job.At)
			f.drop(id)
			return true
		}
	}
	e.deferred, e.due = true, time.Now().Add(backoff(0))
	f.pending.Inc()
	f.kick()
	return true
}

// Unfinished returns the jobs Run holds.
func (f *Finisher) Unfinished() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, e := range f.jobs {
		if e.deferred {
			n++
		}
	}
	return n
}

// Run tries the unfinished jobs, one at a time, each when it is due,
// until ctx is done. A job that ctx interrupts stays for the next start.
func (f *Finisher) Run(ctx context.Context) {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for ctx.Err() == nil {
		id, j, wait := f.due()
		if wait == 0 {
			f.tried(ctx, id, f.cfg.Try(ctx, j))
			continue
		}
		t.Reset(wait)
		select {
		case <-ctx.Done():
		case <-f.wake:
		case <-t.C:
		}
	}
}

// Close closes the journal; what it holds is run again at the next start.
func (f *Finisher) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.journal == nil {
		return nil
	}
	err := f.journal.Close()
	f.journal = nil
	return err
}

// due returns the job to try now (wait 0), or how long until one is due.
func (f *Finisher) due() (id uint64, j Job, wait time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now, wait := time.Now(), time.Hour
	for i, e := range f.jobs {
		if !e.deferred {
			continue
		}
		if d := e.due.Sub(now); d <= 0 {
			return i, e.job, 0
		} else if d < wait {
			wait = d
		}
	}
	return 0, Job{}, wait
}

func (f *Finisher) tried(ctx context.Context, id uint64, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.jobs[id]
	switch {
	case !ok:
	case err == nil:
		f.outcomes.WithLabelValues("finished").Inc()
		f.drop(id)
	case ctx.Err() != nil:
		// Stopping: the journal keeps it.
	case f.cfg.Permanent(err) || time.Since(e.since) > f.cfg.GiveUp:
		f.cfg.Logger.Error("identity: an unfinished link or unlink is dropped", "device", e.job.Device, "viewer", e.job.Viewer,
			"unlink", e.job.Kind == Unlink, "tries", e.tries+1, "err", err)
		f.outcomes.WithLabelValues("failed").Inc()
		f.drop(id)
	default:
		e.tries++
		e.due = time.Now().Add(backoff(e.tries))
	}
}

// drop forgets job id. f.mu is held.
func (f *Finisher) drop(id uint64) {
	if f.jobs[id].deferred {
		f.pending.Dec()
	}
	delete(f.jobs, id)
	// Not synced: an end lost to a crash runs the job once more, which
	// changes nothing.
	if err := f.write(record{ID: id}, false); err != nil {
		f.cfg.Logger.Warn("identity journal", "err", err)
	}
}

// refused is the default Config.Permanent.
func refused(err error) bool {
	switch proto.CodeOf(err) {
	case proto.CodeBadRequest, proto.CodeFutureTime, proto.CodePermissionDenied, proto.CodeUnsupported:
		return true
	}
	return false
}

func (f *Finisher) kick() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// backoff is the wait before try n+1: 200 ms doubling to 30 s, with up
// to a quarter more at random so jobs for one owner spread out.
func backoff(n int) time.Duration {
	d := 30 * time.Second
	if n < 8 {
		d = min(d, 200*time.Millisecond<<n)
	}
	return d + rand.N(d/4+1)
}

// record is a journal line: a job begun, or (Kind 0) ended. Ids are
// bytes (base64 in JSON): any byte string is an id.
type record struct {
	ID     uint64 `json:"id"`
	Kind   Kind   `json:"kind,omitempty"`
	Device []byte `json:"device,omitempty"`
	Viewer []byte `json:"viewer,omitempty"`
	At     int64  `json:"at,omitempty"`
}

func begun(id uint64, j Job) record {
	return record{ID: id, Kind: j.Kind, Device: []byte(j.Device), Viewer: []byte(j.Viewer), At: j.At}
}

func (r record) job() Job {
	return Job{Kind: r.Kind, Device: string(r.Device), Viewer: string(r.Viewer), At: r.At}
}

// write appends a record to the journal, if there is one. f.mu is held.
func (f *Finisher) write(r record, sync bool) error {
	if f.journal == nil {
		return nil
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	if _, err := f.journal.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("identity journal: %w", err)
	}
	if sync {
		if err := f.journal.Sync(); err != nil {
			return fmt.Errorf("identity journal: %w", err)
		}
	}
	return nil
}

// openJournal reads the journal's unfinished jobs (up to a torn or bad
// line: the last one a crash may have cut), writes them alone to a new
// journal, and appends to it from then on.
func (f *Finisher) openJournal() error {
	path := filepath.Join(f.cfg.Dir, JournalFile)
	var open []record
	if rf, err := os.Open(path); err == nil {
		byID := map[uint64]int{}
		sc := bufio.NewScanner(rf)
		for sc.Scan() {
			var r record
			if json.Unmarshal(sc.Bytes(), &r) != nil || r.ID == 0 {
				break
			}
			f.next = max(f.next, r.ID+1)
			if r.Kind == 0 {
				if i, ok := byID[r.ID]; ok {
					open[i].ID = 0
				}
				continue
			}
			byID[r.ID] = len(open)
			open = append(open, r)
		}
		rf.Close()
	} else if !os.IsNotExist(err) {
		return err
	}
	tmp := path + ".tmp"
	w, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	f.journal = w
	now := time.Now()
	for _, r := range open {
		if r.ID == 0 || len(f.jobs) >= f.cfg.MaxPending {
			continue
		}
		if err := f.write(r, false); err != nil {
			w.Close()
			return err
		}
		f.jobs[r.ID] = &entry{job: r.job(), deferred: true, since: now, due: now}
		f.pending.Inc()
	}
	if err := w.Sync(); err != nil {
		w.Close()
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		w.Close()
		return err
	}
	if len(f.jobs) > 0 {
		f.cfg.Logger.Info("identity: links and unlinks left unfinished before the restart are tried again", "jobs", len(f.jobs))
	}
	return nil
}

package client

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/proto"
)

// Verdict is the answer for one candidate.
type Verdict struct {
	fcap.Verdict
	// FailOpen: the cluster did not answer in time and the candidate
	// was allowed by policy (all soft caps and Config.SoftFailClosed
	// false, the default; or Config.StrictFailOpen).
	FailOpen bool
	// FailClosed: the cluster did not answer in time and the candidate
	// was denied by policy (a strict cap and Config.StrictFailOpen false,
	// the default; or Config.SoftFailClosed).
	FailClosed bool
	// Stale: a backup owner answered because the owner did not in time
	// (soft caps only); its counts may lag by the replication delay. An
	// Allow a backup granted is recorded there and merged into the
	// owner's copy when the owner is back.
	Stale bool
}

// Failed reports whether the verdict was decided by the failure policy
// rather than by the cluster.
func (v Verdict) Failed() bool { return v.FailOpen || v.FailClosed }

// CallOption sets a per-call knob: At, Device. It is a value, not a
// function, so that a call applies its options without allocating.
type CallOption struct{ set callOptions }

type callOptions struct {
	now    int64
	hasNow bool
	device bool
}

// At makes the call judge by time t (Unix milliseconds in production)
// instead of the owner node's clock. A t further ahead of the owner's
// clock than it accepts (fcapd --max-clock-skew, default one minute) is
// refused: the call returns an error wrapping ErrFutureTime.
func At(t int64) CallOption {
	return CallOption{callOptions{now: t, hasNow: true}}
}

// applyOptions merges opts; a later At wins over an earlier one.
func applyOptions(opts []CallOption) callOptions {
	var o callOptions
	for _, f := range opts {
		if f.set.hasNow {
			o.now, o.hasNow = f.set.now, true
		}
		o.device = o.device || f.set.device
	}
	return o
}

// CheckResult holds a Check's verdicts, one per candidate in order. Reuse
// one with CheckInto to check without allocating.
type CheckResult struct {
	Verdicts []Verdict
	// Epoch is the ring epoch of the node that answered (0 if none did).
	Epoch uint64
	// Now is the time the verdicts were judged at.
	Now int64

	// The request as sent: each distinct cap once, encoded as it was
	// read from the candidates (caps; table.Caps stays empty), and the
	// candidates as refs into caps (table.Refs, table.Ends).
	caps   proto.EncodedCaps
	table  fcap.CheckTable
	strict []bool   // per candidate: it has a strict cap
	left   []uint16 // per table cap: impressions left, as sent (for Pod)
	stale  bool     // a backup answered
	// req is the request of the call in progress, kept here rather than
	// on the heap per call: it is encoded before each send and nothing
	// reads it once the call returns.
	req proto.Check
}

// reset builds the request table from candidates: a cap equal to the one
// at the same position of the previous candidate is sent once. Each cap
// is encoded as it is read, in the one pass over the caller's caps.
func (r *CheckResult) reset(cands []fcap.Candidate) error {
	if err := r.begin(len(cands)); err != nil {
		return err
	}
	t := &r.table
	// A first pass reads every cap's mode and the last byte of its id
	// into r.strict, in a loop short enough for the CPU to have many of
	// those reads in flight: candidates come from a large catalogue, each
	// cap and id a cache miss, and the encoding loop below, one cap
	// after another, would wait for each in turn (BenchmarkCheckCPU/cold,
	// 100 caps drawn from 1M: 25-32 us a check without this pass, 10-13
	// with it; /warm, caps in the cache, costs the same either way).
	var sink byte
	for i := range cands {
		strict := false
		for j := range cands[i].Caps {
			c := &cands[i].Caps[j]
			strict = strict || c.Mode == fcap.Strict
			if len(c.ID) > 0 {
				sink += c.ID[len(c.ID)-1]
			}
		}
		r.strict[i] = strict
	}
	runtime.KeepAlive(sink) // a use, so the compiler keeps the reads
	var prev []fcap.Cap
	prevStart := 0 // where the previous candidate's refs begin
	for i := range cands {
		caps := cands[i].Caps
		start := len(t.Refs)
		for j := range caps {
			c := &caps[j]
			if j < len(prev) && sameCap(&prev[j], c) {
				t.Refs = append(t.Refs, t.Refs[prevStart+j])
				continue
			}
			n := r.caps.Len()
			if n >= proto.MaxCheckCaps-1 {
				r.strict = r.strict[:0]
				return fmt.Errorf("%w: more than %d distinct caps", ErrBadRequest, proto.MaxCheckCaps-1)
			}
			if err := r.caps.Append(c); err != nil {
				r.strict = r.strict[:0]
				return fmt.Errorf("%w: candidate %d: %v", ErrBadRequest, i, err)
			}
			t.Refs = append(t.Refs, uint16(n))
		}
		t.Ends = append(t.Ends, uint32(len(t.Refs)))
		prev, prevStart = caps, start
	}
	return nil
}

// begin empties the result for a request of n candidates, with room for
// one cap per candidate up front (the appends that build the table then
// grow nothing in the common case) and r.strict of length n.
func (r *CheckResult) begin(n int) error {
	r.clear()
	if n > proto.MaxCandidates {
		return fmt.Errorf("%w: %d candidates, at most %d", ErrBadRequest, n, proto.MaxCandidates)
	}
	r.table.Ends = slices.Grow(r.table.Ends, n)
	r.table.Refs = slices.Grow(r.table.Refs, n)
	r.strict = slices.Grow(r.strict[:0], n)[:n]
	return nil
}

// clear empties the result and its request, keeping their storage.
func (r *CheckResult) clear() {
	r.caps.Reset()
	r.table.Reset()
	r.Verdicts = r.Verdicts[:0]
	r.left = r.left[:0]
	r.strict = r.strict[:0]
	r.Epoch, r.Now, r.stale = 0, 0, false
}

// sameCap is *a == *b, the numbers first: candidates next to each other
// mostly differ in their caps' ids, and the same cap is often the same
// memory, which compares without reading the strings.
func sameCap(a, b *fcap.Cap) bool {
	return a == b || a.Limit == b.Limit && a.Window == b.Window && a.Algorithm == b.Algorithm &&
		a.Mode == b.Mode && sameID(a.ID, b.ID) && a.Scope == b.Scope
}

// sameID is a == b, testing the last bytes first: ids that differ mostly
// differ at their end (campaign-41, campaign-42), which then costs no
// call to compare the whole strings.
func sameID(a, b string) bool {
	return len(a) == len(b) && (len(a) == 0 || a[len(a)-1] == b[len(b)-1]) && a == b
}

// failed fills every verdict from the failure policy.
func (r *CheckResult) failed(cfg *Config) {
	r.Verdicts = r.Verdicts[:0]
	for _, strict := range r.strict {
		r.Verdicts = append(r.Verdicts, failVerdict(cfg, strict))
	}
}

func failVerdict(cfg *Config, strict bool) Verdict {
	open := !cfg.SoftFailClosed
	if strict {
		open = cfg.StrictFailOpen
	}
	if open {
		return Verdict{Verdict: fcap.Verdict{Allowed: true, Blocking: -1}, FailOpen: true}
	}
	return Verdict{Verdict: fcap.Verdict{Blocking: -1}, FailClosed: true}
}

// Check asks, in one request to the viewer's owner, which candidates may
// be shown. When the cluster cannot answer in time every verdict is
// decided by the failure policy and marked, and the error is nil, unless
// the client has never reached the cluster: then the marked verdicts come
// with an error wrapping ErrUnavailable that names the seeds. Otherwise
// it returns an error only for an invalid request (ErrBadRequest), a
// cancelled context (no verdicts) or a closed client.
func (c *Client) Check(ctx context.Context, viewer string, cands []fcap.Candidate, opts ...CallOption) (*CheckResult, error) {
	res := &CheckResult{}
	return res, c.CheckInto(ctx, viewer, cands, res, opts...)
}

// CheckInto is Check into a reused result.
func (c *Client) CheckInto(ctx context.Context, viewer string, cands []fcap.Candidate, res *CheckResult, opts ...CallOption) error {
	return c.checkBuilt(ctx, viewer, res, opts, func() error { return res.reset(cands) })
}

// checkBuilt checks the request that build puts in res (reset or
// resetPrepared), unless the client is closed, ctx is done or build
// refuses the candidates.
func (c *Client) checkBuilt(ctx context.Context, viewer string, res *CheckResult, opts []CallOption, build func() error) error {
	start := time.Now()
	if c.closed() {
		return ErrClosed
	}
	if err := cancelled(ctx, "check"); err != nil {
		c.m.observe(opCheck, outcomeError, start)
		return err
	}
	if err := build(); err != nil {
		c.m.observe(opCheck, outcomeBadRequest, start)
		return err
	}
	return c.check(ctx, viewer, res, start, applyOptions(opts))
}

func (c *Client) check(ctx context.Context, viewer string, res *CheckResult, start time.Time, o callOptions) error {
	deadline := c.deadline(ctx, start)
	viewer = c.canonical(ctx, viewer, &o, deadline)
	res.req = proto.Check{Viewer: viewer, Now: o.now, HasNow: o.hasNow, Table: res.table, Encoded: &res.caps}
	req := &res.req
	// Strict candidates read only from the owner; a soft check's owner
	// keeps its request in flight until the deadline, hedged by a
	// backup when it is slow (see hedgedCheck).
	var cl *call
	var err error
	if res.anySoft() {
		var stale bool
		if cl, stale, err = c.hedgedCheck(ctx, viewer, req, deadline); err == nil && stale {
			c.m.backupReads.Inc()
			cl.check.Stale = true // a backup's answer, whatever it says
		}
	} else {
		cl, err = c.owned(ctx, viewer, req, proto.TypeCheckResult, deadline)
	}
	if errors.Is(err, proto.ErrBadRequest) {
		c.m.observe(opCheck, outcomeBadRequest, start)
		return err
	}
	if err == nil && res.fill(&cl.check) {
		fillTrace(ctx, cl, res.stale)
		putCall(cl)
		if res.stale {
			// Strict caps read only from the owner: those candidates
			// follow the failure policy.
			for i, strict := range res.strict {
				if strict {
					res.Verdicts[i] = failVerdict(&c.cfg, true)
				}
			}
			c.m.failVerdicts(res.Verdicts)
		}
		c.m.observe(opCheck, outcomeOK, start)
		return nil
	}
	if err == nil {
		putCall(cl)
		err = fmt.Errorf("%w: %d verdicts for %d candidates", ErrProtocol, len(cl.check.Verdicts), len(res.strict))
	}
	if errors.Is(err, ErrClosed) {
		return ErrClosed
	}
	if cerr := cancelled(ctx, "check"); cerr != nil {
		c.m.observe(opCheck, outcomeError, start)
		return cerr
	}
	res.failed(&c.cfg)
	c.m.failVerdicts(res.Verdicts)
	c.m.observe(opCheck, outcomeFailed, start)
	c.log.Debug("check failed over to policy", "err", err)
	return c.neverReached()
}

// fill copies a node's answer into the result; false if it does not fit
// the request.
func (r *CheckResult) fill(m *proto.CheckResult) bool {
	if len(m.Verdicts) != len(r.strict) {
		return false
	}
	r.Epoch, r.Now, r.stale = m.Epoch, m.Now, m.Stale
	r.Verdicts = slices.Grow(r.Verdicts[:0], len(m.Verdicts))[:len(m.Verdicts)]
	for i, v := range m.Verdicts {
		r.Verdicts[i] = Verdict{Verdict: v, Stale: m.Stale}
	}
	r.left = append(r.left[:0], m.Left...)
	return true
}

// CapsRemaining returns how many more impressions each cap of candidate i
// allows now (live reservations count as impressions), in the order of
// the candidate's caps: what an ad server needs to fill several slots
// from one answer (see Pod, which does it for Go callers). It is nil when
// the cluster did not say: a verdict decided by the failure policy, or a
// node too old to send the figures.
func (r *CheckResult) CapsRemaining(i int) []int64 {
	t := &r.table
	if i < 0 || i >= len(t.Ends) || len(r.left) != r.caps.Len() || i >= len(r.Verdicts) || r.Verdicts[i].Failed() {
		return nil
	}
	start := uint32(0)
	if i > 0 {
		start = t.Ends[i-1]
	}
	out := make([]int64, 0, t.Ends[i]-start)
	for _, ref := range t.Refs[start:t.Ends[i]] {
		out = append(out, int64(r.left[ref]))
	}
	return out
}

func (r *CheckResult) anySoft() bool {
	for _, strict := range r.strict {
		if !strict {
			return true
		}
	}
	return false
}

// fromBackup asks the viewer's backup owners in turn, until one answers
// or the deadline passes. m must say that a backup's answer is accepted
// (its Backup field).
func (c *Client) fromBackup(ctx context.Context, viewer string, m proto.Message, want proto.Type, deadline time.Time) (*call, error) {
	t, owners := c.route(viewer)
	err := errNoOwner
	for _, o := range owners[min(1, len(owners)):] {
		p := t.peers[o]
		if p == nil || time.Until(deadline) <= 0 {
			continue
		}
		var cl *call
		if cl, err = c.roundTrip(ctx, p, m, want, deadline, false); err == nil {
			// A newer epoch: the ring moved on (the owner died, say),
			// and asking the owner first again would only fail again.
			c.noteEpoch(epochOf(cl), p)
			return cl, nil
		}
	}
	return nil, err
}

// owned sends a request to the viewer's owner and waits for its answer
// until the deadline. An owner in transition is asked again rather than
// given up on: NotOwner refreshes the topology and asks the new owner; a
// partition still arriving or load being shed (Overloaded) and a node on
// its way out (ShuttingDown) are asked again, for a write, after a pause
// that doubles, while the deadline leaves room for it (a check asks a
// backup instead). Each refusal did nothing, so
// asking again cannot count twice. A drain or a join then costs a caller
// with a budget some latency, not a policy verdict.
func (c *Client) owned(ctx context.Context, viewer string, m proto.Message, want proto.Type, deadline time.Time) (*call, error) {
	t, owners := c.route(viewer)
	var lastErr error = errNoOwner
	pause := ownerRetryPause
	for attempt := 0; ; attempt++ {
		if len(owners) == 0 || t.peers[owners[0]] == nil {
			c.unroutable()
			return nil, lastErr
		}
		p := t.peers[owners[0]]
		cl, err := c.roundTrip(ctx, p, m, want, deadline, attempt > 0)
		if err == nil {
			c.noteEpoch(epochOf(cl), p)
			return cl, nil
		}
		lastErr = err
		notOwner := errors.Is(err, proto.ErrNotOwner)
		// A check has backups to ask instead (checkFailover); a write
		// waits for its owner.
		wait := want != proto.TypeCheckResult && inTransition(err)
		if !notOwner && !wait || attempt+1 >= maxOwnerAttempts {
			return nil, err
		}
		if notOwner {
			t = c.refreshAfter(ctx, t, p.addr, deadline)
			if t.ring == nil {
				return nil, err
			}
			if attempt == 0 {
				// The first NotOwner means our ring was stale: the
				// refreshed one names the owner, ask it at once.
				_, owners = t.ring.Lookup(viewer)
				continue
			}
		}
		// The cluster is still moving: give it a moment, if the
		// deadline leaves room to ask again after it.
		if time.Until(deadline) < 2*pause || !pauseFor(ctx, pause) {
			return nil, err
		}
		pause = min(2*pause, maxOwnerRetryPause)
		t = c.topo.Load()
		if t.ring == nil {
			return nil, err
		}
		_, owners = t.ring.Lookup(viewer)
	}
}

// The retries of an owner in transition (owned): the first pause, the
// longest, and how many times one call asks at most.
const (
	ownerRetryPause    = time.Millisecond
	maxOwnerRetryPause = 64 * time.Millisecond
	maxOwnerAttempts   = 64
)

// inTransition reports whether the owner refused a request because it is
// between states (receiving a partition, shedding load, leaving) rather
// than for the request: the same request may succeed a moment later.
func inTransition(err error) bool {
	return errors.Is(err, proto.ErrOverloaded) || errors.Is(err, proto.ErrShuttingDown)
}

// pauseFor waits d, or less if ctx is done first; it reports whether the
// whole pause passed.
func pauseFor(ctx context.Context, d time.Duration) bool {
	timer := getTimer(d)
	defer putTimer(timer)
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// epochOf is the ring epoch of the call's answer, 0 when it carries
// none.
func epochOf(cl *call) uint64 {
	if r := results[cl.want]; r != nil {
		e, _ := proto.EpochOf(r(cl))
		return e
	}
	return 0
}

// Allow atomically checks the caps and, if all have room, records an
// impression at the call's time (check-and-record in one hop). When every
// cap is soft and the owner cannot be reached (no live connection, or a
// connection that died under the call), a backup owner
// answers in its place and records the impression (the verdict is marked
// Stale); the owner merges it in when it is back. When the cluster
// cannot answer, the verdict follows the failure policy (strict if any
// cap is strict) and records nothing.
func (c *Client) Allow(ctx context.Context, viewer string, caps []fcap.Cap, opts ...CallOption) (Verdict, error) {
	start := time.Now()
	if c.closed() {
		return Verdict{}, ErrClosed
	}
	if err := cancelled(ctx, "allow"); err != nil {
		c.m.observe(opAllow, outcomeError, start)
		return Verdict{}, err
	}
	o := applyOptions(opts)
	deadline := c.deadline(ctx, start)
	viewer = c.canonical(ctx, viewer, &o, deadline)
	req := proto.Allow{Viewer: viewer, Now: o.now, HasNow: o.hasNow, Caps: caps}
	cl, err := c.owned(ctx, viewer, &req, proto.TypeAllowResult, deadline)
	stale := false
	if unreachable(err) && !anyStrict(caps) {
		// Only evidence that the owner is gone sends the Allow to a
		// backup: an owner that answered (busy, still receiving the
		// partition) is alive and keeps its writes, and one that timed
		// out may have counted the Allow already. The owner gets the
		// whole budget; what fails early leaves the rest to a backup.
		req.Backup = true
		if cl, err = c.fromBackup(ctx, viewer, &req, proto.TypeAllowResult, deadline); err == nil {
			stale = true
			if cl.allow.Verdict.Allowed {
				c.m.backupWrites.Inc()
			}
		}
	}
	switch {
	case err == nil:
		v := Verdict{Verdict: cl.allow.Verdict, Stale: stale}
		fillTrace(ctx, cl, stale)
		putCall(cl)
		c.m.observe(opAllow, outcomeOK, start)
		return v, nil
	case errors.Is(err, proto.ErrBadRequest):
		c.m.observe(opAllow, outcomeBadRequest, start)
		return Verdict{}, err
	case errors.Is(err, ErrClosed):
		return Verdict{}, ErrClosed
	}
	if cerr := cancelled(ctx, "allow"); cerr != nil {
		c.m.observe(opAllow, outcomeError, start)
		return Verdict{}, cerr
	}
	v := failVerdict(&c.cfg, anyStrict(caps))
	c.m.failVerdicts([]Verdict{v})
	c.m.observe(opAllow, outcomeFailed, start)
	c.log.Debug("allow failed over to policy", "err", err)
	return v, c.neverReached()
}

// unreachable reports whether a call failed because its node could not
// be reached: no live connection, or one that died under the call. Not
// when the node answered (an Error), the call timed out (the node may
// have acted on it), no node is known, or the client is closed.
func unreachable(err error) bool {
	var answered *proto.Error
	switch {
	case err == nil, errors.As(err, &answered), errors.Is(err, errTimeout), errors.Is(err, errNoOwner),
		errors.Is(err, ErrClosed), errors.Is(err, ErrProtocol), errors.Is(err, ErrBadRequest),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return false
	}
	return true
}

func anyStrict(caps []fcap.Cap) bool {
	for i := range caps {
		if caps[i].Mode == fcap.Strict {
			return true
		}
	}
	return false
}

// Reservation is a granted reservation: it counts against the
// candidate's caps until it expires, is released, or an impression naming
// its ID is recorded.
type Reservation struct {
	Viewer string
	ID     uint64
}

// Reserve atomically checks a candidate's caps and, if all have room,
// holds one impression's worth of each for ttl (in whole milliseconds, as
// the wire carries it: a fraction of one is dropped; under 1ms is an
// invalid request, ErrBadRequest and fcap.ErrBadTTL). Strict caps
// use it at decision time so in-flight impressions cannot overshoot. The
// Reservation is zero unless the verdict is allowed by the cluster; a
// failed call follows the failure policy and reserves nothing.
func (c *Client) Reserve(ctx context.Context, viewer string, cand fcap.Candidate, ttl time.Duration, opts ...CallOption) (Verdict, Reservation, error) {
	start := time.Now()
	if c.closed() {
		return Verdict{}, Reservation{}, ErrClosed
	}
	if err := cancelled(ctx, "reserve"); err != nil {
		c.m.observe(opReserve, outcomeError, start)
		return Verdict{}, Reservation{}, err
	}
	if ttl < time.Millisecond {
		c.m.observe(opReserve, outcomeBadRequest, start)
		return Verdict{}, Reservation{}, fmt.Errorf("%w: ttl %v: %w", ErrBadRequest, ttl, fcap.ErrBadTTL)
	}
	o := applyOptions(opts)
	deadline := c.deadline(ctx, start)
	viewer = c.canonical(ctx, viewer, &o, deadline)
	req := proto.Reserve{Viewer: viewer, Now: o.now, HasNow: o.hasNow, TTL: ttl.Milliseconds(), Caps: cand.Caps}
	cl, err := c.owned(ctx, viewer, &req, proto.TypeReserveResult, deadline)
	switch {
	case err == nil:
		v, id := Verdict{Verdict: cl.reserve.Verdict}, cl.reserve.ID
		putCall(cl)
		c.m.observe(opReserve, outcomeOK, start)
		if !v.Allowed {
			return v, Reservation{}, nil
		}
		return v, Reservation{Viewer: viewer, ID: id}, nil
	case errors.Is(err, proto.ErrBadRequest):
		c.m.observe(opReserve, outcomeBadRequest, start)
		return Verdict{}, Reservation{}, err
	case errors.Is(err, ErrClosed):
		return Verdict{}, Reservation{}, ErrClosed
	}
	if cerr := cancelled(ctx, "reserve"); cerr != nil {
		c.m.observe(opReserve, outcomeError, start)
		return Verdict{}, Reservation{}, cerr
	}
	v := failVerdict(&c.cfg, anyStrict(cand.Caps))
	c.m.failVerdicts([]Verdict{v})
	c.m.observe(opReserve, outcomeFailed, start)
	return v, Reservation{}, c.neverReached()
}

// Release drops a reservation before its ttl. It returns
// ErrUnknownReservation if the owner does not hold it (released,
// confirmed by a Record, or expired), and an error wrapping
// ErrUnavailable if the cluster cannot answer by the deadline: the
// reservation then simply expires.
func (c *Client) Release(ctx context.Context, r Reservation) error {
	start := time.Now()
	if c.closed() {
		return ErrClosed
	}
	req := proto.Release{Viewer: r.Viewer, ID: r.ID}
	cl, err := c.owned(ctx, r.Viewer, &req, proto.TypeReleaseResult, c.deadline(ctx, start))
	if err = c.unavailable(ctx, err); err != nil {
		c.m.observe(opRelease, outcomeOf(err), start)
		return err
	}
	putCall(cl)
	c.m.observe(opRelease, outcomeOK, start)
	return nil
}

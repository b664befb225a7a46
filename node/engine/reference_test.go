package engine_test

// The reference model and the op driver shared by TestEngineModel
// (model_test.go) and FuzzEngine (fuzz_test.go).
//
// The reference is deliberately naive: it keeps every impression time
// forever in a plain slice per counter and counts by scanning. The driver
// draws ops from a chooser (a seeded PCG for the model test, the fuzz
// input's bytes for the fuzz target), runs each op on the engine and on
// the reference, and fails at the first disagreement, printing the op,
// both results and the ops before it.
//
// The driver keeps to the rules under which the engine's answers are
// exact: the clock of Allow, Check, CheckTable and Reserve never moves
// back, Record times are never later than the clock, and caps on the same
// scope and id are identical wherever they appear (every candidate
// carries its groups' full cap lists), so a sliding counter always
// retains at least as many timestamps as any of its caps' limits. Buckets
// caps are approximate: for them the reference knows a range for the
// count, asserts the engine stays inside it, and follows the engine's
// decision.

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/node/engine"
)

// ---------------------------------------------------------------------
// The catalogue.

func modelCap(scope, id string, limit, window int64, algo fcap.Algorithm) fcap.Cap {
	return fcap.Cap{Scope: scope, ID: id, Limit: limit, Window: fcap.Millis(window), Algorithm: algo}
}

func strict(c fcap.Cap) fcap.Cap {
	c.Mode = fcap.Strict
	return c
}

// Cap groups: every cap of one scope and id. A candidate that names a
// group carries all of it, unchanged.
var (
	groupC1 = []fcap.Cap{ // two sliding caps sharing one counter
		modelCap("campaign", "c1", 3, 50, fcap.Sliding),
		modelCap("campaign", "c1", 5, 200, fcap.Sliding),
	}
	groupC2 = []fcap.Cap{modelCap("campaign", "c2", 2, 30, fcap.Sliding)}
	groupC3 = []fcap.Cap{ // sliding and buckets on one scope and id: two counters
		modelCap("campaign", "c3", 4, 80, fcap.Sliding),
		modelCap("campaign", "c3", 4, 80, fcap.Buckets), // g = 8
	}
	groupA1 = []fcap.Cap{
		strict(modelCap("advertiser", "a1", 6, 300, fcap.Sliding)),
		modelCap("advertiser", "a1", 4, 100, fcap.Fixed),
	}
	groupA2 = []fcap.Cap{
		modelCap("advertiser", "a2", 5, 7, fcap.Buckets),   // 7 buckets of 1: exact
		modelCap("advertiser", "a2", 8, 250, fcap.Buckets), // g = 25
	}
	groupK1 = []fcap.Cap{modelCap("creative", "k1", 2, 40, fcap.Fixed)}
	groupK2 = []fcap.Cap{modelCap("creative", "k2", 1, 25, fcap.Sliding)}
	groupK3 = []fcap.Cap{modelCap("creative", "k3", 3, 95, fcap.Buckets)} // g = 10
	groupK4 = []fcap.Cap{                                                 // two fixed counters
		modelCap("creative", "k4", 3, 60, fcap.Fixed),
		strict(modelCap("creative", "k4", 5, 120, fcap.Fixed)),
	}
	groupK5 = []fcap.Cap{strict(modelCap("creative", "k5", 2, 5, fcap.Sliding))}
	groupK6 = []fcap.Cap{
		modelCap("creative", "k6", 2, 300, fcap.Buckets), // g = 30
		modelCap("creative", "k6", 1, 13, fcap.Buckets),  // g = 2, and 10 buckets cover 20 ticks
	}
	// A window longer than 2^32 ticks keeps timestamps across the clock's
	// far jumps, so that a viewer's live timestamps span more than 2^32
	// ticks and the engine widens them.
	groupKW = []fcap.Cap{modelCap("creative", "kw", 3, modelLongWindow, fcap.Sliding)}

	modelGroups = [][]fcap.Cap{groupC1, groupC2, groupC3, groupA1, groupA2, groupK1, groupK2, groupK3, groupK4, groupK5, groupK6, groupKW}
)

type modelCandidate struct {
	name   string
	caps   []fcap.Cap
	viewer string // if set, the only viewer that writes the candidate
}

func candidateOf(name string, groups ...[]fcap.Cap) modelCandidate {
	return modelCandidate{name: name, caps: slices.Concat(groups...)}
}

// modelCatalogue holds the candidates that Allow, Reserve and Record use.
var modelCatalogue = []modelCandidate{
	candidateOf("k1+c1+a1", groupK1, groupC1, groupA1),
	candidateOf("k2+c1+a1", groupK2, groupC1, groupA1),
	candidateOf("k3+c2+a1", groupK3, groupC2, groupA1),
	candidateOf("a1+c1", groupA1, groupC1),
	candidateOf("c1", groupC1),
	candidateOf("k4+c2", groupK4, groupC2),
	candidateOf("k2+c3", groupK2, groupC3),
	candidateOf("k3", groupK3),
	candidateOf("a2", groupA2),
	candidateOf("k5+c2+c2", groupK5, groupC2, groupC2), // one cap twice
	candidateOf("k6+a2+c3", groupK6, groupA2, groupC3),
	candidateOf("k1", groupK1),
	candidateOf("k5+a1", groupK5, groupA1),
	// Only v4 writes kw, whose timestamps live for 2^33 ticks, so that the
	// other viewers go idle and the sweeper frees them.
	{name: "kw+c2", caps: slices.Concat(groupKW, groupC2), viewer: "v4"},
}

const modelLongWindow = 1 << 33

// modelCheckPool holds what Check and CheckTable may ask about: the
// catalogue and every cap alone (a read may name any subset of caps; only
// writes must carry whole groups).
var modelCheckPool = func() []modelCandidate {
	pool := slices.Clone(modelCatalogue)
	for _, g := range modelGroups {
		for i, c := range g {
			pool = append(pool, modelCandidate{name: fmt.Sprintf("%s:%s[%d]", c.Scope, c.ID, i), caps: []fcap.Cap{c}})
		}
	}
	return pool
}()

var modelViewers = []string{"v0", "v1", "v2", "v3", "v4"}

// ---------------------------------------------------------------------
// The reference.

// refKey names a counter: (viewer, scope, id) for Sliding, plus the
// algorithm and window for Buckets and Fixed.
type refKey struct {
	viewer, scope, id string
	algo              fcap.Algorithm
	window            int64 // 0 for Sliding
}

func refKeyOf(viewer string, c fcap.Cap) refKey {
	k := refKey{viewer: viewer, scope: c.Scope, id: c.ID, algo: c.Algorithm}
	if c.Algorithm != fcap.Sliding {
		k.window = c.WindowMillis()
	}
	return k
}

// refKeysOf returns the distinct counters of caps, in order.
func refKeysOf(viewer string, caps []fcap.Cap) []refKey {
	var keys []refKey
	for _, c := range caps {
		if k := refKeyOf(viewer, c); !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	return keys
}

type refReservation struct {
	id      uint64
	viewer  string
	cand    int // index in modelCatalogue
	keys    []refKey
	at      int64 // when it was taken
	expires int64
	held    bool // neither released nor confirmed (it may have expired)
}

type reference struct {
	buckets int64 // engine.Config.Buckets
	maxRes  int   // engine.Config.MaxReservationsPerViewer
	hw      int64
	times   map[refKey][]int64         // every time written to each counter, forever
	seen    map[string]map[string]bool // per viewer, the impression ids recorded
	res     []*refReservation          // every reservation granted, oldest first
	byID    map[uint64]*refReservation
	heldBy  map[string][]*refReservation // per viewer, the reservations held
}

func newReference(cfg engine.Config) *reference {
	return &reference{
		buckets: int64(cfg.Buckets),
		maxRes:  cfg.MaxReservationsPerViewer,
		hw:      -1,
		times:   map[refKey][]int64{},
		seen:    map[string]map[string]bool{},
		byID:    map[uint64]*refReservation{},
		heldBy:  map[string][]*refReservation{},
	}
}

func (r *reference) observe(t int64) { r.hw = max(r.hw, t) }

// reserved counts the live reservations at now on counter k.
func (r *reference) reserved(k refKey, now int64) int64 {
	var n int64
	for _, res := range r.heldBy[k.viewer] {
		if res.expires > now && slices.Contains(res.keys, k) {
			n++
		}
	}
	return n
}

// used returns the range of what cap c counts at now, reservations
// included. The range is one value but for Buckets caps.
func (r *reference) used(viewer string, c fcap.Cap, now int64) (lo, hi int64) {
	k := refKeyOf(viewer, c)
	count := func(in func(t int64) bool) int64 {
		var n int64
		for _, t := range r.times[k] {
			if in(t) {
				n++
			}
		}
		return n
	}
	w := c.WindowMillis()
	switch c.Algorithm {
	case fcap.Sliding:
		lo = count(func(t int64) bool { return t > now-w })
		hi = lo
	case fcap.Fixed:
		lo = count(func(t int64) bool { return t/w == now/w })
		hi = lo
	case fcap.Buckets:
		b := min(r.buckets, w)
		g := (w + b - 1) / b
		lo = count(func(t int64) bool { return t > now-w })
		hi = count(func(t int64) bool { return t > now-(w+g-1) })
	}
	res := r.reserved(k, now)
	return lo + res, hi + res
}

func (r *reference) verdictRange(viewer string, caps []fcap.Cap, now int64) verdictRange {
	vr := verdictRange{caps: caps}
	for _, c := range caps {
		lo, hi := r.used(viewer, c, now)
		vr.lo = append(vr.lo, lo)
		vr.hi = append(vr.hi, hi)
	}
	return vr
}

// write appends t to every distinct counter of caps.
func (r *reference) write(viewer string, caps []fcap.Cap, t int64) {
	for _, k := range refKeysOf(viewer, caps) {
		r.times[k] = append(r.times[k], t)
	}
}

// record is Record on the reference.
func (r *reference) record(viewer string, imp fcap.Impression) fcap.RecordStatus {
	r.observe(imp.Time)
	if res := r.held(viewer, imp.Reservation); res != nil {
		r.drop(res)
	}
	var longest int64
	for _, c := range imp.Caps {
		longest = max(longest, c.WindowMillis())
	}
	if imp.Time <= r.hw-longest {
		return fcap.Stale
	}
	if r.seen[viewer][imp.ID] {
		return fcap.Duplicate
	}
	r.write(viewer, imp.Caps, imp.Time)
	if r.seen[viewer] == nil {
		r.seen[viewer] = map[string]bool{}
	}
	r.seen[viewer][imp.ID] = true
	return fcap.Recorded
}

// take records a granted reservation.
func (r *reference) take(res *refReservation) {
	r.res = append(r.res, res)
	r.byID[res.id] = res
	r.heldBy[res.viewer] = append(r.heldBy[res.viewer], res)
}

// drop marks a held reservation released or confirmed.
func (r *reference) drop(res *refReservation) {
	res.held = false
	r.heldBy[res.viewer] = slices.DeleteFunc(r.heldBy[res.viewer], func(x *refReservation) bool { return x == res })
}

// held returns viewer's reservation id if it is neither released nor
// confirmed, or nil.
func (r *reference) held(viewer string, id uint64) *refReservation {
	if res := r.byID[id]; res != nil && res.held && res.viewer == viewer {
		return res
	}
	return nil
}

// dump describes what the reference holds for viewer that may still
// count: the recent times of each counter and the held reservations.
func (r *reference) dump(viewer string) string {
	var b strings.Builder
	var keys []refKey
	for k := range r.times {
		if k.viewer == viewer {
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, func(a, b refKey) int {
		return strings.Compare(fmt.Sprint(a), fmt.Sprint(b))
	})
	for _, k := range keys {
		ts := r.times[k]
		var recent []int64
		for _, t := range ts {
			if t > r.hw-400 || k.scope == "creative" && k.id == "kw" && t > r.hw-modelLongWindow {
				recent = append(recent, t)
			}
		}
		if len(recent) > 0 {
			fmt.Fprintf(&b, "  %s:%s %s/%d times %v (of %d ever)\n", k.scope, k.id, k.algo, k.window, recent, len(ts))
		}
	}
	for _, res := range r.heldBy[viewer] {
		fmt.Fprintf(&b, "  reservation %#x of %s taken at %d, expires at %d\n", res.id, modelCatalogue[res.cand].name, res.at, res.expires)
	}
	return b.String()
}

// live counts viewer's reservations that count at now.
func (r *reference) live(viewer string, now int64) int {
	n := 0
	for _, res := range r.heldBy[viewer] {
		if res.expires > now {
			n++
		}
	}
	return n
}

// verdictRange is what the reference knows of a candidate's verdict: for
// each cap, the range of its count (one value but for Buckets caps).
type verdictRange struct {
	caps   []fcap.Cap
	lo, hi []int64
}

func (vr verdictRange) exact() bool { return slices.Equal(vr.lo, vr.hi) }

// mayAllow: some counts in the ranges give every cap room.
func (vr verdictRange) mayAllow() bool {
	for i, c := range vr.caps {
		if vr.lo[i] >= c.Limit {
			return false
		}
	}
	return true
}

// mustAllow: every count in the ranges gives every cap room.
func (vr verdictRange) mustAllow() bool {
	for i, c := range vr.caps {
		if vr.hi[i] >= c.Limit {
			return false
		}
	}
	return true
}

// want returns the verdict the exact counts lo give (took: one was taken).
func (vr verdictRange) want(took bool) fcap.Verdict {
	v := fcap.Verdict{Allowed: true, Remaining: fcap.MaxLimit, Blocking: -1}
	for i, c := range vr.caps {
		left := max(c.Limit-vr.lo[i], 0)
		if left == 0 && v.Allowed {
			v.Allowed, v.Blocking = false, i
		}
		v.Remaining = min(v.Remaining, left)
	}
	if v.Allowed && took {
		v.Remaining--
	}
	return v
}

func (vr verdictRange) describe(took bool) string {
	limits := make([]int64, len(vr.caps))
	for i, c := range vr.caps {
		limits[i] = c.Limit
	}
	if vr.exact() {
		return fmt.Sprintf("%+v (used %v of limits %v)", vr.want(took), vr.lo, limits)
	}
	return fmt.Sprintf("used in [%v, %v] of limits %v (buckets)", vr.lo, vr.hi, limits)
}

// check reports whether got is a verdict some counts in the ranges give.
// took says got is from a granted Allow or Reserve, whose Remaining is
// after taking one.
func (vr verdictRange) check(got fcap.Verdict, took bool) error {
	remLo, remHi := int64(fcap.MaxLimit), int64(fcap.MaxLimit)
	for i, c := range vr.caps {
		remLo = min(remLo, max(0, c.Limit-vr.hi[i]))
		remHi = min(remHi, max(0, c.Limit-vr.lo[i]))
	}
	if got.Allowed {
		for i, c := range vr.caps {
			if vr.lo[i] >= c.Limit {
				return fmt.Errorf("allowed, but cap %d (%v) has used at least %d", i, c, vr.lo[i])
			}
		}
		if got.Blocking != -1 {
			return fmt.Errorf("allowed with Blocking %d, want -1", got.Blocking)
		}
		if took {
			remLo, remHi = max(remLo, 1)-1, remHi-1
		}
		if got.Remaining < remLo || got.Remaining > remHi {
			return fmt.Errorf("Remaining %d outside [%d, %d]", got.Remaining, remLo, remHi)
		}
		return nil
	}
	if vr.mustAllow() {
		return errors.New("denied, but every cap has room")
	}
	if got.Remaining != 0 {
		return fmt.Errorf("denied with Remaining %d, want 0", got.Remaining)
	}
	j := got.Blocking
	if j < 0 || j >= len(vr.caps) {
		return fmt.Errorf("denied with Blocking %d, outside [0, %d)", j, len(vr.caps))
	}
	if vr.hi[j] < vr.caps[j].Limit {
		return fmt.Errorf("Blocking cap %d (%v) has room: used at most %d", j, vr.caps[j], vr.hi[j])
	}
	for i := range j {
		if vr.lo[i] >= vr.caps[i].Limit {
			return fmt.Errorf("Blocking %d, but cap %d before it is full", j, i)
		}
	}
	return nil
}

// ---------------------------------------------------------------------
// Choosers: where the driver's random choices come from.

type chooser interface {
	// intn returns a number in [0, n); 0 when n <= 1.
	intn(n int) int
}

type randChooser struct{ r *rand.Rand }

func (c randChooser) intn(n int) int {
	if n <= 1 {
		return 0
	}
	return c.r.IntN(n)
}

// byteChooser decodes choices from fuzz input: as many bytes as n needs,
// modulo n. Past the end it returns 0.
type byteChooser struct{ data []byte }

func (c *byteChooser) intn(n int) int {
	if n <= 1 {
		return 0
	}
	x := 0
	for k := n - 1; k > 0; k >>= 8 {
		x <<= 8
		if len(c.data) > 0 {
			x |= int(c.data[0])
			c.data = c.data[1:]
		}
	}
	return x % n
}

func (c *byteChooser) done() bool { return len(c.data) == 0 }

// recordingChooser passes on src's choices and writes them as the bytes
// from which a byteChooser makes the same choices: model runs become fuzz
// seeds.
type recordingChooser struct {
	src chooser
	out []byte
}

func (c *recordingChooser) intn(n int) int {
	x := c.src.intn(n)
	if n <= 1 {
		return x
	}
	bytes := 0
	for k := n - 1; k > 0; k >>= 8 {
		bytes++
	}
	for i := bytes - 1; i >= 0; i-- {
		c.out = append(c.out, byte(x>>(8*i)))
	}
	return x
}

func chance(src chooser, num, den int) bool { return src.intn(den) < num }

// ---------------------------------------------------------------------
// The driver.

type sentImpression struct {
	viewer string
	imp    fcap.Impression
}

type modelHarness struct {
	tb    testing.TB
	name  string // says how to replay a failure
	e     *engine.Engine
	ref   *reference
	now   int64 // the clock of Allow, Check, CheckTable, Reserve
	op    int   // index of the current op
	tempo int64 // the clock's divisor (modelTempos)
	// curViewer is the viewer of the current op, whose state a failure
	// prints.
	curViewer string
	nextImp   int
	imps      []sentImpression // every impression sent, for redeliveries
	table     fcap.CheckTable
	history   []string // the latest ops, for failure messages
	tally     map[string]int
}

const modelHistory = 24

func newModelHarness(tb testing.TB, name string) *modelHarness {
	tb.Helper()
	cfg := engine.DefaultLocalConfig()
	e, err := engine.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return &modelHarness{tb: tb, name: name, e: e, ref: newReference(e.Config()), tally: map[string]int{}}
}

// failf stops the run with the op, both results, the reference's state
// for the op's viewer and the ops before it.
func (h *modelHarness) failf(desc, got, want string) {
	h.tb.Helper()
	h.tb.Fatalf("%s\nop %d: %s\n  engine:    %s\n  reference: %s\n  (high-water %d, clock %d)\nreference state of %s:\n%s\nprevious ops, oldest first:\n%s",
		h.name, h.op, desc, got, want, h.ref.hw, h.now, h.curViewer, h.ref.dump(h.curViewer), strings.Join(h.history, "\n"))
}

// note logs a successful op for later failure messages.
func (h *modelHarness) note(desc, result string) {
	if len(h.history) == modelHistory {
		h.history = slices.Delete(h.history, 0, 1)
	}
	h.history = append(h.history, fmt.Sprintf("  op %d: %s -> %s", h.op, desc, result))
}

func (h *modelHarness) count(what string) { h.tally[what]++ }

// engineSnap is what the engine holds for one viewer, and its totals.
type engineSnap struct {
	state engine.ViewerState
	held  bool
	stats engine.Stats
}

func (h *modelHarness) snap(v string) engineSnap {
	st, ok := h.e.Viewer(v)
	s := engine.Stats{}
	if h.op%8 == 0 { // Stats locks every stripe: not on every op
		s = h.e.Stats()
		s.HighWater = 0 // an op may move it; the callers check it
	}
	return engineSnap{state: st, held: ok, stats: s}
}

// unchanged fails the op unless the engine holds what it held before
// (but for reservations, which a stale or duplicate Record drops).
func (h *modelHarness) unchanged(desc, v string, before engineSnap, butReservations bool) {
	h.tb.Helper()
	after := h.snap(v)
	if butReservations {
		after.state.Reservations = before.state.Reservations
		after.stats.Bytes = before.stats.Bytes
	}
	if !reflect.DeepEqual(before, after) {
		h.failf(desc, fmt.Sprintf("changed the engine: %s holds %+v, stats %+v", v, after.state, after.stats),
			fmt.Sprintf("no change: %s held %+v, stats %+v", v, before.state, before.stats))
	}
}

func errString(err error) string {
	if err == nil {
		return "err <nil>"
	}
	return "err " + err.Error()
}

// viewer picks a viewer, v0 and v1 more often than the rest so that
// their caps fill up.
func (h *modelHarness) viewer(src chooser) string {
	switch x := src.intn(8); {
	case x < 3:
		h.curViewer = modelViewers[0]
	case x < 5:
		h.curViewer = modelViewers[1]
	default:
		h.curViewer = modelViewers[2+src.intn(len(modelViewers)-2)]
	}
	return h.curViewer
}

func (h *modelHarness) otherViewer(src chooser, not string) string {
	i := slices.Index(modelViewers, not)
	h.curViewer = modelViewers[(i+1+src.intn(len(modelViewers)-1))%len(modelViewers)]
	return h.curViewer
}

// candidate picks a catalogue candidate for viewer v, the first five
// more often.
func (h *modelHarness) candidate(src chooser, v string) (int, modelCandidate) {
	i := src.intn(len(modelCatalogue))
	if chance(src, 1, 2) || modelCatalogue[i].viewer != "" && modelCatalogue[i].viewer != v {
		i %= 5
	}
	return i, modelCatalogue[i]
}

func (h *modelHarness) newImpID() string {
	h.nextImp++
	return fmt.Sprintf("imp-%d", h.nextImp)
}

// modelOps are the ops the driver draws, by weight.
var modelOps = []struct {
	name   string
	weight int
	run    func(h *modelHarness, src chooser)
}{
	{"Allow", 22, (*modelHarness).doAllow},
	{"Check", 10, (*modelHarness).doCheck},
	{"fcap.CheckTable", 7, (*modelHarness).doCheckTable},
	{"Record", 14, (*modelHarness).doRecord},
	{"Redeliver", 8, (*modelHarness).doRedeliver},
	{"Reserve", 11, (*modelHarness).doReserve},
	{"Confirm", 7, (*modelHarness).doConfirm},
	{"Release", 6, (*modelHarness).doRelease},
	{"Sweep", 4, (*modelHarness).doSweep},
	{"Invalid", 6, (*modelHarness).doInvalid},
	{"Jump", 1, (*modelHarness).doJump},
	{"Audit", 2, func(h *modelHarness, src chooser) { h.audit(h.viewer(src)) }},
	{"Crowd", 1, (*modelHarness).doCrowd},
	{"Edge", 2, (*modelHarness).doEdge},
}

var modelOpsTotal = func() int {
	n := 0
	for _, op := range modelOps {
		n += op.weight
	}
	return n
}()

// Tempos: the clock advances by 0..20 ticks per op divided by one of
// these, so that caps fill up in slow stretches and windows turn over in
// fast ones.
var modelTempos = []int64{20, 20, 5, 1}

// step advances the clock and runs one op.
func (h *modelHarness) step(src chooser) {
	if h.op%200 == 0 {
		h.tempo = modelTempos[src.intn(len(modelTempos))]
	}
	h.now += int64(src.intn(21)) / h.tempo
	x := src.intn(modelOpsTotal)
	for _, op := range modelOps {
		if x < op.weight {
			h.op++
			op.run(h, src)
			break
		}
		x -= op.weight
	}
	if got := h.e.HighWater(); got != h.ref.hw {
		h.failf("(after the op) HighWater()", fmt.Sprint(got), fmt.Sprint(h.ref.hw))
	}
}

func (h *modelHarness) doAllow(src chooser) {
	v := h.viewer(src)
	_, cand := h.candidate(src, v)
	now := h.now
	desc := fmt.Sprintf("Allow(%s, now=%d, %s)", v, now, cand.name)
	h.ref.observe(now)
	want := h.ref.verdictRange(v, cand.caps, now)
	before := h.snap(v)
	got, err := h.e.Allow(v, now, slices.Clone(cand.caps)...)
	if err != nil {
		h.failf(desc, errString(err), want.describe(true))
	}
	if err := want.check(got, true); err != nil {
		h.failf(desc, fmt.Sprintf("%+v", got), want.describe(true)+": "+err.Error())
	}
	if got.Allowed {
		h.ref.write(v, cand.caps, now)
		h.count("Allow granted")
	} else {
		h.unchanged(desc+" (denied)", v, before, false)
		h.count("Allow denied")
	}
	h.note(desc, fmt.Sprintf("%+v", got))
}

// checkCandidates draws 0..6 candidates from modelCheckPool, often
// repeating neighbours' caps (which Check counts once).
func (h *modelHarness) checkCandidates(src chooser) ([]modelCandidate, string) {
	n := src.intn(7)
	cands := make([]modelCandidate, 0, n)
	names := make([]string, 0, n)
	for range n {
		var c modelCandidate
		if len(cands) > 0 && chance(src, 1, 4) {
			c = cands[len(cands)-1]
		} else {
			c = modelCheckPool[src.intn(len(modelCheckPool))]
		}
		cands = append(cands, c)
		names = append(names, c.name)
	}
	return cands, "[" + strings.Join(names, " ") + "]"
}

var sentinelVerdict = fcap.Verdict{Allowed: true, Remaining: 12345, Blocking: 7}

// compareVerdicts checks the verdicts of a Check or CheckTable, appended
// to out (which held prefix verdicts).
func (h *modelHarness) compareVerdicts(desc func() string, v string, cands []modelCandidate, now int64, prefix int, got []fcap.Verdict, err error) {
	wants := make([]verdictRange, len(cands))
	for i, c := range cands {
		wants[i] = h.ref.verdictRange(v, c.caps, now)
	}
	wantAll := func() string {
		descs := make([]string, len(wants))
		for i, w := range wants {
			descs[i] = w.describe(false)
		}
		return "[" + strings.Join(descs, ", ") + "]"
	}
	if err != nil {
		h.failf(desc(), errString(err), wantAll())
	}
	if len(got) != prefix+len(cands) {
		h.failf(desc(), fmt.Sprintf("%d verdicts (with %d before them) %+v", len(got), prefix, got), wantAll())
	}
	for i := range prefix {
		if got[i] != sentinelVerdict {
			h.failf(desc(), fmt.Sprintf("verdict %d of out overwritten: %+v", i, got[i]), wantAll())
		}
	}
	for i, want := range wants {
		if err := want.check(got[prefix+i], false); err != nil {
			h.failf(desc(), fmt.Sprintf("verdict %d: %+v (all: %+v)", i, got[prefix+i], got[prefix:]), fmt.Sprintf("verdict %d: %s: %v", i, want.describe(false), err))
		}
		if got[prefix+i].Allowed {
			h.count("Check allowed")
		} else {
			h.count("Check denied")
		}
	}
}

// describeOf returns a constant description.
func describeOf(desc string) func() string { return func() string { return desc } }

// compactVerdicts writes verdicts as +remaining when allowed and
// -blocking when denied.
func compactVerdicts(vs []fcap.Verdict) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		if v.Allowed {
			parts[i] = fmt.Sprintf("+%d", v.Remaining)
		} else {
			parts[i] = fmt.Sprintf("-%d", v.Blocking)
		}
	}
	return "[" + strings.Join(parts, " ") + "] (+remaining, -blocking cap)"
}

func (h *modelHarness) doCheck(src chooser) {
	v := h.viewer(src)
	cands, names := h.checkCandidates(src)
	now := h.now
	var out []fcap.Verdict
	if chance(src, 1, 3) {
		out = append(out, sentinelVerdict)
	}
	desc := fmt.Sprintf("Check(%s, now=%d, %s, out of len %d)", v, now, names, len(out))
	h.ref.observe(now)
	ecands := make([]fcap.Candidate, len(cands))
	for i, c := range cands {
		ecands[i].Caps = slices.Clone(c.caps)
	}
	before := h.snap(v)
	got, err := h.e.Check(v, ecands, now, out)
	h.compareVerdicts(describeOf(desc), v, cands, now, len(out), got, err)
	h.unchanged(desc, v, before, false)
	h.note(desc, compactVerdicts(got[len(out):]))
}

// buildTable fills t with cands in table form: caps shared or repeated at
// random, shuffled, maybe with an unused cap.
func buildTable(src chooser, t *fcap.CheckTable, cands []modelCandidate) {
	t.Reset()
	for _, c := range cands {
		for _, cp := range c.caps {
			ref := -1
			if chance(src, 3, 4) {
				ref = slices.Index(t.Caps, cp)
			}
			if ref < 0 {
				ref = len(t.Caps)
				t.Caps = append(t.Caps, cp)
			}
			t.Refs = append(t.Refs, uint16(ref))
		}
		t.Ends = append(t.Ends, uint32(len(t.Refs)))
	}
	if chance(src, 1, 4) {
		g := modelGroups[src.intn(len(modelGroups))]
		t.Caps = append(t.Caps, g[src.intn(len(g))])
	}
	// Shuffle the caps, remapping the refs.
	n := len(t.Caps)
	perm := make([]uint16, n) // old index -> new index
	for i := range perm {
		perm[i] = uint16(i)
	}
	for i := n - 1; i > 0; i-- {
		j := src.intn(i + 1)
		perm[i], perm[j] = perm[j], perm[i]
	}
	caps := make([]fcap.Cap, n)
	for old, nw := range perm {
		caps[nw] = t.Caps[old]
	}
	copy(t.Caps, caps)
	for i, r := range t.Refs {
		t.Refs[i] = perm[r]
	}
}

func (h *modelHarness) doCheckTable(src chooser) {
	v := h.viewer(src)
	cands, names := h.checkCandidates(src)
	now := h.now
	buildTable(src, &h.table, cands)
	var out []fcap.Verdict
	if chance(src, 1, 3) {
		out = append(out, sentinelVerdict)
	}
	desc := fmt.Sprintf("fcap.CheckTable(%s, now=%d, %s as %d caps refs %v ends %v, out of len %d)",
		v, now, names, len(h.table.Caps), h.table.Refs, h.table.Ends, len(out))
	h.ref.observe(now)
	before := h.snap(v)
	got, err := h.e.CheckTable(v, &h.table, now, out)
	h.compareVerdicts(describeOf(desc), v, cands, now, len(out), got, err)
	h.unchanged(desc, v, before, false)
	h.note(desc, compactVerdicts(got[len(out):]))
}

// sendRecord records imp on the engine and the reference and compares.
func (h *modelHarness) sendRecord(kind, v string, imp fcap.Impression, candName string) {
	desc := fmt.Sprintf("%s: Record(%s, {ID:%s Time:%d Caps:%s Reservation:%#x})", kind, v, imp.ID, imp.Time, candName, imp.Reservation)
	held := h.ref.held(v, imp.Reservation) != nil
	want := h.ref.record(v, imp)
	sent := imp
	sent.Caps = slices.Clone(imp.Caps)
	before := h.snap(v)
	got, err := h.e.Record(v, sent)
	if err != nil || got != want {
		h.failf(desc, fmt.Sprintf("%v, %s", got, errString(err)), want.String())
	}
	if got != fcap.Recorded {
		h.unchanged(desc, v, before, true)
	}
	h.imps = append(h.imps, sentImpression{viewer: v, imp: imp})
	h.count(kind + " " + got.String())
	if held {
		h.count(kind + " dropped a reservation")
	}
	h.note(desc, got.String())
}

// pastTime returns a time at most window+40 ticks before the clock,
// often the clock itself.
func (h *modelHarness) pastTime(src chooser, caps []fcap.Cap) int64 {
	if chance(src, 1, 4) {
		return h.now
	}
	var longest int64
	for _, c := range caps {
		longest = max(longest, c.WindowMillis())
	}
	return max(0, h.now-int64(src.intn(int(longest)+40)))
}

func (h *modelHarness) doRecord(src chooser) {
	v := h.viewer(src)
	_, cand := h.candidate(src, v)
	imp := fcap.Impression{ID: h.newImpID(), Time: h.pastTime(src, cand.caps), Caps: cand.caps}
	if len(h.ref.res) > 0 && chance(src, 1, 8) {
		// Name any reservation, maybe another viewer's or another
		// candidate's.
		imp.Reservation = h.ref.res[src.intn(len(h.ref.res))].id
	}
	h.sendRecord("Record", v, imp, cand.name)
}

// candName names the catalogue candidate whose caps are caps.
func candName(caps []fcap.Cap) string {
	for _, c := range modelCatalogue {
		if slices.Equal(c.caps, caps) {
			return c.name
		}
	}
	return fmt.Sprint(caps)
}

func (h *modelHarness) doRedeliver(src chooser) {
	if len(h.imps) == 0 {
		h.doRecord(src)
		return
	}
	var s sentImpression
	if chance(src, 3, 4) {
		s = h.imps[len(h.imps)-1-src.intn(min(len(h.imps), 8))]
	} else {
		s = h.imps[src.intn(len(h.imps))]
	}
	v := s.viewer
	h.curViewer = v
	if chance(src, 1, 6) {
		v = h.otherViewer(src, v)
	}
	h.sendRecord("Redeliver", v, s.imp, candName(s.imp.Caps))
}

func (h *modelHarness) doReserve(src chooser) {
	v := h.viewer(src)
	ci, cand := h.candidate(src, v)
	now := h.now
	ttl := int64(1 + src.intn(150))
	if chance(src, 1, 4) {
		ttl = int64(1 + src.intn(3)) // expires about when the next sweep runs
	}
	desc := fmt.Sprintf("Reserve(%s, %s, now=%d, ttl=%d)", v, cand.name, now, ttl)
	h.ref.observe(now)
	want := h.ref.verdictRange(v, cand.caps, now)
	live := h.ref.live(v, now)
	before := h.snap(v)
	got, id, err := h.e.Reserve(v, fcap.Candidate{Caps: slices.Clone(cand.caps)}, now, ttl)
	if errors.Is(err, fcap.ErrTooManyReservations) {
		if live < h.ref.maxRes || !want.mayAllow() {
			h.failf(desc, errString(err), fmt.Sprintf("%s with %d live reservations", want.describe(true), live))
		}
		h.count("Reserve too many")
		h.note(desc, errString(err))
		return
	}
	if err != nil {
		h.failf(desc, errString(err), want.describe(true))
	}
	if got.Allowed && live >= h.ref.maxRes {
		h.failf(desc, fmt.Sprintf("%+v id %#x", got, id), fmt.Sprintf("fcap.ErrTooManyReservations (%d live)", live))
	}
	if err := want.check(got, true); err != nil {
		h.failf(desc, fmt.Sprintf("%+v id %#x", got, id), want.describe(true)+": "+err.Error())
	}
	switch {
	case got.Allowed && (id == 0 || h.ref.byID[id] != nil):
		h.failf(desc, fmt.Sprintf("%+v id %#x", got, id), "a new reservation id")
	case !got.Allowed && id != 0:
		h.failf(desc, fmt.Sprintf("%+v id %#x", got, id), "denied with id 0")
	}
	if got.Allowed {
		res := &refReservation{id: id, viewer: v, cand: ci, keys: refKeysOf(v, cand.caps), at: now, expires: now + ttl, held: true}
		h.ref.take(res)
		h.count("Reserve granted")
	} else {
		h.unchanged(desc+" (denied)", v, before, false)
		h.count("Reserve denied")
	}
	h.note(desc, fmt.Sprintf("%+v id %#x", got, id))
}

// pickReservation returns a reservation ever granted, most often a recent
// one, or nil if none was.
func (h *modelHarness) pickReservation(src chooser) *refReservation {
	n := len(h.ref.res)
	switch {
	case n == 0:
		return nil
	case chance(src, 3, 4):
		return h.ref.res[n-1-src.intn(min(n, 8))]
	default:
		return h.ref.res[src.intn(n)]
	}
}

func (h *modelHarness) doConfirm(src chooser) {
	res := h.pickReservation(src)
	if res != nil && !res.held && chance(src, 2, 3) {
		// Prefer the newest held reservation.
		for _, r := range slices.Backward(h.ref.res) {
			if r.held {
				res = r
				break
			}
		}
	}
	if res == nil {
		h.doReserve(src)
		return
	}
	v := res.viewer
	h.curViewer = v
	if chance(src, 1, 10) {
		v = h.otherViewer(src, v)
	}
	cand := modelCatalogue[res.cand]
	t := max(res.at, h.now-int64(src.intn(60)))
	imp := fcap.Impression{ID: h.newImpID(), Time: t, Caps: cand.caps, Reservation: res.id}
	h.sendRecord("Confirm", v, imp, cand.name)
}

func (h *modelHarness) doRelease(src chooser) {
	res := h.pickReservation(src)
	var v string
	var id uint64
	switch {
	case res == nil || chance(src, 1, 10):
		v, id = h.viewer(src), uint64(src.intn(1<<16))+1 // never issued, most likely
	case chance(src, 1, 9):
		v, id = h.otherViewer(src, res.viewer), res.id
	default:
		v, id = res.viewer, res.id
	}
	h.curViewer = v
	desc := fmt.Sprintf("Release(%s, %#x)", v, id)
	err := h.e.Release(v, id)
	held := h.ref.held(v, id)
	switch {
	case held == nil:
		if !errors.Is(err, fcap.ErrUnknownReservation) || errors.Is(err, fcap.ErrInvalid) {
			h.failf(desc, errString(err), "fcap.ErrUnknownReservation")
		}
		h.count("Release unknown")
	case held.expires > h.ref.hw:
		if err != nil {
			h.failf(desc, errString(err), fmt.Sprintf("nil (reservation from %d expires at %d)", held.at, held.expires))
		}
		h.count("Release live")
	default:
		if err != nil && !errors.Is(err, fcap.ErrUnknownReservation) {
			h.failf(desc, errString(err), fmt.Sprintf("nil or fcap.ErrUnknownReservation (expired at %d)", held.expires))
		}
		h.count("Release expired")
	}
	if held != nil {
		h.ref.drop(held)
	}
	h.note(desc, errString(err))
}

var sweepBudgets = []int{1, 3, 16, 100, 1 << 30}

func (h *modelHarness) doSweep(src chooser) {
	budget := sweepBudgets[src.intn(len(sweepBudgets))]
	desc := fmt.Sprintf("Sweep(%d)", budget)
	visited, freed := h.e.Sweep(budget)
	if visited < 0 || visited > budget || freed < 0 || freed > visited {
		h.failf(desc, fmt.Sprintf("visited %d, freed %d", visited, freed), fmt.Sprintf("0 <= freed <= visited <= %d", budget))
	}
	if freed > 0 {
		h.count("Sweep freed")
	}
	h.note(desc, fmt.Sprintf("visited %d, freed %d", visited, freed))
	if chance(src, 1, 2) {
		h.audit(h.viewer(src))
	}
}

// modelCrowd is the number of crowd viewers: enough that a stripe of
// DefaultLocalConfig holds dozens of them, so that its table probes,
// grows, shrinks and spans several chunks.
const modelCrowd = 4096

func crowdViewer(i int) string { return fmt.Sprintf("crowd-%04d", i) }

// doCrowd runs one op for each of up to 250 crowd viewers, in one to
// three passes: Allow, Record at the clock, or Check of one candidate.
func (h *modelHarness) doCrowd(src chooser) {
	_, cand := h.candidate(src, "")
	n := 1 + src.intn(250)
	start := src.intn(8) * modelCrowd / 8 // bursts overlap: viewers meet their caps
	stride := []int{1, 7, 1031}[src.intn(3)]
	kind := src.intn(3)
	passes := 1 + src.intn(3)
	now := h.now
	h.ref.observe(now)
	granted := 0
	for i := range n * passes {
		v := crowdViewer((start + i%n*stride) % modelCrowd)
		h.curViewer = v
		switch kind {
		case 0:
			want := h.ref.verdictRange(v, cand.caps, now)
			desc := func() string {
				return fmt.Sprintf("crowd %d/%d: Allow(%s, now=%d, %s)", i, n*passes, v, now, cand.name)
			}
			got, err := h.e.Allow(v, now, slices.Clone(cand.caps)...)
			if err != nil {
				h.failf(desc(), errString(err), want.describe(true))
			}
			if err := want.check(got, true); err != nil {
				h.failf(desc(), fmt.Sprintf("%+v", got), want.describe(true)+": "+err.Error())
			}
			if got.Allowed {
				h.ref.write(v, cand.caps, now)
				granted++
			}
		case 1:
			imp := fcap.Impression{ID: h.newImpID(), Time: now, Caps: cand.caps}
			wantStatus := h.ref.record(v, imp)
			got, err := h.e.Record(v, fcap.Impression{ID: imp.ID, Time: now, Caps: slices.Clone(cand.caps)})
			if err != nil || got != wantStatus {
				desc := fmt.Sprintf("crowd %d/%d: Record(%s, {ID:%s Time:%d Caps:%s})", i, n*passes, v, imp.ID, now, cand.name)
				h.failf(desc, fmt.Sprintf("%v, %s", got, errString(err)), wantStatus.String())
			}
		default:
			desc := func() string {
				return fmt.Sprintf("crowd %d/%d: Check(%s, now=%d, [%s])", i, n*passes, v, now, cand.name)
			}
			got, err := h.e.Check(v, []fcap.Candidate{{Caps: slices.Clone(cand.caps)}}, now, nil)
			h.compareVerdicts(desc, v, []modelCandidate{cand}, now, 0, got, err)
		}
	}
	if kind == 0 && granted < n*passes {
		h.count("Crowd denied")
	}
	h.note(fmt.Sprintf("crowd: %d viewers from %d by %d, %d passes of op %d, %s, now %d", n, start, stride, passes, kind, cand.name, now), fmt.Sprintf("%d granted", granted))
}

// longestWindow is the longest window of caps: an impression's dedupe
// horizon and staleness are judged by it.
func longestWindow(caps []fcap.Cap) int64 {
	var w int64
	for _, c := range caps {
		w = max(w, c.WindowMillis())
	}
	return w
}

// doEdge moves the clock to the last tick at which something the engine
// holds still matters (a recorded impression's id, or a reservation),
// sweeps there, and checks it still matters: a redelivery is a
// duplicate, the reservation counts and can be released.
func (h *modelHarness) doEdge(src chooser) {
	const reach = 400 // how far the clock may move
	if chance(src, 1, 2) {
		for _, s := range slices.Backward(h.imps[max(0, len(h.imps)-64):]) {
			edge := s.imp.Time + longestWindow(s.imp.Caps) - 1
			if !h.ref.seen[s.viewer][s.imp.ID] || edge < h.now || edge > h.now+reach {
				continue
			}
			h.now = edge
			h.curViewer = s.viewer
			h.audit(s.viewer) // moves the high-water mark to the edge
			h.sweepFully()
			h.sendRecord("Edge redeliver", s.viewer, s.imp, candName(s.imp.Caps))
			return
		}
		return
	}
	for _, res := range slices.Backward(h.ref.res[max(0, len(h.ref.res)-64):]) {
		edge := res.expires - 1
		if !res.held || edge < h.now || edge > h.now+reach {
			continue
		}
		h.now = edge
		h.curViewer = res.viewer
		h.audit(res.viewer)
		h.sweepFully()
		h.audit(res.viewer) // the reservation still counts
		desc := fmt.Sprintf("Edge: Release(%s, %#x) of the reservation from %d expiring at %d", res.viewer, res.id, res.at, res.expires)
		if err := h.e.Release(res.viewer, res.id); err != nil {
			h.failf(desc, errString(err), "nil: it has not expired")
		}
		h.ref.drop(res)
		h.count("Edge release")
		h.note(desc, "ok")
		return
	}
}

// sweepFully sweeps every slot: one call may start mid-stripe and stop
// short of the slots before its cursor.
func (h *modelHarness) sweepFully() {
	for range 2 {
		h.e.Sweep(1 << 30)
	}
	h.note("Sweep(1<<30) twice", "")
}

// doJump moves the clock further than one op does: past every window,
// or (rarely) by 2^31 ticks or more, which makes the engine rebase or
// widen a viewer's timestamps.
func (h *modelHarness) doJump(src chooser) {
	d := int64(src.intn(400))
	if chance(src, 1, 8) {
		d = []int64{1 << 31, 1<<32 + 7, 3 << 31}[src.intn(3)]
		h.count("Jump far")
	}
	h.now += d
	h.note(fmt.Sprintf("clock += %d", d), fmt.Sprint(h.now))
}

// audit checks every candidate of the pool for v at the clock.
func (h *modelHarness) audit(v string) {
	h.curViewer = v
	now := h.now
	h.ref.observe(now)
	cands := make([]fcap.Candidate, len(modelCheckPool))
	for i, c := range modelCheckPool {
		cands[i].Caps = c.caps
	}
	desc := fmt.Sprintf("audit: Check(%s, now=%d, every candidate and cap)", v, now)
	before := h.snap(v)
	got, err := h.e.Check(v, cands, now, nil)
	h.compareVerdicts(describeOf(desc), v, modelCheckPool, now, 0, got, err)
	h.unchanged(desc, v, before, false)
	h.note(desc, compactVerdicts(got))
}

// finish audits every viewer, then moves time far past every window and
// ttl, sweeps until a pass frees nothing, and checks the engine is empty.
func (h *modelHarness) finish() {
	h.op++
	for _, v := range modelViewers {
		h.audit(v)
	}
	far := h.ref.hw + 2*modelLongWindow
	h.now = far
	if _, err := h.e.Check(modelViewers[0], nil, far, nil); err != nil {
		h.failf(fmt.Sprintf("finish: Check(%s, now=%d, no candidates)", modelViewers[0], far), errString(err), "no error")
	}
	h.ref.observe(far)
	for quiet, passes := 0, 0; quiet < 2; passes++ {
		if passes > 100 {
			h.failf("finish: Sweep(1<<30) until it frees nothing", "still freeing after 100 calls", "done")
		}
		if _, freed := h.e.Sweep(1 << 30); freed == 0 {
			quiet++
		} else {
			quiet = 0
		}
	}
	if st := h.e.Stats(); st.Viewers != 0 || st.Keys != 0 || st.Bytes != 0 || st.HighWater != far {
		h.failf("finish: Stats() after everything aged out and was swept", fmt.Sprintf("%+v", st), fmt.Sprintf("Viewers 0, Keys 0, Bytes 0, HighWater %d", far))
	}
	for _, v := range modelViewers {
		if st, ok := h.e.Viewer(v); ok {
			h.failf(fmt.Sprintf("finish: Viewer(%s) after the final sweep", v), fmt.Sprintf("%+v", st), "nothing held")
		}
		// The emptied engine still answers as the reference.
		h.audit(v)
	}
}

// ---------------------------------------------------------------------
// Invalid ops: each must fail with an error wrapping ErrInvalid and
// change nothing, not even the high-water mark.

// invalidCtx is what an invalid op spoils: a valid viewer, clock and
// candidate, and a reservation the viewer holds (which an invalid Record
// naming it must not drop).
type invalidCtx struct {
	e      *engine.Engine
	v      string
	now    int64
	caps   []fcap.Cap // a valid candidate's caps
	bad    []fcap.Cap // the same with one cap spoiled
	badCap fcap.Cap   // the spoiled cap
	res    uint64     // a reservation v holds, or 0
}

var modelLongID = strings.Repeat("x", engine.DefaultLocalConfig().MaxIDLength+1)

var badCapMutations = []struct {
	name   string
	mutate func(*fcap.Cap)
}{
	{"limit 0", func(c *fcap.Cap) { c.Limit = 0 }},
	{"negative limit", func(c *fcap.Cap) { c.Limit = -3 }},
	{"limit past fcap.MaxLimit", func(c *fcap.Cap) { c.Limit = fcap.MaxLimit + 1 }},
	{"window 0", func(c *fcap.Cap) { c.Window = 0 }},
	{"negative window", func(c *fcap.Cap) { c.Window = -5 * time.Millisecond }},
	{"window past fcap.MaxWindow", func(c *fcap.Cap) { c.Window = fcap.MaxWindow + time.Millisecond }},
	{"window of a fraction of a millisecond", func(c *fcap.Cap) { c.Window += time.Microsecond }},
	{"empty scope", func(c *fcap.Cap) { c.Scope = "" }},
	{"empty id", func(c *fcap.Cap) { c.ID = "" }},
	{"unknown scope", func(c *fcap.Cap) { c.Scope = "publisher" }},
	{"scope too long", func(c *fcap.Cap) { c.Scope = modelLongID }},
	{"id too long", func(c *fcap.Cap) { c.ID = modelLongID }},
	{"unknown algorithm", func(c *fcap.Cap) { c.Algorithm = 3 }},
	{"unknown mode", func(c *fcap.Cap) { c.Mode = 2 }},
}

// tooMany returns caps repeated to one more than MaxCapsPerCandidate.
func (x *invalidCtx) tooMany() []fcap.Cap {
	var caps []fcap.Cap
	for len(caps) <= x.e.Config().MaxCapsPerCandidate {
		caps = append(caps, x.caps...)
	}
	return caps
}

// check runs Check with out holding one sentinel verdict, which an error
// must leave alone.
func (x *invalidCtx) check(viewer string, now int64, cands ...[]fcap.Cap) error {
	ec := make([]fcap.Candidate, len(cands))
	for i, c := range cands {
		ec[i].Caps = c
	}
	return sentinelOnly(x.e.Check(viewer, ec, now, []fcap.Verdict{sentinelVerdict}))
}

func (x *invalidCtx) table(viewer string, now int64, t fcap.CheckTable) error {
	return sentinelOnly(x.e.CheckTable(viewer, &t, now, []fcap.Verdict{sentinelVerdict}))
}

func sentinelOnly(got []fcap.Verdict, err error) error {
	if len(got) != 1 || got[0] != sentinelVerdict {
		return fmt.Errorf("out changed (%+v) with error %v", got, err)
	}
	return err
}

// validTable returns x.caps as a one-candidate table.
func (x *invalidCtx) validTable() fcap.CheckTable {
	t := fcap.CheckTable{Caps: slices.Clone(x.caps)}
	for i := range x.caps {
		t.Refs = append(t.Refs, uint16(i))
	}
	t.Ends = []uint32{uint32(len(t.Refs))}
	return t
}

func (x *invalidCtx) record(viewer string, imp fcap.Impression) error {
	imp.Reservation = x.res
	_, err := x.e.Record(viewer, imp)
	return err
}

func (x *invalidCtx) reserve(viewer string, caps []fcap.Cap, now, ttl int64) error {
	_, id, err := x.e.Reserve(viewer, fcap.Candidate{Caps: caps}, now, ttl)
	if id != 0 {
		return fmt.Errorf("reservation %#x taken with error %v", id, err)
	}
	return err
}

var modelInvalidOps = []struct {
	name string
	run  func(x *invalidCtx) error
}{
	{"Allow: empty viewer", func(x *invalidCtx) error { _, err := x.e.Allow("", x.now, x.caps...); return err }},
	{"Allow: viewer id too long", func(x *invalidCtx) error { _, err := x.e.Allow(modelLongID, x.now, x.caps...); return err }},
	{"Allow: negative now", func(x *invalidCtx) error { _, err := x.e.Allow(x.v, -1, x.caps...); return err }},
	{"Allow: now past fcap.MaxTime", func(x *invalidCtx) error { _, err := x.e.Allow(x.v, fcap.MaxTime+1, x.caps...); return err }},
	{"Allow: no caps", func(x *invalidCtx) error { _, err := x.e.Allow(x.v, x.now); return err }},
	{"Allow: bad cap", func(x *invalidCtx) error { _, err := x.e.Allow(x.v, x.now, x.bad...); return err }},
	{"Allow: too many caps", func(x *invalidCtx) error { _, err := x.e.Allow(x.v, x.now, x.tooMany()...); return err }},

	{"Check: empty viewer", func(x *invalidCtx) error { return x.check("", x.now, x.caps) }},
	{"Check: viewer id too long", func(x *invalidCtx) error { return x.check(modelLongID, x.now, x.caps) }},
	{"Check: negative now", func(x *invalidCtx) error { return x.check(x.v, -1, x.caps) }},
	{"Check: candidate without caps", func(x *invalidCtx) error { return x.check(x.v, x.now, x.caps, nil) }},
	{"Check: bad cap", func(x *invalidCtx) error { return x.check(x.v, x.now, x.caps, x.bad) }},
	{"Check: too many caps", func(x *invalidCtx) error { return x.check(x.v, x.now, x.tooMany()) }},
	{"Check: too many candidates", func(x *invalidCtx) error {
		cands := make([][]fcap.Cap, x.e.Config().MaxCandidates+1)
		for i := range cands {
			cands[i] = x.caps
		}
		return x.check(x.v, x.now, cands...)
	}},

	{"CheckTable: empty viewer", func(x *invalidCtx) error { return x.table("", x.now, x.validTable()) }},
	{"CheckTable: negative now", func(x *invalidCtx) error { return x.table(x.v, -1, x.validTable()) }},
	{"CheckTable: ref out of range", func(x *invalidCtx) error {
		t := x.validTable()
		t.Refs[len(t.Refs)-1] = uint16(len(t.Caps))
		return x.table(x.v, x.now, t)
	}},
	{"CheckTable: ends out of order", func(x *invalidCtx) error {
		t := x.validTable()
		t.Ends = []uint32{t.Ends[0], t.Ends[0] - 1}
		return x.table(x.v, x.now, t)
	}},
	{"CheckTable: end past refs", func(x *invalidCtx) error {
		t := x.validTable()
		t.Ends[0]++
		return x.table(x.v, x.now, t)
	}},
	{"CheckTable: empty candidate", func(x *invalidCtx) error {
		t := x.validTable()
		t.Ends = []uint32{0, t.Ends[0]}
		return x.table(x.v, x.now, t)
	}},
	{"CheckTable: refs of no candidate", func(x *invalidCtx) error {
		t := x.validTable()
		t.Refs = append(t.Refs, 0)
		return x.table(x.v, x.now, t)
	}},
	{"CheckTable: bad unused cap", func(x *invalidCtx) error {
		t := x.validTable()
		t.Caps = append(t.Caps, x.badCap)
		return x.table(x.v, x.now, t)
	}},
	{"CheckTable: too many caps in a candidate", func(x *invalidCtx) error {
		t := x.validTable()
		t.Refs = make([]uint16, x.e.Config().MaxCapsPerCandidate+1)
		t.Ends = []uint32{uint32(len(t.Refs))}
		return x.table(x.v, x.now, t)
	}},
	{"CheckTable: too many candidates", func(x *invalidCtx) error {
		t := x.validTable()
		for len(t.Ends) <= x.e.Config().MaxCandidates {
			t.Refs = append(t.Refs, 0)
			t.Ends = append(t.Ends, uint32(len(t.Refs)))
		}
		return x.table(x.v, x.now, t)
	}},

	{"Record: empty viewer", func(x *invalidCtx) error {
		return x.record("", fcap.Impression{ID: "bad", Time: x.now, Caps: x.caps})
	}},
	{"Record: viewer id too long", func(x *invalidCtx) error {
		return x.record(modelLongID, fcap.Impression{ID: "bad", Time: x.now, Caps: x.caps})
	}},
	{"Record: empty impression id", func(x *invalidCtx) error {
		return x.record(x.v, fcap.Impression{Time: x.now, Caps: x.caps})
	}},
	{"Record: impression id too long", func(x *invalidCtx) error {
		return x.record(x.v, fcap.Impression{ID: modelLongID, Time: x.now, Caps: x.caps})
	}},
	{"Record: negative time", func(x *invalidCtx) error {
		return x.record(x.v, fcap.Impression{ID: "bad", Time: -1, Caps: x.caps})
	}},
	{"Record: time past fcap.MaxTime", func(x *invalidCtx) error {
		return x.record(x.v, fcap.Impression{ID: "bad", Time: fcap.MaxTime + 1, Caps: x.caps})
	}},
	{"Record: no caps", func(x *invalidCtx) error {
		return x.record(x.v, fcap.Impression{ID: "bad", Time: x.now})
	}},
	{"Record: bad cap", func(x *invalidCtx) error {
		return x.record(x.v, fcap.Impression{ID: "bad", Time: x.now, Caps: x.bad})
	}},
	{"Record: too many caps", func(x *invalidCtx) error {
		return x.record(x.v, fcap.Impression{ID: "bad", Time: x.now, Caps: x.tooMany()})
	}},

	{"Reserve: empty viewer", func(x *invalidCtx) error { return x.reserve("", x.caps, x.now, 10) }},
	{"Reserve: viewer id too long", func(x *invalidCtx) error { return x.reserve(modelLongID, x.caps, x.now, 10) }},
	{"Reserve: negative now", func(x *invalidCtx) error { return x.reserve(x.v, x.caps, -1, 10) }},
	{"Reserve: ttl 0", func(x *invalidCtx) error { return x.reserve(x.v, x.caps, x.now, 0) }},
	{"Reserve: negative ttl", func(x *invalidCtx) error { return x.reserve(x.v, x.caps, x.now, -10) }},
	{"Reserve: ttl past fcap.MaxTime", func(x *invalidCtx) error { return x.reserve(x.v, x.caps, x.now, fcap.MaxTime+1) }},
	{"Reserve: no caps", func(x *invalidCtx) error { return x.reserve(x.v, nil, x.now, 10) }},
	{"Reserve: bad cap", func(x *invalidCtx) error { return x.reserve(x.v, x.bad, x.now, 10) }},
	{"Reserve: too many caps", func(x *invalidCtx) error { return x.reserve(x.v, x.tooMany(), x.now, 10) }},

	{"Release: empty viewer", func(x *invalidCtx) error { return x.e.Release("", max(x.res, 1)) }},
	{"Release: viewer id too long", func(x *invalidCtx) error { return x.e.Release(modelLongID, max(x.res, 1)) }},
	{"Release: id 0", func(x *invalidCtx) error { return x.e.Release(x.v, 0) }},
}

func (h *modelHarness) doInvalid(src chooser) {
	v := h.viewer(src)
	_, cand := h.candidate(src, v)
	x := &invalidCtx{e: h.e, v: v, now: h.now, caps: slices.Clone(cand.caps), bad: slices.Clone(cand.caps)}
	m := badCapMutations[src.intn(len(badCapMutations))]
	i := src.intn(len(x.bad))
	m.mutate(&x.bad[i])
	x.badCap = x.bad[i]
	for _, r := range slices.Backward(h.ref.res) {
		if r.held && r.viewer == v {
			x.res = r.id
			break
		}
	}
	op := modelInvalidOps[src.intn(len(modelInvalidOps))]
	desc := fmt.Sprintf("invalid: %s (viewer %s, now %d, %s, spoiled cap %d: %s, reservation %#x)", op.name, v, h.now, cand.name, i, m.name, x.res)
	hw := h.e.HighWater()
	before := h.snap(v)
	err := op.run(x)
	if !errors.Is(err, fcap.ErrInvalid) {
		h.failf(desc, errString(err), "an error wrapping fcap.ErrInvalid")
	}
	if got := h.e.HighWater(); got != hw {
		h.failf(desc, fmt.Sprintf("%s, high-water moved to %d", errString(err), got), fmt.Sprintf("high-water stays %d", hw))
	}
	h.unchanged(desc, v, before, false)
	h.count("Invalid")
	h.note(desc, errString(err))
	h.audit(v)
}

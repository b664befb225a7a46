package engine_test

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/fcap-io/fcap"
	"github.com/fcap-io/fcap/node/engine"
)

func newEngine(t testing.TB, mutate ...func(*engine.Config)) *engine.Engine {
	t.Helper()
	cfg := engine.DefaultLocalConfig()
	for _, m := range mutate {
		m(&cfg)
	}
	e, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// campaign is a campaign cap of window ticks (milliseconds).
func campaign(id string, limit, window int64) fcap.Cap {
	return fcap.Cap{Scope: "campaign", ID: id, Limit: limit, Window: fcap.Millis(window)}
}

func mustAllow(t *testing.T, e *engine.Engine, viewer string, now int64, want bool, caps ...fcap.Cap) fcap.Verdict {
	t.Helper()
	vd, err := e.Allow(viewer, now, caps...)
	if err != nil {
		t.Fatalf("Allow(%q, %d): %v", viewer, now, err)
	}
	if vd.Allowed != want {
		t.Fatalf("Allow(%q, %d) = %+v, want allowed=%v", viewer, now, vd, want)
	}
	return vd
}

func mustRecord(t *testing.T, e *engine.Engine, viewer string, imp fcap.Impression, want fcap.RecordStatus) {
	t.Helper()
	got, err := e.Record(viewer, imp)
	if err != nil {
		t.Fatalf("Record(%q, %+v): %v", viewer, imp, err)
	}
	if got != want {
		t.Fatalf("Record(%q, %s at %d) = %v, want %v", viewer, imp.ID, imp.Time, got, want)
	}
}

func checkOne(t *testing.T, e *engine.Engine, viewer string, now int64, caps ...fcap.Cap) fcap.Verdict {
	t.Helper()
	out, err := e.Check(viewer, []fcap.Candidate{{Caps: caps}}, now, nil)
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	return out[0]
}

func TestWindowEdge(t *testing.T) {
	e := newEngine(t)
	c := campaign("c", 1, 10)
	mustAllow(t, e, "u", 0, true, c)
	mustAllow(t, e, "u", 9, false, c) // 0 > 9-10: still counts
	mustAllow(t, e, "u", 10, true, c) // 0 > 10-10 is false: aged out
	mustAllow(t, e, "u", 19, false, c)
}

func TestSeveralCapsShareACounter(t *testing.T) {
	e := newEngine(t)
	hour := campaign("c", 3, 60)
	day := campaign("c", 10, 1440)
	for i := range 3 {
		mustAllow(t, e, "u", int64(i), true, hour, day)
	}
	vd := mustAllow(t, e, "u", 3, false, hour, day)
	if vd.Blocking != 0 {
		t.Errorf("blocking cap = %d, want 0 (the hourly cap)", vd.Blocking)
	}
	// An hour later the hourly cap has room; the daily one counts all.
	for i := range 3 {
		mustAllow(t, e, "u", int64(60+i), true, hour, day)
	}
	for i := range 3 {
		mustAllow(t, e, "u", int64(120+i), true, hour, day)
	}
	vd = mustAllow(t, e, "u", 180, true, hour, day)
	if vd.Remaining != 0 {
		t.Errorf("after the 10th impression of the day Remaining = %d, want 0", vd.Remaining)
	}
	vd = mustAllow(t, e, "u", 240, false, hour, day)
	if vd.Blocking != 1 {
		t.Errorf("blocking cap = %d, want 1 (the daily cap)", vd.Blocking)
	}
	st, ok := e.Viewer("u")
	if !ok || len(st.Keys) != 1 {
		t.Fatalf("viewer state = %+v, want one shared counter", st)
	}
	if got := len(st.Keys[0].Times); got != 10 {
		t.Errorf("shared counter keeps %d timestamps, want 10 (the larger limit)", got)
	}
}

func TestSlidingKeepsOnlyNewestLimit(t *testing.T) {
	e := newEngine(t)
	c := campaign("c", 3, 1000)
	for i := range 10 {
		mustRecord(t, e, "u", fcap.Impression{ID: fmt.Sprint(i), Time: int64(i * 10), Caps: []fcap.Cap{c}}, fcap.Recorded)
	}
	st, _ := e.Viewer("u")
	if got := st.Keys[0].Times; fmt.Sprint(got) != "[70 80 90]" {
		t.Errorf("kept %v, want the newest three [70 80 90]", got)
	}
	if vd := checkOne(t, e, "u", 100, c); vd.Allowed || vd.Remaining != 0 {
		t.Errorf("Check = %+v, want denied", vd)
	}
}

func TestCheckReportsRemainingAndBlocking(t *testing.T) {
	e := newEngine(t)
	cr := fcap.Cap{Scope: "creative", ID: "cr1", Limit: 2, Window: 100 * time.Millisecond}
	cm := campaign("cm1", 5, 100)
	adv := fcap.Cap{Scope: "advertiser", ID: "a1", Limit: 3, Window: 100 * time.Millisecond}
	mustRecord(t, e, "u", fcap.Impression{ID: "i1", Time: 1, Caps: []fcap.Cap{cr, cm, adv}}, fcap.Recorded)
	mustRecord(t, e, "u", fcap.Impression{ID: "i2", Time: 2, Caps: []fcap.Cap{cr, cm, adv}}, fcap.Recorded)

	other := fcap.Cap{Scope: "creative", ID: "cr2", Limit: 2, Window: 100 * time.Millisecond}
	out, err := e.Check("u", []fcap.Candidate{
		{Caps: []fcap.Cap{cr, cm, adv}},
		{Caps: []fcap.Cap{other, cm, adv}},
		{Caps: []fcap.Cap{campaign("fresh", 4, 100)}},
	}, 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []fcap.Verdict{
		{Allowed: false, Remaining: 0, Blocking: 0},
		{Allowed: true, Remaining: 1, Blocking: -1},
		{Allowed: true, Remaining: 4, Blocking: -1},
	}
	if fmt.Sprint(out) != fmt.Sprint(want) {
		t.Errorf("Check = %+v, want %+v", out, want)
	}
	if st, _ := e.Viewer("u"); len(st.Keys) != 3 {
		t.Errorf("Check created counters: %+v", st)
	}
}

func TestCheckTableMatchesCheck(t *testing.T) {
	e := newEngine(t)
	a := campaign("a", 2, 100)
	b := campaign("b", 1, 100)
	mustAllow(t, e, "u", 0, true, a)
	mustAllow(t, e, "u", 0, true, b)
	tbl := fcap.CheckTable{
		Caps: []fcap.Cap{a, b},
		Refs: []uint16{0, 1, 0, 1},
		Ends: []uint32{1, 3, 4},
	}
	got, err := e.CheckTable("u", &tbl, 5, nil)
	if err != nil {
		t.Fatal(err)
	}
	want, err := e.Check("u", []fcap.Candidate{{Caps: []fcap.Cap{a}}, {Caps: []fcap.Cap{b, a}}, {Caps: []fcap.Cap{b}}}, 5, nil)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("fcap.CheckTable = %+v, Check = %+v", got, want)
	}
	for name, bad := range map[string]fcap.CheckTable{
		"ref out of range": {Caps: []fcap.Cap{a}, Refs: []uint16{1}, Ends: []uint32{1}},
		"end past refs":    {Caps: []fcap.Cap{a}, Refs: []uint16{0}, Ends: []uint32{2}},
		"ends decrease":    {Caps: []fcap.Cap{a}, Refs: []uint16{0, 0}, Ends: []uint32{2, 1}},
		"empty candidate":  {Caps: []fcap.Cap{a}, Refs: []uint16{0}, Ends: []uint32{0, 1}},
		"orphan refs":      {Caps: []fcap.Cap{a}, Refs: []uint16{0, 0}, Ends: []uint32{1}},
		"invalid cap":      {Caps: []fcap.Cap{campaign("x", 0, 1)}, Refs: []uint16{0}, Ends: []uint32{1}},
	} {
		if _, err := e.CheckTable("u", &bad, 5, nil); !errors.Is(err, fcap.ErrInvalid) {
			t.Errorf("%s: err = %v, want fcap.ErrInvalid", name, err)
		}
	}
}

func TestRecordIdempotentOutOfOrderAndStale(t *testing.T) {
	e := newEngine(t)
	c := campaign("c", 5, 100)
	imp := func(id string, at int64) fcap.Impression {
		return fcap.Impression{ID: id, Time: at, Caps: []fcap.Cap{c}}
	}
	mustRecord(t, e, "u", imp("a", 50), fcap.Recorded)
	mustRecord(t, e, "u", imp("a", 50), fcap.Duplicate)
	mustRecord(t, e, "u", imp("b", 20), fcap.Recorded) // out of order
	mustRecord(t, e, "u", imp("c", 35), fcap.Recorded)
	st, _ := e.Viewer("u")
	if got := fmt.Sprint(st.Keys[0].Times); got != "[20 35 50]" {
		t.Errorf("times = %s, want [20 35 50] (in order)", got)
	}
	if vd := checkOne(t, e, "u", 119, c); vd.Remaining != 2 {
		t.Errorf("at 119 Remaining = %d, want 2 (20 > 119-100 still counts)", vd.Remaining)
	}
	if vd := checkOne(t, e, "u", 120, c); vd.Remaining != 3 {
		t.Errorf("at 120 Remaining = %d, want 3 (20 aged out)", vd.Remaining)
	}
	// The high-water mark is now 120; an impression at 20 is 100 old.
	mustRecord(t, e, "u", imp("old", 20), fcap.Stale)
	mustRecord(t, e, "u", imp("edge", 21), fcap.Recorded)
	if vd := checkOne(t, e, "u", 120, c); vd.Remaining != 2 {
		t.Errorf("Remaining = %d, want 2", vd.Remaining)
	}
}

func TestReservations(t *testing.T) {
	e := newEngine(t)
	c := campaign("c", 2, 1000)
	cand := fcap.Candidate{Caps: []fcap.Cap{c}}
	vd, id1, err := e.Reserve("u", cand, 0, 50)
	if err != nil || !vd.Allowed || id1 == 0 || vd.Remaining != 1 {
		t.Fatalf("Reserve = %+v %d %v", vd, id1, err)
	}
	_, id2, _ := e.Reserve("u", cand, 1, 50)
	if vd, id, _ := e.Reserve("u", cand, 2, 50); vd.Allowed || id != 0 {
		t.Fatalf("third Reserve = %+v %d, want denied with no id", vd, id)
	}
	if vd := checkOne(t, e, "u", 2, c); vd.Allowed {
		t.Fatalf("Check counts reservations: got %+v", vd)
	}
	mustAllow(t, e, "u", 3, false, c)
	// Release one, confirm the other with its impression.
	if err := e.Release("u", id1); err != nil {
		t.Fatal(err)
	}
	if err := e.Release("u", id1); !errors.Is(err, fcap.ErrUnknownReservation) {
		t.Fatalf("second Release = %v, want fcap.ErrUnknownReservation", err)
	}
	mustRecord(t, e, "u", fcap.Impression{ID: "imp", Time: 4, Caps: []fcap.Cap{c}, Reservation: id2}, fcap.Recorded)
	if vd := checkOne(t, e, "u", 5, c); !vd.Allowed || vd.Remaining != 1 {
		t.Fatalf("after release and confirm Check = %+v, want 1 left", vd)
	}
	// An unconfirmed reservation stops counting when its ttl passes.
	_, _, _ = e.Reserve("u", cand, 10, 50)
	if vd := checkOne(t, e, "u", 59, c); vd.Allowed {
		t.Fatalf("at 59 the reservation from 10 (ttl 50) still counts: %+v", vd)
	}
	if vd := checkOne(t, e, "u", 60, c); !vd.Allowed {
		t.Fatalf("at 60 the reservation expired: %+v", vd)
	}
}

func TestFixedWindowBoundaryBurst(t *testing.T) {
	e := newEngine(t)
	c := fcap.Cap{Scope: "campaign", ID: "c", Limit: 2, Window: 100 * time.Millisecond, Algorithm: fcap.Fixed}
	mustAllow(t, e, "u", 98, true, c)
	mustAllow(t, e, "u", 99, true, c)
	mustAllow(t, e, "u", 99, false, c)
	// The next calendar window starts at 100: the documented burst.
	mustAllow(t, e, "u", 100, true, c)
	mustAllow(t, e, "u", 101, true, c)
	mustAllow(t, e, "u", 199, false, c)
	mustAllow(t, e, "u", 200, true, c)
	// A late impression for a past window does not count in this one.
	mustRecord(t, e, "u", fcap.Impression{ID: "late", Time: 150, Caps: []fcap.Cap{c}}, fcap.Recorded)
	if vd := checkOne(t, e, "u", 201, c); vd.Remaining != 1 {
		t.Errorf("Remaining = %d, want 1", vd.Remaining)
	}
}

// TestBucketsErrorBound checks the documented bound of the Buckets
// algorithm against an exact count, for every tick of a long run.
func TestBucketsErrorBound(t *testing.T) {
	const window, buckets = 100, 10
	g := int64(window / buckets)
	e := newEngine(t, func(c *engine.Config) { c.Buckets = buckets })
	c := fcap.Cap{Scope: "campaign", ID: "c", Limit: fcap.MaxLimit, Window: window * time.Millisecond, Algorithm: fcap.Buckets}
	var times []int64
	exact := func(now, w int64) int64 {
		n := int64(0)
		for _, t := range times {
			if t > now-w {
				n++
			}
		}
		return n
	}
	for now := int64(0); now < 2000; now++ {
		if now%7 == 0 || now%13 == 0 || (now/300)%2 == 0 && now%3 == 0 {
			mustRecord(t, e, "u", fcap.Impression{ID: fmt.Sprint(now), Time: now, Caps: []fcap.Cap{c}}, fcap.Recorded)
			times = append(times, now)
		}
		got := fcap.MaxLimit - checkOne(t, e, "u", now, c).Remaining
		lo, hi := exact(now, window), exact(now, window+g-1)
		if got < lo || got > hi {
			t.Fatalf("at %d buckets counts %d, want within [%d, %d]", now, got, lo, hi)
		}
	}
	// Its state does not grow with the limit or the traffic.
	st, _ := e.Viewer("u")
	if n := len(st.Keys[0].Counts); n != buckets+1 {
		t.Errorf("buckets counter holds %d buckets, want %d", n, buckets+1)
	}
}

func TestWideTimestamps(t *testing.T) {
	e := newEngine(t)
	// A window longer than 2^32 ticks forces two-word timestamps.
	c := campaign("c", 4, fcap.MaxWindow.Milliseconds())
	times := []int64{5, 1 << 33, 1<<33 + 7, 3}
	for i, at := range times {
		mustRecord(t, e, "u", fcap.Impression{ID: fmt.Sprint(i), Time: at, Caps: []fcap.Cap{c}}, fcap.Recorded)
	}
	st, _ := e.Viewer("u")
	if got := fmt.Sprint(st.Keys[0].Times); got != fmt.Sprint([]int64{3, 5, 1 << 33, 1<<33 + 7}) {
		t.Errorf("times = %s", got)
	}
	if vd := checkOne(t, e, "u", 1<<34, c); vd.Allowed {
		t.Errorf("all four still in the window: %+v", vd)
	}
	// A narrow viewer whose times drift past 2^32 ticks rebases.
	d := campaign("d", 2, 1000)
	mustAllow(t, e, "v", 10, true, d)
	mustAllow(t, e, "v", 1<<35, true, d)
	mustAllow(t, e, "v", 1<<35+1, true, d)
	mustAllow(t, e, "v", 1<<35+2, false, d)
	st, _ = e.Viewer("v")
	if got := fmt.Sprint(st.Keys[0].Times); got != fmt.Sprint([]int64{1 << 35, 1<<35 + 1}) {
		t.Errorf("times = %s", got)
	}
}

func TestInvalidInputChangesNothing(t *testing.T) {
	e := newEngine(t)
	good := campaign("c", 1, 10)
	long := strings.Repeat("x", engine.DefaultLocalConfig().MaxIDLength+1)
	cases := []struct {
		name   string
		viewer string
		cap    fcap.Cap
		now    int64
		want   error
	}{
		{"empty viewer", "", good, 0, fcap.ErrEmptyViewer},
		{"long viewer", long, good, 0, fcap.ErrIDTooLong},
		{"empty id", "u", campaign("", 1, 10), 0, fcap.ErrEmptyID},
		{"long id", "u", campaign(long, 1, 10), 0, fcap.ErrIDTooLong},
		{"empty scope", "u", fcap.Cap{ID: "c", Limit: 1, Window: 10 * time.Millisecond}, 0, fcap.ErrEmptyScope},
		{"unknown scope", "u", fcap.Cap{Scope: "planet", ID: "c", Limit: 1, Window: 10 * time.Millisecond}, 0, fcap.ErrUnknownScope},
		{"zero limit", "u", campaign("c", 0, 10), 0, fcap.ErrBadLimit},
		{"negative limit", "u", campaign("c", -3, 10), 0, fcap.ErrBadLimit},
		{"huge limit", "u", campaign("c", fcap.MaxLimit+1, 10), 0, fcap.ErrBadLimit},
		{"zero window", "u", campaign("c", 1, 0), 0, fcap.ErrBadWindow},
		{"negative window", "u", campaign("c", 1, -10), 0, fcap.ErrBadWindow},
		{"unknown algorithm", "u", fcap.Cap{Scope: "campaign", ID: "c", Limit: 1, Window: 10 * time.Millisecond, Algorithm: 9}, 0, fcap.ErrUnknownAlgorithm},
		{"unknown mode", "u", fcap.Cap{Scope: "campaign", ID: "c", Limit: 1, Window: 10 * time.Millisecond, Mode: 7}, 0, fcap.ErrUnknownMode},
		{"negative time", "u", good, -1, fcap.ErrBadTime},
		{"time past max", "u", good, fcap.MaxTime + 1, fcap.ErrBadTime},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ops := map[string]error{}
			_, ops["Allow"] = e.Allow(tc.viewer, tc.now, tc.cap)
			_, ops["Check"] = e.Check(tc.viewer, []fcap.Candidate{{Caps: []fcap.Cap{tc.cap}}}, tc.now, nil)
			_, ops["Record"] = e.Record(tc.viewer, fcap.Impression{ID: "i", Time: tc.now, Caps: []fcap.Cap{tc.cap}})
			_, _, ops["Reserve"] = e.Reserve(tc.viewer, fcap.Candidate{Caps: []fcap.Cap{tc.cap}}, tc.now, 10)
			for op, err := range ops {
				if !errors.Is(err, tc.want) || !errors.Is(err, fcap.ErrInvalid) {
					t.Errorf("%s: err = %v, want %v (wrapping fcap.ErrInvalid)", op, err, tc.want)
				}
			}
		})
	}
	for name, err := range map[string]error{
		"no caps": func() error { _, err := e.Allow("u", 0); return err }(),
		"empty imp id": func() error {
			_, err := e.Record("u", fcap.Impression{Time: 0, Caps: []fcap.Cap{good}})
			return err
		}(),
		"zero ttl": func() error {
			_, _, err := e.Reserve("u", fcap.Candidate{Caps: []fcap.Cap{good}}, 0, 0)
			return err
		}(),
		"release id 0":    e.Release("u", 0),
		"empty candidate": func() error { _, err := e.Check("u", []fcap.Candidate{{}}, 0, nil); return err }(),
		"too many caps": func() error {
			caps := make([]fcap.Cap, engine.DefaultLocalConfig().MaxCapsPerCandidate+1)
			for i := range caps {
				caps[i] = campaign(fmt.Sprint(i), 1, 10)
			}
			_, err := e.Allow("u", 0, caps...)
			return err
		}(),
		"too many candidates": func() error {
			cands := make([]fcap.Candidate, engine.DefaultLocalConfig().MaxCandidates+1)
			for i := range cands {
				cands[i].Caps = []fcap.Cap{good}
			}
			_, err := e.Check("u", cands, 0, nil)
			return err
		}(),
	} {
		if !errors.Is(err, fcap.ErrInvalid) {
			t.Errorf("%s: err = %v, want fcap.ErrInvalid", name, err)
		}
	}
	if st := e.Stats(); st.Viewers != 0 || st.Keys != 0 || st.Bytes != 0 {
		t.Errorf("invalid requests changed state: %+v", st)
	}
	if hw := e.HighWater(); hw != -1 {
		t.Errorf("invalid requests moved the high-water mark to %d", hw)
	}
}

func TestConfigValidate(t *testing.T) {
	for name, mutate := range map[string]func(*engine.Config){
		"stripes not power of two": func(c *engine.Config) { c.Stripes = 3 },
		"zero buckets":             func(c *engine.Config) { c.Buckets = 0 },
		"no scopes":                func(c *engine.Config) { c.Scopes = nil },
		"negative memory":          func(c *engine.Config) { c.MemoryLimit = -1 },
		"sweep pass too short":     func(c *engine.Config) { c.SweepPass = c.SweepInterval / 2 },
		"table too large":          func(c *engine.Config) { c.MaxCandidates = 100000 },
	} {
		cfg := engine.DefaultConfig()
		mutate(&cfg)
		if _, err := engine.New(cfg); err == nil {
			t.Errorf("%s: New accepted the config", name)
		}
	}
	cfg := engine.DefaultConfig()
	cfg.Scopes = nil
	cfg.AnyScope = true
	e, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mustAllow(t, e, "u", 0, true, fcap.Cap{Scope: "line_item", ID: "x", Limit: 1, Window: 5 * time.Millisecond})
}

func TestMemoryLimitRefusesNewCounters(t *testing.T) {
	e := newEngine(t, func(c *engine.Config) { c.MemoryLimit = 64 << 10 })
	c := campaign("c", 3, 1000)
	var refusedAt int
	for i := 0; ; i++ {
		_, err := e.Allow(fmt.Sprintf("viewer-%d", i), 0, c)
		if errors.Is(err, fcap.ErrMemoryLimit) {
			refusedAt = i
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if i > 100000 {
			t.Fatal("64 KiB limit never reached")
		}
	}
	st := e.Stats()
	if !st.OverLimit || st.Refused != 1 || st.Bytes < 64<<10 || st.Bytes > 66<<10 {
		t.Errorf("stats = %+v, want over the limit by at most one viewer", st)
	}
	if errors.Is(fcap.ErrMemoryLimit, fcap.ErrInvalid) {
		t.Error("fcap.ErrMemoryLimit must not read as an invalid request")
	}
	// Existing viewers keep counting; new counters are refused.
	mustAllow(t, e, "viewer-0", 1, true, c)
	if _, err := e.Allow("viewer-0", 2, campaign("other", 1, 10)); !errors.Is(err, fcap.ErrMemoryLimit) {
		t.Errorf("new counter on an existing viewer: err = %v, want fcap.ErrMemoryLimit", err)
	}
	if _, err := e.Record("viewer-new", fcap.Impression{ID: "i", Time: 3, Caps: []fcap.Cap{c}}); !errors.Is(err, fcap.ErrMemoryLimit) {
		t.Errorf("Record for a new viewer: err = %v, want fcap.ErrMemoryLimit", err)
	}
	if e.Stats().Viewers != int64(refusedAt) {
		t.Errorf("a refused request created a viewer")
	}
	// Once counters age out and are swept, room returns.
	sweepAll(e, 10_000)
	mustAllow(t, e, "viewer-new", 10_000, true, c)
}

func TestTooManyKeysPerViewer(t *testing.T) {
	e := newEngine(t, func(c *engine.Config) { c.MaxKeysPerViewer = 16 })
	for i := range 16 {
		mustAllow(t, e, "u", 0, true, campaign(fmt.Sprint(i), 1, 10))
	}
	if _, err := e.Allow("u", 0, campaign("17th", 1, 10)); !errors.Is(err, fcap.ErrTooManyKeys) {
		t.Errorf("err = %v, want fcap.ErrTooManyKeys", err)
	}
}

// sweepAll advances the high-water mark to now (with a Check on a
// throwaway viewer) and sweeps until a full pass frees nothing.
func sweepAll(e *engine.Engine, now int64) {
	e.Check("sweeper-probe", nil, now, nil)
	for {
		if _, freed := e.Sweep(1 << 30); freed == 0 {
			return
		}
	}
}

func TestSweepFreesIdleState(t *testing.T) {
	e := newEngine(t)
	c := campaign("c", 5, 100)
	f := fcap.Cap{Scope: "creative", ID: "f", Limit: 5, Window: 100 * time.Millisecond, Algorithm: fcap.Fixed}
	b := fcap.Cap{Scope: "advertiser", ID: "b", Limit: 5, Window: 300 * time.Millisecond, Algorithm: fcap.Buckets}
	for i := range 1000 {
		v := fmt.Sprint("viewer-", i)
		mustRecord(t, e, v, fcap.Impression{ID: "x", Time: int64(i % 50), Caps: []fcap.Cap{c, f, b}}, fcap.Recorded)
		e.Reserve(v, fcap.Candidate{Caps: []fcap.Cap{c}}, int64(i%50), 20)
	}
	full := e.Stats()
	if full.Viewers != 1000 || full.Keys != 3000 {
		t.Fatalf("stats = %+v", full)
	}
	// Nothing has aged out at 60: a sweep keeps everything countable.
	sweepAll(e, 60)
	if st := e.Stats(); st.Keys != 3000 {
		t.Fatalf("sweep at 60 dropped live counters: %+v", st)
	}
	// At 400 every window has passed, but the impression ids are
	// remembered to the whole second after their horizon: the counters go,
	// the viewers stay.
	sweepAll(e, 400)
	if st := e.Stats(); st.Keys != 0 || st.Viewers != 1000 {
		t.Fatalf("at 400: %+v, want no counter and every viewer's ids", st)
	}
	// At 1000 the ids' horizon has passed too.
	sweepAll(e, 1000)
	if st := e.Stats(); st.Viewers != 0 || st.Keys != 0 || st.Bytes != 0 {
		t.Fatalf("after everything aged out: %+v, want empty", st)
	}
	// The engine works as before.
	mustAllow(t, e, "viewer-1", 1000, true, c)
}

func TestSweepIsBounded(t *testing.T) {
	e := newEngine(t, func(c *engine.Config) { c.SweepBatch = 8 })
	for i := range 500 {
		mustAllow(t, e, fmt.Sprint(i), 0, true, campaign("c", 1, 10))
	}
	e.Check("probe", nil, 100, nil)
	visited, freed := e.Sweep(50)
	if visited > 50 || freed > visited {
		t.Errorf("Sweep(50) visited %d and freed %d", visited, freed)
	}
	total := freed
	for range 1000 {
		_, f := e.Sweep(50)
		total += f
	}
	if total != 500 {
		t.Errorf("freed %d viewers in all, want 500", total)
	}
}

func TestAlgorithmAndModeNames(t *testing.T) {
	for _, a := range []fcap.Algorithm{fcap.Sliding, fcap.Buckets, fcap.Fixed} {
		got, err := fcap.ParseAlgorithm(a.String())
		if err != nil || got != a {
			t.Errorf("fcap.ParseAlgorithm(%q) = %v, %v", a, got, err)
		}
	}
	for _, m := range []fcap.Mode{fcap.Soft, fcap.Strict} {
		got, err := fcap.ParseMode(m.String())
		if err != nil || got != m {
			t.Errorf("fcap.ParseMode(%q) = %v, %v", m, got, err)
		}
	}
	if _, err := fcap.ParseAlgorithm("leaky"); !errors.Is(err, fcap.ErrUnknownAlgorithm) {
		t.Errorf("fcap.ParseAlgorithm(leaky) = %v", err)
	}
	if a, _ := fcap.ParseAlgorithm(""); a != fcap.Sliding {
		t.Error("the default algorithm is not sliding")
	}
}

// TestSweptMemoryReturnsToTheHeap loads counters, lets them age out,
// sweeps, and checks the Go heap gives most of it back: the engine keeps
// no hidden references to freed state.
func TestSweptMemoryReturnsToTheHeap(t *testing.T) {
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	e := newEngine(t)
	base := heap()
	caps := []fcap.Cap{campaign("a", 5, 100), campaign("b", 5, 100), {Scope: "advertiser", ID: "x", Limit: 9, Window: 100 * time.Millisecond, Algorithm: fcap.Buckets}}
	for v := range 50_000 {
		id := fmt.Sprint("viewer-", v)
		for k := range 3 {
			mustRecord(t, e, id, fcap.Impression{ID: fmt.Sprint(k), Time: int64(k), Caps: caps}, fcap.Recorded)
		}
	}
	loaded := heap()
	if loaded < base+5<<20 {
		t.Fatalf("loading 50,000 viewers grew the heap by only %d bytes", loaded-base)
	}
	sweepAll(e, 1000)
	after := heap()
	grown, kept := loaded-base, int64(after)-int64(base)
	if kept > int64(grown)/10 {
		t.Errorf("after sweeping everything the heap keeps %d of the %d bytes loading added", kept, grown)
	}
	t.Logf("heap: +%d bytes loaded, %+d after the sweep", grown, kept)
	runtime.KeepAlive(e)
}

func TestCheckTableCapsReportsLeftPerCap(t *testing.T) {
	e := newEngine(t)
	a, b := campaign("a", 3, 100), campaign("b", 5, 100)
	mustAllow(t, e, "u", 0, true, a, b)
	mustAllow(t, e, "u", 1, true, a)
	tbl := fcap.CheckTable{Caps: []fcap.Cap{a, b}, Refs: []uint16{0, 1, 1}, Ends: []uint32{2, 3}}
	out, left, err := e.CheckTableCaps("u", &tbl, 2, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(left) != "[1 4]" || len(out) != 2 || out[0].Remaining != 1 || out[1].Remaining != 4 {
		t.Errorf("verdicts %+v, left %v; want left [1 4]", out, left)
	}
}

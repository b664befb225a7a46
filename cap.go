// Package fcap holds the vocabulary every layer of fcap shares and an ad
// server writes: a Cap and the Candidates it guards, an Impression, the
// Verdict, the algorithms and modes, the limits a request must respect
// and the errors that refuse one. Its validation (Limits,
// Impression.Validate, Cap.Validate) is the one every layer applies: the
// client before it queues an impression, the JSON API before it answers,
// the engine before it counts. It imports nothing of fcap; the engine,
// the wire protocol, the client and the node all build on it.
//
//	caps := []fcap.Cap{
//		{Scope: "creative", ID: "cr42", Limit: 3, Window: time.Hour},
//		{Scope: "campaign", ID: "c7", Limit: 10, Window: 24 * time.Hour, Mode: fcap.Strict},
//	}
//
// A window is a time.Duration (as is a reservation's ttl in the client);
// the wire, the JSON API and the engine count milliseconds, so a window
// is a whole number of them, up to MaxWindow.
package fcap

import (
	"fmt"
	"math"
	"time"

	"github.com/cespare/xxhash/v2"
)

// Limits on what a cap may say. They are part of the contract: a request
// outside them is refused with an error wrapping ErrInvalid.
const (
	// MaxLimit is the largest cap limit. A sliding counter keeps up to
	// its limit timestamps, so the limit bounds its memory.
	MaxLimit = 1<<16 - 1

	// MaxTime is the largest time (and ttl, in milliseconds) the engine
	// accepts. Times are int64 ticks from 0 (Unix milliseconds in
	// production); the bound leaves room to add a window to a time
	// without overflow.
	MaxTime = int64(1)<<62 - 1

	// MaxWindow is the longest cap window: 400 days, past any
	// campaign's flight.
	MaxWindow = 400 * 24 * time.Hour
)

// Millis returns ms milliseconds as a time.Duration: a window or ttl
// from the wire or the JSON API, which carry milliseconds, or a number
// of engine ticks. Past what a time.Duration holds (about 292 years
// either way) it saturates at the longest whole number of milliseconds
// of ms's sign, a window validation refuses.
func Millis(ms int64) time.Duration {
	const most = int64(math.MaxInt64 / time.Millisecond) // the milliseconds a time.Duration holds
	return time.Duration(min(max(ms, -most), most)) * time.Millisecond
}

// Algorithm chooses how a cap counts.
type Algorithm uint8

// The algorithms. The zero value is Sliding.
const (
	// Sliding is an exact sliding window: a log of the newest Limit
	// impression times inside the window. Exact for every verdict.
	Sliding Algorithm = iota

	// Buckets approximates a sliding window with Config.Buckets
	// sub-buckets of width g = ceil(window/buckets). Its state has a
	// constant size whatever the limit. It counts every impression of the
	// exact window plus at most those of the g-1 ticks before it, so it
	// never allows more than the exact window would, and it may deny up
	// to g-1 ticks early:
	//
	//	exact(now, window) <= buckets(now) <= exact(now, window+g-1)
	Buckets

	// Fixed counts in calendar-aligned windows [k*window, (k+1)*window)
	// with one integer. It has the boundary burst: up to 2*Limit
	// impressions can land in any span of one window that straddles a
	// boundary (Limit at the end of one window, Limit at the start of
	// the next).
	Fixed

	// NumAlgorithms is the number of algorithms; a value at or above it is
	// unknown.
	NumAlgorithms
)

var algorithmNames = [...]string{Sliding: "sliding", Buckets: "buckets", Fixed: "fixed"}

func (a Algorithm) String() string {
	if a < NumAlgorithms {
		return algorithmNames[a]
	}
	return fmt.Sprintf("algorithm(%d)", uint8(a))
}

// ParseAlgorithm returns the algorithm named s ("" is Sliding).
func ParseAlgorithm(s string) (Algorithm, error) {
	if s == "" {
		return Sliding, nil
	}
	for a, name := range algorithmNames {
		if s == name {
			return Algorithm(a), nil
		}
	}
	return 0, fmt.Errorf("%w %q", ErrUnknownAlgorithm, s)
}

// Mode chooses the consistency of a cap (see DESIGN.md). The engine
// counts both modes the same way; the cluster replicates and the client
// fails differently by mode.
type Mode uint8

// The modes. The zero value is Soft.
const (
	// Soft caps accept a small overshoot under races or failure; the
	// client fails open.
	Soft Mode = iota
	// Strict caps reserve at decision time, replicate synchronously and
	// fail closed.
	Strict

	// NumModes is the number of modes; a value at or above it is unknown.
	NumModes
)

var modeNames = [...]string{Soft: "soft", Strict: "strict"}

func (m Mode) String() string {
	if m < NumModes {
		return modeNames[m]
	}
	return fmt.Sprintf("mode(%d)", uint8(m))
}

// ParseMode returns the mode named s ("" is Soft).
func ParseMode(s string) (Mode, error) {
	if s == "" {
		return Soft, nil
	}
	for m, name := range modeNames {
		if s == name {
			return Mode(m), nil
		}
	}
	return 0, fmt.Errorf("%w %q", ErrUnknownMode, s)
}

// Cap is one frequency cap: at most Limit impressions of (Scope, ID) per
// Window. Caps travel with every request, the way a rate-limit
// request carries its limit.
//
// The counter a cap reads lives under the key (viewer, Scope, ID) for a
// Sliding cap, so several sliding caps with different windows (3/hour and
// 10/day) share one log. A Buckets or Fixed cap's state depends on its
// window, so its key also includes the algorithm and the window.
type Cap struct {
	Scope     string        // "creative", "campaign", "advertiser", ...
	ID        string        // the creative, campaign or advertiser id
	Limit     int64         // 1..MaxLimit
	Window    time.Duration // a whole number of milliseconds, 1ms..MaxWindow
	Algorithm Algorithm     // Sliding unless said
	Mode      Mode          // Soft unless said
}

func (c Cap) String() string {
	return fmt.Sprintf("%s:%s %d/%v %s %s", c.Scope, c.ID, c.Limit, c.Window, c.Algorithm, c.Mode)
}

// WindowMillis returns the window in milliseconds: the unit of the wire,
// the JSON API and the engine's ticks (any fraction of a millisecond,
// which validation refuses, dropped).
func (c Cap) WindowMillis() int64 { return int64(c.Window / time.Millisecond) }

// Candidate is one ad that may be shown: the caps it is subject to
// (typically its creative, campaign and advertiser caps). It is allowed
// only if every cap allows it.
type Candidate struct {
	Caps []Cap
}

// Verdict is the answer for one candidate.
type Verdict struct {
	// Allowed is true when every cap had room (for Allow and Reserve:
	// the impression or reservation was taken).
	Allowed bool
	// Remaining is the smallest number of further impressions any cap of
	// the candidate would still allow (after this one, for a granted
	// Allow or Reserve). 0 when denied.
	Remaining int64
	// Blocking is the index in the candidate's caps of the first cap that
	// had no room, or -1.
	Blocking int
}

// Key identifies the counter a cap reads inside its viewer: the
// xxhashes of scope and id, combined asymmetrically and mixed with the
// algorithm (and, but for Sliding, the window). The hash is 64 bits; two
// distinct counters of one viewer collide with probability about
// k*k/2^65 for k counters, negligible for the few thousand a viewer may
// hold. It is stable across processes, so snapshots and replicas can
// carry it.
func (c *Cap) Key() uint64 { return c.keyOf(xxhash.Sum64String(c.Scope)) }

// KeyHasher computes caps' keys one after another as Cap.Key does,
// hashing a scope once for a run of caps that name it. The zero value
// is ready; it is not safe for concurrent use.
type KeyHasher struct {
	scope string
	h     uint64
}

// Key is c.Key().
func (k *KeyHasher) Key(c *Cap) uint64 {
	if c.Scope != k.scope || k.h == 0 { // h 0: nothing hashed yet
		k.scope, k.h = c.Scope, xxhash.Sum64String(c.Scope)
	}
	return c.keyOf(k.h)
}

// keyOf is Key given the xxhash of c.Scope.
func (c *Cap) keyOf(scopeHash uint64) uint64 {
	h := scopeHash*0x9e3779b97f4a7c15 ^ xxhash.Sum64String(c.ID)
	h ^= uint64(c.Algorithm) << 62
	if c.Algorithm != Sliding {
		h ^= uint64(c.WindowMillis()) // milliseconds: keys stay those snapshots hold
	}
	return mix64(h)
}

// KeyHash returns c.Key(): the hash that names a cap's counter in Stats
// and Keys output, so tools can match counters to the caps that read them.
func KeyHash(c Cap) uint64 { return c.Key() }

// mix64 is the splitmix64 finalizer: a bijection that spreads every input
// bit over the output.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

package fcap

import (
	"fmt"
	"strings"
	"time"
)

// Validation is shared by every layer: the client refuses an invalid
// impression before it queues it, the JSON API answers 400 before it asks
// the cluster, and the node's engine runs the same checks before it
// touches a counter. The static bounds (MaxLimit, MaxTime) are constants;
// the rest are a node's configuration, carried in Limits.

// DefaultScopes are the scopes a cap may name unless Limits.Scopes says
// otherwise.
var DefaultScopes = []string{"creative", "campaign", "advertiser"}

// The configurable bounds' defaults (fcapd's, unless its flags say
// otherwise).
const (
	// DefaultMaxIDLength bounds viewer ids, cap scopes and ids, and
	// impression ids, in bytes.
	DefaultMaxIDLength = 256
	// DefaultMaxCaps bounds the caps of one candidate, Allow, Reserve or
	// impression.
	DefaultMaxCaps = 16
	// DefaultMaxCandidates bounds the candidates of one Check.
	DefaultMaxCandidates = 1000
)

// Limits are the configurable bounds a request must respect: a node's
// (fcapd --scopes, --max-id-length), which a client or the JSON API uses
// to refuse at once what the node would refuse later. Every zero field
// means its default, so Limits{} holds fcapd's defaults.
type Limits struct {
	// Scopes are the scope names a cap may use. Default (nil)
	// DefaultScopes.
	Scopes []string
	// AnyScope accepts every non-empty scope name, ignoring Scopes
	// (fcapd --scopes '*'). Default false.
	AnyScope bool
	// MaxIDLength bounds viewer ids, cap scopes and ids, and impression
	// ids, in bytes. Default (0) DefaultMaxIDLength.
	MaxIDLength int
	// MaxCaps bounds the caps of one candidate, Allow, Reserve or
	// impression. Default (0) DefaultMaxCaps.
	MaxCaps int
	// MaxCandidates bounds the candidates of one Check. Default (0)
	// DefaultMaxCandidates.
	MaxCandidates int
}

// Resolved returns l with every zero field set to its default.
func (l Limits) Resolved() Limits {
	if l.Scopes == nil {
		l.Scopes = DefaultScopes
	}
	if l.MaxIDLength <= 0 {
		l.MaxIDLength = DefaultMaxIDLength
	}
	if l.MaxCaps <= 0 {
		l.MaxCaps = DefaultMaxCaps
	}
	if l.MaxCandidates <= 0 {
		l.MaxCandidates = DefaultMaxCandidates
	}
	return l
}

// ScopeKnown reports whether a cap may name scope s.
func (l *Limits) ScopeKnown(s string) bool {
	if l.AnyScope {
		return s != ""
	}
	scopes := l.Scopes
	if scopes == nil {
		scopes = DefaultScopes
	}
	for _, known := range scopes {
		if s == known {
			return true
		}
	}
	return false
}

// AcceptedScopes describes the scopes a cap may name, for error messages.
func (l *Limits) AcceptedScopes() string {
	if l.AnyScope {
		return "any non-empty name"
	}
	scopes := l.Scopes
	if scopes == nil {
		scopes = DefaultScopes
	}
	return strings.Join(scopes, ", ")
}

func (l *Limits) maxIDLength() int {
	if l.MaxIDLength <= 0 {
		return DefaultMaxIDLength
	}
	return l.MaxIDLength
}

func (l *Limits) maxCaps() int {
	if l.MaxCaps <= 0 {
		return DefaultMaxCaps
	}
	return l.MaxCaps
}

func (l *Limits) maxCandidates() int {
	if l.MaxCandidates <= 0 {
		return DefaultMaxCandidates
	}
	return l.MaxCandidates
}

// Validate checks a cap: a scope lim accepts, a non-empty id, both at
// most lim.MaxIDLength bytes, a limit in [1, MaxLimit], a window of a
// whole number of milliseconds in [1ms, MaxWindow], a known algorithm
// and mode. The error wraps ErrInvalid and
// the sentinel of the first field at fault, and names the field and the
// values accepted.
func (c *Cap) Validate(lim Limits) error { return lim.CheckCap(c) }

// CheckCap is c.Validate(*l) without copying the limits: the form a
// hot path (the engine's every write) calls.
func (l *Limits) CheckCap(c *Cap) error { return l.checkCap(c, false) }

// CapChecker checks caps one after another as Limits.CheckCap does, but
// looks a scope up in the accepted list only when it differs from the
// scope of the last valid cap it checked: a request's caps name one to
// three scopes, mostly in runs. Make one per request with
// Limits.Checker; it is not safe for concurrent use.
type CapChecker struct {
	l     *Limits
	known string // the scope of the last valid cap, "" for none
}

// Checker returns a CapChecker for l.
func (l *Limits) Checker() CapChecker { return CapChecker{l: l} }

// Check is l.CheckCap(c).
func (k *CapChecker) Check(c *Cap) error {
	err := k.l.checkCap(c, k.known != "" && c.Scope == k.known)
	if err == nil {
		k.known = c.Scope
	}
	return err
}

func (l *Limits) checkCap(c *Cap, scopeKnown bool) error {
	maxID := l.maxIDLength()
	switch {
	case c.Scope == "":
		return fmt.Errorf("%w (scope: one of %s)", ErrEmptyScope, l.AcceptedScopes())
	case c.ID == "":
		return ErrEmptyID
	case len(c.Scope) > maxID:
		return fmt.Errorf("%w: scope is %d bytes, at most %d", ErrIDTooLong, len(c.Scope), maxID)
	case len(c.ID) > maxID:
		return fmt.Errorf("%w: id is %d bytes, at most %d", ErrIDTooLong, len(c.ID), maxID)
	case c.Limit < 1 || c.Limit > MaxLimit:
		return fmt.Errorf("%w, got %d", ErrBadLimit, c.Limit)
	case c.Window < time.Millisecond || c.Window > MaxWindow:
		return fmt.Errorf("%w, got %v", ErrBadWindow, c.Window)
	case c.Window%time.Millisecond != 0:
		return fmt.Errorf("%w: %v is not a whole number of milliseconds (Window is a time.Duration: 3*time.Second, not 3000)", ErrBadWindow, c.Window)
	case c.Algorithm >= NumAlgorithms:
		return fmt.Errorf("%w %d (sliding, buckets or fixed)", ErrUnknownAlgorithm, c.Algorithm)
	case c.Mode >= NumModes:
		return fmt.Errorf("%w %d (soft or strict)", ErrUnknownMode, c.Mode)
	case !scopeKnown && !l.ScopeKnown(c.Scope):
		return fmt.Errorf("%w %q (accepted: %s)", ErrUnknownScope, c.Scope, l.AcceptedScopes())
	}
	return nil
}

// ValidateCaps checks the caps of one candidate, Allow, Reserve or
// impression: at least one, at most lim.MaxCaps, each valid. The error
// names the cap at fault by its index.
func ValidateCaps(caps []Cap, lim Limits) error { return lim.CheckCaps(caps) }

// CheckCaps is ValidateCaps(caps, *l) without copying the limits.
func (l *Limits) CheckCaps(caps []Cap) error {
	if len(caps) == 0 {
		return ErrNoCaps
	}
	if n := l.maxCaps(); len(caps) > n {
		return fmt.Errorf("%w: %d caps, at most %d", ErrTooManyCaps, len(caps), n)
	}
	for i := range caps {
		if err := l.CheckCap(&caps[i]); err != nil {
			return fmt.Errorf("cap %d: %w", i, err)
		}
	}
	return nil
}

// ValidateCandidates checks a Check's candidates: at most
// lim.MaxCandidates, each with valid caps. The error names the candidate
// and cap at fault.
func ValidateCandidates(cands []Candidate, lim Limits) error {
	if n := lim.maxCandidates(); len(cands) > n {
		return fmt.Errorf("%w: %d candidates, at most %d", ErrTooManyCandidates, len(cands), n)
	}
	for i := range cands {
		if err := lim.CheckCaps(cands[i].Caps); err != nil {
			return fmt.Errorf("candidate %d: %w", i, err)
		}
	}
	return nil
}

// ValidateViewer checks a viewer (or device) id: not empty, at most
// lim.MaxIDLength bytes.
func ValidateViewer(viewer string, lim Limits) error { return lim.CheckViewer(viewer) }

// CheckViewer is ValidateViewer(viewer, *l) without copying the limits.
func (l *Limits) CheckViewer(viewer string) error {
	if viewer == "" {
		return ErrEmptyViewer
	}
	if n := l.maxIDLength(); len(viewer) > n {
		return fmt.Errorf("%w: viewer is %d bytes, at most %d", ErrIDTooLong, len(viewer), n)
	}
	return nil
}

// ValidateTime checks a time: in [0, MaxTime].
func ValidateTime(t int64) error {
	if t < 0 || t > MaxTime {
		return fmt.Errorf("%w, got %d", ErrBadTime, t)
	}
	return nil
}

// Validate checks an impression: a non-empty ID of at most
// lim.MaxIDLength bytes, a time in [0, MaxTime] (0 means now to the
// client and the JSON API: see Impression.Time) and valid caps.
// It does not judge the time against a clock: the owner node does that
// (fcapd --max-clock-skew).
func (imp *Impression) Validate(lim Limits) error {
	if imp.ID == "" {
		return ErrEmptyImpressionID
	}
	if n := lim.maxIDLength(); len(imp.ID) > n {
		return fmt.Errorf("%w: impression id is %d bytes, at most %d", ErrIDTooLong, len(imp.ID), n)
	}
	if err := ValidateTime(imp.Time); err != nil {
		return fmt.Errorf("impression time: %w", err)
	}
	return lim.CheckCaps(imp.Caps)
}

// ValidateVoid checks an impression named for a Void: as Validate, and
// its time is required (not 0: the time it was recorded with, which the
// owner checks against the id it remembers).
func (imp *Impression) ValidateVoid(lim Limits) error {
	if imp.Time == 0 {
		return fmt.Errorf("%w: impression time is required: the time the impression was recorded with", ErrBadTime)
	}
	return imp.Validate(lim)
}

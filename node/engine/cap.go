package engine

import "github.com/fcap-io/fcap"

// validateCap checks one cap against the engine's configuration.
func (e *Engine) validateCap(c *fcap.Cap) error {
	switch {
	case c.Scope == "":
		return fcap.ErrEmptyScope
	case c.ID == "":
		return fcap.ErrEmptyID
	case len(c.Scope) > e.cfg.MaxIDLength || len(c.ID) > e.cfg.MaxIDLength:
		return fcap.ErrIDTooLong
	case c.Limit < 1 || c.Limit > fcap.MaxLimit:
		return fcap.ErrBadLimit
	case c.Window < 1 || c.Window > fcap.MaxTime:
		return fcap.ErrBadWindow
	case c.Algorithm >= fcap.NumAlgorithms:
		return fcap.ErrUnknownAlgorithm
	case c.Mode >= fcap.NumModes:
		return fcap.ErrUnknownMode
	}
	if !e.scopeKnown(c.Scope) {
		return fcap.ErrUnknownScope
	}
	return nil
}

func (e *Engine) scopeKnown(s string) bool {
	if e.cfg.AnyScope {
		return true
	}
	for _, known := range e.cfg.Scopes {
		if s == known {
			return true
		}
	}
	return false
}

// validateCaps checks a candidate's caps and their count.
func (e *Engine) validateCaps(caps []fcap.Cap) error {
	if len(caps) == 0 {
		return fcap.ErrNoCaps
	}
	if len(caps) > e.cfg.MaxCapsPerCandidate {
		return fcap.ErrTooManyCaps
	}
	for i := range caps {
		if err := e.validateCap(&caps[i]); err != nil {
			return capError(i, err)
		}
	}
	return nil
}

func (e *Engine) validateViewer(viewer string) error {
	if viewer == "" {
		return fcap.ErrEmptyViewer
	}
	if len(viewer) > e.cfg.MaxIDLength {
		return fcap.ErrIDTooLong
	}
	return nil
}

func validTime(t int64) bool { return t >= 0 && t <= fcap.MaxTime }

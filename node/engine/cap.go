package engine

import "github.com/fcap-io/fcap"

// The engine validates with the checks every layer shares (package fcap),
// against the limits of its configuration.

// validateCaps checks a candidate's caps and their count.
func (e *Engine) validateCaps(caps []fcap.Cap) error {
	return e.lim.CheckCaps(caps)
}

func (e *Engine) validateViewer(viewer string) error {
	return e.lim.CheckViewer(viewer)
}

func validTime(t int64) bool { return t >= 0 && t <= fcap.MaxTime }

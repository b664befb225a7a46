package wanproxy

import "errors"

var (
	// ErrBadLink: a Link knob is out of range (a negative duration or
	// rate, a loss probability outside [0, 1]).
	ErrBadLink = errors.New("wanproxy: bad link")
	// ErrBadDir: a direction other than Forward or Reverse.
	ErrBadDir = errors.New("wanproxy: bad direction")
)

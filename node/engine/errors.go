package engine

import (
	"errors"
	"fmt"
)

// ErrTooManyRegions refuses a region past the lanes a viewer may hold
// (lane.go): a node counts the lanes of at most maxLaneRegions regions.
var ErrTooManyRegions = errors.New("too many regions")

// capError names the cap a validation error is about.
func capError(i int, err error) error {
	return fmt.Errorf("cap %d: %w", i, err)
}

// candidateError names the candidate a validation error is about.
func candidateError(i int, err error) error {
	return fmt.Errorf("candidate %d: %w", i, err)
}

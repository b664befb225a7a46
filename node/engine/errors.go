package engine

import "fmt"

// capError names the cap a validation error is about.
func capError(i int, err error) error {
	return fmt.Errorf("cap %d: %w", i, err)
}

// candidateError names the candidate a validation error is about.
func candidateError(i int, err error) error {
	return fmt.Errorf("candidate %d: %w", i, err)
}

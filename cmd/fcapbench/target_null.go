package main

import "context"

// nullTarget answers at once: running fcapbench against it measures the
// load generator's own latency floor.
type nullTarget struct{}

func (nullTarget) Name() string { return "null" }
func (nullTarget) Allow(context.Context, string, int, int64) (bool, error) {
	return true, nil
}
func (nullTarget) Check(_ context.Context, _ string, c []int, _ int64) (int, error) {
	return len(c), nil
}
func (nullTarget) Record(context.Context, string, int, string, int64) error { return nil }
func (nullTarget) Failed() int64                                            { return 0 }
func (nullTarget) Close() error                                             { return nil }

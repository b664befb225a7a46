//go:build !linux

package main

import "time"

// pacer sleeps until a point in time. Outside Linux it is time.Sleep,
// whose precision is the Go runtime's (see pacer_linux.go).
type pacer struct{}

func newPacer(bool) *pacer { return &pacer{} }

func (*pacer) sleepUntil(t time.Time) { time.Sleep(time.Until(t)) }

func (*pacer) Close() {}

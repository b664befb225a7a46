//go:build linux

package main

import (
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// pacer sleeps until a point in time to within microseconds, without
// holding a thread: a timerfd waited on through the Go runtime's network
// poller, which wakes the moment it fires. time.Sleep is not precise
// enough for an open loop at thousands a second: a Go process with
// nothing else to run waits for its next timer in epoll with a
// millisecond timeout, so a sleep of 300us can last a millisecond, and
// that lateness shows up as the generator's queue (the Go runtime,
// netpoll_epoll.go, rounds waits under 1ms up to 1ms).
//
// A pacer is used by one goroutine at a time.
type pacer struct {
	f  *os.File // nil: no timerfd, time.Sleep instead
	fd int
}

// newPacer returns a precise pacer, or with coarse one that sleeps with
// time.Sleep (to compare).
func newPacer(coarse bool) *pacer {
	if coarse {
		return &pacer{}
	}
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return &pacer{}
	}
	// A non-blocking descriptor: os.File registers it with the poller,
	// so Read parks the goroutine, not the thread.
	return &pacer{f: os.NewFile(uintptr(fd), "timerfd"), fd: fd}
}

// sleepUntil returns at t or soon after.
func (p *pacer) sleepUntil(t time.Time) {
	d := time.Until(t)
	if d <= 0 {
		return
	}
	if p.f != nil {
		spec := unix.ItimerSpec{Value: unix.NsecToTimespec(int64(d))}
		if unix.TimerfdSettime(p.fd, 0, &spec, nil) == nil {
			var n [8]byte // the count of expirations
			if _, err := p.f.Read(n[:]); err == nil {
				return
			}
		}
		p.f.Close() // broken: fall back for good
		p.f = nil
	}
	time.Sleep(time.Until(t))
}

// Close releases the timer.
func (p *pacer) Close() {
	if p.f != nil {
		p.f.Close()
		p.f = nil
	}
}

//go:build unix

package client

import "syscall"

// processCPU is the CPU time the process has used, user and system, in
// nanoseconds: a benchmark's cost per call that other processes on a
// busy machine do not inflate, as they do its wall time.
func processCPU() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

package main

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cpuTimes is the machine's aggregate CPU time from /proc/stat (Linux),
// to report how much CPU the hypervisor stole during a run: on a shared
// VM, stolen milliseconds land directly in the latency tail.
type cpuTimes struct {
	busy, idle, steal int64
	ok                bool
}

func readCPUTimes() cpuTimes {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTimes{}
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return cpuTimes{}
	}
	v := make([]int64, 8)
	for i := range v {
		v[i], _ = strconv.ParseInt(f[i+1], 10, 64)
	}
	// user nice system idle iowait irq softirq steal
	return cpuTimes{busy: v[0] + v[1] + v[2] + v[5] + v[6], idle: v[3] + v[4], steal: v[7], ok: true}
}

// percents returns busy, idle and steal shares of the time between two
// readings.
func (a cpuTimes) percents(b cpuTimes) (busy, idle, steal float64) {
	if !a.ok || !b.ok {
		return 0, 0, 0
	}
	db, di, ds := b.busy-a.busy, b.idle-a.idle, b.steal-a.steal
	tot := float64(db + di + ds)
	if tot <= 0 {
		return 0, 0, 0
	}
	return 100 * float64(db) / tot, 100 * float64(di) / tot, 100 * float64(ds) / tot
}

// selfCPU is the CPU time (user + system) this process has used.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

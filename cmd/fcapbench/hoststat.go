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
	cpus              int // CPUs of the machine (not of this process's affinity)
	ok                bool
}

func readCPUTimes() cpuTimes {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTimes{}
	}
	line, rest, _ := strings.Cut(string(b), "\n")
	cpus := 0
	for _, l := range strings.Split(rest, "\n") {
		if strings.HasPrefix(l, "cpu") {
			cpus++
		}
	}
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return cpuTimes{}
	}
	v := make([]int64, 8)
	for i := range v {
		v[i], _ = strconv.ParseInt(f[i+1], 10, 64)
	}
	// user nice system idle iowait irq softirq steal
	return cpuTimes{busy: v[0] + v[1] + v[2] + v[5] + v[6], idle: v[3] + v[4], steal: v[7], cpus: cpus, ok: true}
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

// clockTicks is USER_HZ, the unit of /proc/PID/stat's CPU times: 100 on
// every Linux architecture Go supports.
const clockTicks = 100

// procsCPU is the CPU time (user + system) the given processes have used;
// a process that is gone counts nothing.
func procsCPU(pids []int) time.Duration {
	var ticks int64
	for _, pid := range pids {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			continue
		}
		// The command name (field 2) may hold spaces; fields resume
		// after its closing parenthesis.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) < 13 { // utime and stime are fields 14 and 15
			continue
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		ticks += u + st
	}
	return time.Duration(ticks) * time.Second / clockTicks
}

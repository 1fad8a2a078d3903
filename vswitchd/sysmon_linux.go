package vswitchd

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// SysmonSlackNs is the timer slack SlowSysmon gives the Go runtime's
// monitor thread.
const SysmonSlackNs = 10_000_000

// SlowSysmon gives the Go runtime's monitor thread (sysmon) a timer slack
// of SysmonSlackNs and returns its thread id.
//
// Why: a busy PMD goroutine never passes through the Go scheduler, so
// sysmon preempts it every 10 ms; when that catches the PMD inside one of
// its many system calls, sysmon counts it as a retaken P and falls back to
// sleeping 20 µs at a time. Measured with a busy PMD forwarding a ping-pong
// (docs/architecture.md, "Tail latency of busy PMDs"), sysmon woke about
// 1000 times a second on the PMD's CPU, and each wake-up delays whatever
// else was about to run there (the workload the PMD serves, on a machine
// with as many PMDs as CPUs). With the slack its 20 µs sleeps last up to
// 10 ms: it still preempts, retakes Ps from long system calls and polls the
// network when no one else does, at most 10 ms later than before — the
// daemon has a spare P for every CPU beside its PMDs, so no goroutine
// waits for a P that long. Best effort: without CAP_SYS_NICE, or if the
// thread is not found, nothing changes.
func SlowSysmon() (int, error) {
	tid, err := findSysmon()
	if err != nil {
		return 0, err
	}
	path := "/proc/" + strconv.Itoa(tid) + "/timerslack_ns"
	return tid, os.WriteFile(path, []byte(strconv.Itoa(SysmonSlackNs)), 0)
}

// findSysmon returns the thread id of the runtime's monitor: the only
// thread of a Go program that sleeps in nanosleep for long (the runtime's
// usleep), started before main; PMDs sleep in ppoll and the runtime's
// other threads on futexes. It samples the process's threads until it
// finds one in nanosleep, for at most about 100 ms.
func findSysmon() (int, error) {
	self := unix.Getpid()
	for range 100 {
		ents, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return 0, err
		}
		best := 0
		for _, e := range ents {
			tid, err := strconv.Atoi(e.Name())
			if err != nil || tid == self {
				continue
			}
			b, err := os.ReadFile("/proc/self/task/" + e.Name() + "/syscall")
			if err != nil {
				continue
			}
			nr, _, _ := strings.Cut(string(b), " ")
			if nr == strconv.Itoa(unix.SYS_NANOSLEEP) && (best == 0 || tid < best) {
				best = tid
			}
		}
		if best != 0 {
			return best, nil
		}
		time.Sleep(time.Millisecond)
	}
	return 0, errors.New("runtime monitor thread not found")
}

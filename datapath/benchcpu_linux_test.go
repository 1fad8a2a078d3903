package datapath

import "syscall"

// processCPUNs returns the CPU time (user and system) the process has used.
// Benchmarks report it per packet beside the wall-clock rate: on a shared
// machine the wall clock also counts the time the benchmark waited for a
// CPU, the CPU time does not (it still feels the other tenants' cache
// traffic).
func processCPUNs() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

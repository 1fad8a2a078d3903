package main

import (
	"os"
	"runtime"
)

// ensureProcs gives the program a second P when the runtime gave it one
// (a process pinned to one CPU, as a switch often is), the PMDs' own Ps
// aside. With one, a goroutine in a blocking system call holds it until
// the runtime's monitor takes it back, up to 10 ms later when the process
// was quiet: the embedded database's fsync of ovs-vsctl's transaction
// kept the update it had already published from reaching the reconciler
// (and ovs-vsctl) until the fsync ended, so the port opened after the
// disk write instead of beside it. A second P lets the other goroutines
// run while one thread sleeps in the kernel; the CPU is still the one. A
// GOMAXPROCS the user set is kept. It must run before the first datapath
// starts, which reads the count then.
func ensureProcs() {
	if os.Getenv("GOMAXPROCS") != "" || runtime.GOMAXPROCS(0) >= 2 {
		return
	}
	runtime.GOMAXPROCS(2)
}

package vswitchd

import (
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// The Go heap grows to twice what is live before the collector runs
// (GOGC=100), and the runtime hands freed pages back to the kernel only
// slowly, keeping about that goal resident. After a burst of changes
// (1,000 ports in one transaction decode, copy and index rows a few times
// over) the daemon then stays at about twice its live heap long after it
// went quiet: 97 MiB resident for about 45 MB live with 1,000 internal
// ports. memoryReturner gives that back once allocation has been quiet
// for a check interval: one forced collection and release per burst, none
// while changes keep coming (a limit on the heap, GOMEMLIMIT, would
// instead make the collector run more often during them, and run
// continuously when a large table legitimately needs more). GOGC and
// GOMEMLIMIT in the environment still apply as usual.
const (
	memCheckInterval = 2 * time.Second
	// memQuietAlloc: less than this allocated over an interval is quiet
	// (an idle daemon with 1,000 ports allocates well under it).
	memQuietAlloc = 4 << 20
	// memReturnAbove: the heap holds at least this much more than was
	// live at the last collection (garbage and free pages kept). An
	// idle switch with 1,000 ports makes about 0.35 MB/s of garbage, so
	// its resident memory rises by up to this much between returns, one
	// every ~25 s (a forced collection of a ~30 MB heap, ~1 ms/s of CPU
	// averaged); 16 MB let it drift 14 MiB above what it returned to.
	memReturnAbove = 8 << 20
)

var memSamples = []string{
	"/gc/heap/allocs:bytes",
	"/gc/heap/live:bytes",
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/free:bytes",
}

func readMem() (allocs, live, objects, free uint64) {
	s := make([]metrics.Sample, len(memSamples))
	for i, n := range memSamples {
		s[i].Name = n
	}
	metrics.Read(s)
	v := func(i int) uint64 {
		if s[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return s[i].Value.Uint64()
	}
	return v(0), v(1), v(2), v(3)
}

// memoryReturner runs until the daemon stops.
func (d *Daemon) memoryReturner() {
	defer d.wg.Done()
	t := time.NewTicker(memCheckInterval)
	defer t.Stop()
	last, _, _, _ := readMem()
	for {
		select {
		case <-d.stop:
			return
		case <-t.C:
		}
		var returned bool
		if last, returned = returnIfQuiet(last); returned {
			d.log.Debug("returned freed memory to the kernel after a quiet interval")
		}
	}
}

// returnIfQuiet is one check: last is the allocation count at the
// previous one; it returns the count to compare with at the next.
func returnIfQuiet(last uint64) (next uint64, returned bool) {
	allocs, live, objects, free := readMem()
	if allocs-last >= memQuietAlloc || live == 0 || objects+free < live+memReturnAbove {
		return allocs, false
	}
	debug.FreeOSMemory()
	next, _, _, _ = readMem()
	return next, true
}

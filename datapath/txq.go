package datapath

import (
	"runtime"
	"sync/atomic"
)

// TxqLock serialises PMDs that share one tx queue of a port. It is a
// spinlock (held for one Send of at most one batch) on a cache line of its
// own, so taking it never disturbs a neighbour.
type TxqLock struct {
	state atomic.Uint32
	_     [CacheLine - 4]byte
}

// Lock spins until the lock is taken, yielding the processor now and then so
// that a preempted holder can run (GOMAXPROCS may be below the PMD count).
func (l *TxqLock) Lock() {
	for spins := 0; !l.state.CompareAndSwap(0, 1); spins++ {
		if spins&63 == 63 {
			runtime.Gosched()
		}
	}
}

// Unlock releases the lock.
func (l *TxqLock) Unlock() { l.state.Store(0) }

// txqMap says which tx queue PMD number pmd uses on a port with ntxq queues
// when there are npmd PMDs, and whether that queue is shared (locked).
func txqMap(pmd, npmd, ntxq int) (txq int, shared bool) {
	if ntxq <= 0 {
		return 0, true
	}
	if ntxq >= npmd {
		return pmd, false
	}
	return pmd % ntxq, true
}

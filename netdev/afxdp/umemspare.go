package afxdp

import (
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Faulting in a queue's UMEM (20 MiB with the defaults: 5,120 pages
// zeroed, then pinned by XDP_UMEM_REG) was about 5 ms of the ~8 ms an
// AF_XDP open takes, the largest part of a switch's share of an
// add-port. Pinning pages already present is a fraction of that, so while
// AF_XDP ports are open one UMEM of the last size used is kept mapped and
// faulted in ahead of need, replaced in the background after it is taken:
// the next port's first queue starts with it. It costs one UMEM of
// resident memory while any AF_XDP port is open (Open vSwitch's afxdp
// netdev takes 64 MiB per queue: 16,384 frames of 4 KiB), none when none
// is.
var spare struct {
	mu      sync.Mutex
	buf     []byte
	ports   int  // AF_XDP ports open
	pending bool // a replacement is scheduled or being mapped
}

// spareDelay keeps the replacement's page faults off the path of the
// change that opened the port (the rest of its reconcile pass, its first
// packets).
const spareDelay = 50 * time.Millisecond

// mapFaulted maps size bytes of private anonymous memory, faulted in.
func mapFaulted(size int) ([]byte, error) {
	return unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
}

// mapUMEM is a queue's UMEM: the spare if it has the size, else a new
// mapping. The spare was never written, so it is zero as a new one is.
func mapUMEM(size int) ([]byte, error) {
	spare.mu.Lock()
	b := spare.buf
	if len(b) == size {
		spare.buf = nil
	} else {
		b = nil
	}
	spare.mu.Unlock()
	if b != nil {
		return b, nil
	}
	return mapFaulted(size)
}

// portOpened counts an open port and schedules a spare of its queues'
// UMEM size if there is none.
func portOpened(size int) {
	spare.mu.Lock()
	defer spare.mu.Unlock()
	spare.ports++
	if spare.pending || len(spare.buf) == size {
		return
	}
	spare.pending = true
	time.AfterFunc(spareDelay, func() {
		b, err := mapFaulted(size)
		spare.mu.Lock()
		defer spare.mu.Unlock()
		spare.pending = false
		if err != nil {
			return // the next open maps its own
		}
		if spare.ports == 0 {
			unix.Munmap(b)
			return
		}
		if spare.buf != nil {
			unix.Munmap(spare.buf)
		}
		spare.buf = b
	})
}

// portClosed uncounts a port; with the last one the spare goes.
func portClosed() {
	spare.mu.Lock()
	defer spare.mu.Unlock()
	spare.ports--
	if spare.ports == 0 && spare.buf != nil {
		unix.Munmap(spare.buf)
		spare.buf = nil
	}
}

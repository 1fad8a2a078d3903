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
// resident memory (Open vSwitch's afxdp netdev takes 64 MiB per queue:
// 16,384 frames of 4 KiB), so it is kept only while ports are being
// added: it goes with the last port closed, and spareKeep after the last
// open. A switch that has its ports gave 20 MiB, a third of its memory
// besides the heap, to an add-port that may never come; the first open
// after a quiet spell faults its UMEM in itself again (about 5 ms more).
var spare struct {
	mu       sync.Mutex
	buf      []byte
	ports    int  // AF_XDP ports open
	pending  bool // a replacement is scheduled or being mapped
	lastOpen time.Time
	expire   *time.Timer // drops the spare spareKeep after the last open
}

// spareKeep is how long after an AF_XDP port was opened the spare is kept
// for the next: ports added one after the other (a script, a controller
// bringing up its interfaces) come well within it. A variable for tests.
var spareKeep = 10 * time.Second

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
	spare.lastOpen = time.Now()
	if spare.expire == nil {
		spare.expire = time.AfterFunc(spareKeep, expireSpare)
	} else {
		spare.expire.Reset(spareKeep)
	}
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
		if spare.ports == 0 || time.Since(spare.lastOpen) >= spareKeep {
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

// expireSpare drops the spare once no port was opened for spareKeep.
func expireSpare() {
	spare.mu.Lock()
	defer spare.mu.Unlock()
	if d := spareKeep - time.Since(spare.lastOpen); d > 0 {
		spare.expire.Reset(d) // an open came after the timer fired
		return
	}
	if spare.buf != nil {
		unix.Munmap(spare.buf)
		spare.buf = nil
	}
}

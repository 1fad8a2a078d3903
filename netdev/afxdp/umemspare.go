package afxdp

import (
	"sync"
	"time"

	"github.com/vswitch-go/vswitch/netdev/internal/bgclose"
)

// Faulting in a queue's UMEM (20 MiB with the defaults: 5,120 pages
// zeroed, then pinned by XDP_UMEM_REG) was about 5 ms of the ~8 ms an
// AF_XDP open takes, the largest part of a switch's share of an
// add-port; with the UMEM faulted in ahead, its registration (the pinning)
// and the rings' setup were still 1-1.3 ms of the ~1.7 left. So while
// AF_XDP ports are open one socket of the last layout used is kept
// prepared ahead of need, all done but its bind (prepareXSK), and
// replaced in the background after it is taken: the next port's first
// queue only binds it. It costs one UMEM of resident, pinned memory (Open
// vSwitch's afxdp netdev takes 64 MiB per queue: 16,384 frames of 4 KiB),
// so it is kept only while ports are being added: it goes with the last
// port closed, and spareKeep after the last open. A switch that has its
// ports gave 20 MiB, a third of its memory besides the heap, to an
// add-port that may never come; the first open after a quiet spell makes
// its socket itself again (about 6 ms more).
//
// A socket belongs to the network namespace it was made in, and binds
// only to interfaces of it: the spare is made in the namespace of the
// port whose open asked for it (a goroutine of the process, which runs
// in the process's namespace, makes it: a port opened from a thread in
// another, as tests do, gets none) and is taken only by an open in that
// namespace.
var spare struct {
	mu       sync.Mutex
	x        *xsk // prepared, unbound; nil: none
	key      spareKey
	ports    int  // AF_XDP ports open
	pending  bool // a replacement is scheduled or being made
	lastOpen time.Time
	expire   *time.Timer // drops the spare spareKeep after the last open
}

// spareKey is what a prepared socket fits: the UMEM's layout, the rings'
// sizes and the namespace.
type spareKey struct {
	lay layout
	sz  ringSizes
	ns  netnsID
}

// spareKeep is how long after an AF_XDP port was opened the spare is kept
// for the next: ports added one after the other (a script, a controller
// bringing up its interfaces) come well within it. A variable for tests.
var spareKeep = 10 * time.Second

// spareDelay keeps the replacement's page faults off the path of the
// change that opened the port (the rest of its reconcile pass, its first
// packets).
const spareDelay = 50 * time.Millisecond

// takeSpare is the spare socket if it fits lay and sz in the caller's
// namespace, else nil.
func takeSpare(lay layout, sz ringSizes) *xsk {
	ns, err := currentNetns()
	if err != nil {
		return nil
	}
	spare.mu.Lock()
	defer spare.mu.Unlock()
	if spare.x == nil || spare.key != (spareKey{lay, sz, ns}) {
		return nil
	}
	x := spare.x
	spare.x = nil
	return x
}

// dropSpareLocked closes the spare, if any, in the background.
func dropSpareLocked() {
	if x := spare.x; x != nil {
		spare.x = nil
		bgclose.Run(func() { x.close() })
	}
}

// portOpened counts an open port and schedules a spare socket of its
// queues' layout if there is none.
func portOpened(lay layout, sz ringSizes) {
	ns, nsErr := currentNetns()
	spare.mu.Lock()
	defer spare.mu.Unlock()
	spare.ports++
	spare.lastOpen = time.Now()
	if spare.expire == nil {
		spare.expire = time.AfterFunc(spareKeep, expireSpare)
	} else {
		spare.expire.Reset(spareKeep)
	}
	key := spareKey{lay, sz, ns}
	if nsErr != nil || spare.pending || spare.x != nil && spare.key == key {
		return
	}
	spare.pending = true
	time.AfterFunc(spareDelay, func() {
		var x *xsk
		if here, err := currentNetns(); err == nil && here == ns {
			x, _ = prepareXSK(lay, sz) // on error the next open makes its own
		}
		spare.mu.Lock()
		defer spare.mu.Unlock()
		spare.pending = false
		if x == nil {
			return
		}
		if spare.ports == 0 || time.Since(spare.lastOpen) >= spareKeep {
			bgclose.Run(func() { x.close() })
			return
		}
		dropSpareLocked()
		spare.x, spare.key = x, key
	})
}

// portClosed uncounts a port; with the last one the spare goes.
func portClosed() {
	spare.mu.Lock()
	defer spare.mu.Unlock()
	spare.ports--
	if spare.ports == 0 {
		dropSpareLocked()
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
	dropSpareLocked()
}

package afxdp

import (
	"errors"
	"fmt"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/vswitch-go/vswitch/netdev"
)

// ringSizes are the entry counts of one socket's four rings (powers of two).
type ringSizes struct {
	fill, comp, rx, tx uint32
}

// rxSide is the state of one socket that Recv (one goroutine) uses.
type rxSide struct {
	fill addrRing
	rx   descRing
	// recycle holds frame bases taken from the rx ring that did not fit on
	// the fill ring yet (only possible if the kernel misbehaves, since the
	// fill ring can hold every rx frame); they go back before new ones.
	recycle []uint64
	c       *netdev.Counters
}

// txSide is the state of one socket that Send (one goroutine) uses.
type txSide struct {
	tx   descRing
	comp addrRing
	free []uint64 // stack of tx frame bases not in the kernel's hands
	c    *netdev.Counters
}

// xsk is one AF_XDP socket bound to one queue, with its own UMEM. The rx
// and tx halves sit on separate cache lines because different PMDs may
// drive them.
type xsk struct {
	fd       int
	queue    int
	zeroCopy bool
	bindBusy int           // binds refused with EBUSY before the one that worked
	bindWait time.Duration // time spent binding, retries included
	lay      layout
	umem     []byte
	maps     [4][]byte // fill, completion, rx, tx ring mappings
	_        [64]byte
	r        rxSide
	_        [64]byte
	t        txSide
	_        [64]byte
}

// sockopt calls getsockopt or setsockopt with a struct argument.
func sockopt(call uintptr, fd, opt int, p unsafe.Pointer, size uintptr) error {
	l := uint32(size)
	var e unix.Errno
	if call == unix.SYS_GETSOCKOPT {
		_, _, e = unix.Syscall6(call, uintptr(fd), unix.SOL_XDP, uintptr(opt), uintptr(p), uintptr(unsafe.Pointer(&l)), 0)
	} else {
		_, _, e = unix.Syscall6(call, uintptr(fd), unix.SOL_XDP, uintptr(opt), uintptr(p), size, 0)
	}
	if e != 0 {
		return e
	}
	return nil
}

// openXSK creates a socket for queue q of ifindex with a fresh UMEM laid
// out as lay (or takes the spare socket prepared for that layout,
// umemspare.go) and binds it with bindFlags (XDP_COPY or XDP_ZEROCOPY;
// XDP_USE_NEED_WAKEUP is added). A queue still held by a closed socket
// (see bindBusy) is retried for up to busyWait; x.bindWait and x.bindBusy
// say how long and how often. On error everything it made or took is
// released.
func openXSK(ifindex, q int, lay layout, sz ringSizes, bindFlags uint16, busyWait time.Duration) (x *xsk, err error) {
	x = takeSpare(lay, sz)
	if x == nil {
		if x, err = prepareXSK(lay, sz); err != nil {
			return nil, err
		}
	}
	x.queue = q
	sa := unix.SockaddrXDP{Flags: bindFlags | unix.XDP_USE_NEED_WAKEUP, Ifindex: uint32(ifindex), QueueID: uint32(q)}
	if err = x.bind(&sa, busyWait); err != nil {
		x.close()
		return nil, fmt.Errorf("bind queue %d: %w", q, err)
	}
	var opts struct{ flags uint32 } // struct xdp_options, linux/if_xdp.h
	if sockopt(unix.SYS_GETSOCKOPT, x.fd, unix.XDP_OPTIONS, unsafe.Pointer(&opts), unsafe.Sizeof(opts)) == nil {
		x.zeroCopy = opts.flags&unix.XDP_OPTIONS_ZEROCOPY != 0
	}
	return x, nil
}

// prepareXSK makes all of a socket but its binding: a UMEM mapped,
// faulted in and registered, the rings sized and mapped, every rx frame
// on the fill ring. Binding, to the interface and queue of a port, is all
// that is left. On error everything it made is released.
func prepareXSK(lay layout, sz ringSizes) (x *xsk, err error) {
	x = &xsk{fd: -1, lay: lay}
	defer func() {
		if err != nil {
			x.close()
			x = nil
		}
	}()
	x.umem, err = mapFaulted(int(lay.total()))
	if err != nil {
		return x, fmt.Errorf("mmap umem: %w", err)
	}
	x.fd, err = unix.Socket(unix.AF_XDP, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return x, fmt.Errorf("socket(AF_XDP): %w", err)
	}
	reg := unix.XDPUmemReg{
		Addr: uint64(uintptr(unsafe.Pointer(unsafe.SliceData(x.umem)))),
		Len:  lay.total(),
		Size: uint32(lay.frameSize),
	}
	if err = sockopt(unix.SYS_SETSOCKOPT, x.fd, unix.XDP_UMEM_REG, unsafe.Pointer(&reg), unsafe.Sizeof(reg)); err != nil {
		return x, fmt.Errorf("XDP_UMEM_REG: %w", err)
	}
	for _, o := range []struct {
		opt  int
		size uint32
	}{{unix.XDP_UMEM_FILL_RING, sz.fill}, {unix.XDP_UMEM_COMPLETION_RING, sz.comp}, {unix.XDP_RX_RING, sz.rx}, {unix.XDP_TX_RING, sz.tx}} {
		if err = unix.SetsockoptInt(x.fd, unix.SOL_XDP, o.opt, int(o.size)); err != nil {
			return x, fmt.Errorf("ring size option %d: %w", o.opt, err)
		}
	}
	var off unix.XDPMmapOffsets
	if err = sockopt(unix.SYS_GETSOCKOPT, x.fd, unix.XDP_MMAP_OFFSETS, unsafe.Pointer(&off), unsafe.Sizeof(off)); err != nil {
		return x, fmt.Errorf("XDP_MMAP_OFFSETS: %w", err)
	}
	maps := []struct {
		off   unix.XDPRingOffset
		size  uint32
		entry uintptr
		pgoff int64
	}{
		{off.Fr, sz.fill, 8, unix.XDP_UMEM_PGOFF_FILL_RING},
		{off.Cr, sz.comp, 8, unix.XDP_UMEM_PGOFF_COMPLETION_RING},
		{off.Rx, sz.rx, unsafe.Sizeof(unix.XDPDesc{}), unix.XDP_PGOFF_RX_RING},
		{off.Tx, sz.tx, unsafe.Sizeof(unix.XDPDesc{}), unix.XDP_PGOFF_TX_RING},
	}
	for i, m := range maps {
		x.maps[i], err = unix.Mmap(x.fd, m.pgoff, ringBytes(m.off, m.size, m.entry),
			unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED|unix.MAP_POPULATE)
		if err != nil {
			return x, fmt.Errorf("mmap ring %d: %w", i, err)
		}
	}
	x.r.fill = newAddrRing(x.maps[0], off.Fr, sz.fill)
	x.t.comp = newAddrRing(x.maps[1], off.Cr, sz.comp)
	x.r.rx = newDescRing(x.maps[2], off.Rx, sz.rx)
	x.t.tx = newDescRing(x.maps[3], off.Tx, sz.tx)
	x.r.recycle = make([]uint64, 0, lay.rxFrames)
	x.t.free = make([]uint64, 0, lay.txFrames)
	for i := uint64(0); i < lay.txFrames; i++ {
		x.t.free = append(x.t.free, lay.rxBytes()+i*lay.frameSize)
	}
	// Every rx frame starts on the fill ring (New made sure it holds them).
	n := x.r.fill.free(uint32(lay.rxFrames))
	for i := uint32(0); i < n; i++ {
		x.r.fill.addrs[(x.r.fill.cachedProd+i)&x.r.fill.mask] = uint64(i) * lay.frameSize
	}
	x.r.fill.submit(n)
	return x, nil
}

// Back-off between binds of a busy queue: the first retry comes soon
// because the usual wait is a few tens of milliseconds, later ones spread
// out so that a long wait costs few syscalls.
const (
	busyFirstDelay = 2 * time.Millisecond
	busyMaxDelay   = 200 * time.Millisecond
)

// ErrQueueBusy is returned (wrapped, with EBUSY) when a queue stayed bound
// to another AF_XDP socket for all of Options.BusyWait: AF_XDP works on the
// interface, someone else holds it. It is not a reason to fall back to
// another driver.
var ErrQueueBusy = errors.New("queue held by another AF_XDP socket")

// bind binds the socket, retrying EBUSY for up to busyWait.
//
// Why a queue can be busy with no socket open on it: closing an AF_XDP
// socket (or the death of its process) does not free its queue. The
// socket's last reference drops its buffer pool, and the pool is torn down
// by a work item (xp_put_pool schedules xp_release_deferred, net/xdp/
// xsk_buff_pool.c) that takes the RTNL lock and only then clears the pool
// from the queue (xsk_clear_pool_at_qid). Until that work runs, bind sees
// the queue taken (xp_assign_dev: xsk_get_pool_from_qid → -EBUSY). The
// kernel signals nothing when it is done, so the only way to know is to
// bind again. Measured on 6.18 with a veth: 20–50 ms after close, 0–30 ms
// after kill -9 of the holder; longer while other tasks hold RTNL (netns
// creation and teardown). A queue that stays busy past busyWait belongs to
// a live socket, and that error is returned.
func (x *xsk) bind(sa *unix.SockaddrXDP, busyWait time.Duration) error {
	start := time.Now()
	delay := busyFirstDelay
	for {
		err := unix.Bind(x.fd, sa)
		if err != unix.EBUSY {
			x.bindWait = time.Since(start)
			return err
		}
		x.bindBusy++
		left := busyWait - time.Since(start)
		if left <= 0 {
			x.bindWait = time.Since(start)
			return fmt.Errorf("%w: %w (still busy after %d tries in %v)",
				ErrQueueBusy, err, x.bindBusy, x.bindWait.Round(time.Millisecond))
		}
		time.Sleep(min(delay, left))
		delay = min(2*delay, busyMaxDelay)
	}
}

// stats reads the kernel's counters for the socket.
func (x *xsk) stats() (unix.XDPStatistics, error) {
	var s unix.XDPStatistics
	err := sockopt(unix.SYS_GETSOCKOPT, x.fd, unix.XDP_STATISTICS, unsafe.Pointer(&s), unsafe.Sizeof(s))
	return s, err
}

// close unmaps the rings and the UMEM and closes the socket. The ring
// mappings go first: the kernel keeps the UMEM pinned until the socket is
// released, and nothing of ours may touch either afterwards.
func (x *xsk) close() error {
	var first error
	for i, m := range x.maps {
		if m != nil {
			if err := unix.Munmap(m); err != nil && first == nil {
				first = err
			}
			x.maps[i] = nil
		}
	}
	if x.fd >= 0 {
		if err := unix.Close(x.fd); err != nil && first == nil {
			first = err
		}
		x.fd = -1
	}
	if x.umem != nil {
		if err := unix.Munmap(x.umem); err != nil && first == nil {
			first = err
		}
		x.umem = nil
	}
	return first
}

// kickRx asks the kernel to look at the fill ring again.
func kickRx(fd int) unix.Errno {
	_, _, e := unix.Syscall6(unix.SYS_RECVFROM, uintptr(fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
	return e
}

// kickTx asks the kernel to transmit what is on the tx ring.
func kickTx(fd int) unix.Errno {
	_, _, e := unix.Syscall6(unix.SYS_SENDTO, uintptr(fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
	return e
}

// transient reports whether a kick's error only means "not now": the kernel
// keeps the descriptors and a later kick moves them.
func transient(e unix.Errno) bool {
	return e == 0 || e == unix.EAGAIN || e == unix.EBUSY || e == unix.ENOBUFS || e == unix.EINTR
}

// mapFaulted maps size bytes of private anonymous memory, faulted in.
func mapFaulted(size int) ([]byte, error) {
	return unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE,
		unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
}

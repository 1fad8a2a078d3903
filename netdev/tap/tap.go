// Package tap is the port driver for internal ports: the bridge's own
// interface on the host, a tap device opened through /dev/net/tun with a
// virtio-net header in front of every frame.
//
// Directions, seen from the switch:
//
//   - Recv gets the frames the host stack transmits out of the tap. With
//     TUNSETOFFLOAD the kernel hands them over as GSO super-frames and with
//     partial checksums instead of segmenting and summing each one itself;
//     the driver cuts them into MTU frames and completes checksums with
//     netdev/vnethdr, unless the PMD's pool has a big buffer free: then a
//     TCP or USO super-frame crosses the switch whole (see "Big frames" in
//     docs/architecture.md).
//   - Send injects frames into the host stack, each with a zero vnet header
//     (complete frames, complete checksums), but a GSO super-frame with its
//     GSO type and partial checksum (netdev.GSOSender).
//
// Batching. A tun file descriptor moves one frame per read or write: there
// is no batched read (readv gathers one frame, and recvmmsg needs a
// socket), and the only batched write (TUN_MSG_PTR sendmsg) is reserved to
// vhost-net inside the kernel. The alternatives were weighed as follows.
//
//   - An AF_PACKET mmap ring bound to the tap sees the host's outgoing
//     frames without a syscall per frame, but the tun queue still receives
//     every one of them too: unread, or with the queue detached, the kernel
//     drops each frame after the packet socket's clone, so the tap's
//     tx_dropped counter would show 100% loss to every monitoring tool, and
//     the kernel does a clone plus a drop per frame on top of the copy. A
//     packet socket's transmit ring cannot be used for the other direction:
//     frames sent on it leave through the tap towards the tun reader (us),
//     not into the host stack.
//   - io_uring would batch both directions, but needs its own ring setup
//     and a completion protocol written against raw syscalls.
//
// So the driver reads one frame per readv, but only the frames that are
// ready: the descriptors are nonblocking and Recv stops at the first
// EAGAIN (one extra syscall per batch, no more), and the PMD sleeps in
// ppoll on RxFD when the port is idle. This is what Open vSwitch does for
// tap ports. For TCP the cost is small in practice: the host stack hands
// over 64 KiB GSO frames, so one read yields up to 44 MTU frames. Send
// writes one frame per writev; each write takes effect at once, so no kick
// is needed.
package tap

import (
	"errors"
	"fmt"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/vswitch-go/vswitch/datapath/packet"
	"github.com/vswitch-go/vswitch/netdev"
	"github.com/vswitch-go/vswitch/netdev/linkwatch"
	"github.com/vswitch-go/vswitch/netdev/vnethdr"
)

// TUNSETOFFLOAD flags (linux/if_tun.h); x/sys/unix does not define them.
const (
	tunFCsum   = 0x01
	tunFTSO4   = 0x02
	tunFTSO6   = 0x04
	tunFTSOECN = 0x08
	tunFUSO4   = 0x20
	tunFUSO6   = 0x40
)

// Buffer sizes of a receive queue.
const (
	// maxDirect bounds the part of a frame read straight into the pool
	// buffer; the rest of a larger frame lands in the queue's big buffer.
	maxDirect = 16 << 10
	// maxFrame is the largest frame tun hands over: a 64 KiB GSO frame plus
	// Ethernet and two VLAN headers, rounded up.
	maxFrame = 65536 + 512
)

// Options configure New. The zero value creates a non-persistent,
// single-queue tap that is brought up with the kernel's default MAC and MTU.
type Options struct {
	// Queues is the number of queue file descriptors (IFF_MULTI_QUEUE);
	// each is rx queue i and tx queue i. Default 1.
	Queues int
	// Down leaves the link administratively down (by default New brings it up).
	Down bool
	// MAC, if set, is the device's address.
	MAC net.HardwareAddr
	// MTU, if non-zero, is the device's MTU.
	MTU int
	// Persist keeps the device after Close (TUNSETPERSIST). Without it the
	// device disappears when the port is closed, even if it existed and was
	// persistent before.
	Persist bool
	// Netns, if set, is the network namespace (a name under /var/run/netns
	// or a path) in which the device is created or looked up. The process's
	// link watcher does not follow other namespaces, so such a port learns
	// of the device's removal from the tun descriptor itself (EBADFD/POLLERR)
	// and reports the link up until then.
	Netns string
	// NoUSO leaves UDP segmentation offload off even if the kernel has it.
	NoUSO bool
	// NoOffloads turns every offload off, so the host stack segments and
	// checksums each frame before the driver reads it (one read per MTU
	// frame instead of per GSO frame). For comparison and for debugging.
	NoOffloads bool
	// PollBackoff, if set, lets a queue that found nothing skip up to that
	// many of the next polls without a read (the pause doubles from 1 with
	// each empty read and ends with the first frame). Every read is a
	// syscall, so a rarely used device — a bridge's own interface — then
	// costs a busy PMD a read every PollBackoff iterations instead of one
	// each, for at most that many iterations of extra latency.
	PollBackoff int
}

// rxQueue is the receive side of one queue descriptor, owned by one PMD at
// a time. The header and the iovecs live here so that a read allocates
// nothing.
type rxQueue struct {
	fd  int
	iov [3]unix.Iovec
	hdr [vnethdr.Len]byte
	// big holds the tail of a frame longer than the direct part and, for a
	// GSO frame, the whole frame while it is being segmented.
	big        []byte
	seg        vnethdr.Segmenter
	segPending bool
	// The GSO frame deliver found in big[:gsoLen] and its header, for
	// Recv to hand over whole in a big buffer instead of segmenting.
	gsoLen int
	gsoHdr vnethdr.Header
	// skip is how many more polls return nothing without a read, and
	// backoff the last such pause (Options.PollBackoff).
	skip, backoff int
	_             [64]byte
}

// txQueue is the transmit side of one queue descriptor.
type txQueue struct {
	fd  int
	iov [2]unix.Iovec
	hdr [vnethdr.Len]byte // zero but for a GSO frame being written
	_   [64]byte
}

// Port is a tap port. Its zero value is not usable; use New.
type Port struct {
	name     string
	fds      []int
	rx       []rxQueue
	tx       []txQueue
	counters []netdev.Counters // rx queues, then tx queues
	gso      netdev.GSOCounters
	mtu      int
	uso      bool
	link     *linkwatch.Link // nil when the device lives in another namespace
	// pollBackoff is Options.PollBackoff.
	pollBackoff int

	gone    atomic.Bool
	removed chan struct{}
	closeMu sync.Mutex
	closed  bool
}

// New creates the tap device ifname, or attaches to it if it exists and is
// persistent, and returns it as a port.
func New(ifname string, opts Options) (*Port, error) {
	if opts.Queues <= 0 {
		opts.Queues = 1
	}
	if len(ifname) >= unix.IFNAMSIZ {
		return nil, fmt.Errorf("tap: interface name %q too long", ifname)
	}
	p := &Port{
		name:        ifname,
		pollBackoff: opts.PollBackoff,
		rx:          make([]rxQueue, opts.Queues),
		tx:          make([]txQueue, opts.Queues),
		counters:    make([]netdev.Counters, 2*opts.Queues),
		removed:     make(chan struct{}),
	}
	err := inNetns(opts.Netns, func() error { return p.open(opts) })
	if err != nil {
		p.closeFDs()
		return nil, err
	}
	p.initQueues()
	if opts.Netns == "" {
		l, err := linkwatch.Watch(p.name)
		if err != nil {
			p.closeFDs()
			return nil, err
		}
		p.link = l
		l.OnRemoved(p.markGone)
	}
	return p, nil
}

// initQueues points each queue at its descriptor and buffers.
func (p *Port) initQueues() {
	var mapped [][]byte
	for i, fd := range p.fds {
		rq := &p.rx[i]
		rq.fd = fd
		rq.big = newBigBuffer()
		if rq.big == nil {
			rq.big = make([]byte, maxDirect+maxFrame)
		} else {
			mapped = append(mapped, rq.big)
		}
		rq.iov[0].Base = &rq.hdr[0]
		rq.iov[0].SetLen(vnethdr.Len)
		tq := &p.tx[i]
		tq.fd = fd
		tq.iov[0].Base = &tq.hdr[0]
		tq.iov[0].SetLen(vnethdr.Len)
	}
	if mapped != nil {
		// Unmapped only once nothing can reach the port, so no Recv can
		// still be reading into them.
		runtime.AddCleanup(p, func(bufs [][]byte) {
			for _, b := range bufs {
				unix.Munmap(b)
			}
		}, mapped)
	}
}

// newBigBuffer returns a queue's buffer for frames longer than the direct
// part, mapped rather than allocated: its pages take memory only once a
// long frame has been written into them. Most queues never see one (an
// internal port of a thousand idles), and 82 KiB from the Go heap per
// queue was most of the daemon's memory with 1,000 ports (the heap's
// reused pages are resident). Nil if the mapping fails.
func newBigBuffer() []byte {
	b, err := unix.Mmap(-1, 0, maxDirect+maxFrame, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return nil
	}
	return b
}

// open creates the queue descriptors and configures the device; it runs in
// the target namespace.
func (p *Port) open(opts Options) error {
	for i := 0; i < opts.Queues; i++ {
		fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("tap: open /dev/net/tun: %w", err)
		}
		p.fds = append(p.fds, fd)
		ifr, err := unix.NewIfreq(p.name)
		if err != nil {
			return fmt.Errorf("tap: %s: %w", p.name, err)
		}
		// One queue is a single-queue device: a multi-queue one gets the
		// kernel's 256 transmit queues, each with its qdisc once up,
		// which made a thousand internal ports cost 7 MB of kernel
		// memory each and most of their creation time. A persistent
		// device made multi-queue before (by an older version) refuses
		// the other kind, so that one is asked for then.
		flags := uint16(unix.IFF_TAP | unix.IFF_NO_PI | unix.IFF_VNET_HDR)
		if opts.Queues > 1 {
			flags |= unix.IFF_MULTI_QUEUE
		}
		ifr.SetUint16(flags)
		err = unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr)
		if errors.Is(err, unix.EINVAL) && opts.Queues == 1 {
			ifr.SetUint16(flags | unix.IFF_MULTI_QUEUE)
			err = unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr)
		}
		if err != nil {
			return fmt.Errorf("tap: TUNSETIFF %s: %w", p.name, err)
		}
		if i > 0 {
			continue
		}
		// The header size and offloads are per device; set them once.
		if err := unix.IoctlSetPointerInt(fd, unix.TUNSETVNETHDRSZ, vnethdr.Len); err != nil {
			return fmt.Errorf("tap: TUNSETVNETHDRSZ: %w", err)
		}
		off := tunFCsum | tunFTSO4 | tunFTSO6 | tunFTSOECN
		if opts.NoOffloads {
			off = 0
		}
		p.uso = false
		if !opts.NoUSO && !opts.NoOffloads {
			if unix.IoctlSetInt(fd, unix.TUNSETOFFLOAD, off|tunFUSO4|tunFUSO6) == nil {
				p.uso = true
			}
		}
		if !p.uso {
			if err := unix.IoctlSetInt(fd, unix.TUNSETOFFLOAD, off); err != nil {
				return fmt.Errorf("tap: TUNSETOFFLOAD: %w", err)
			}
		}
		persist := 0
		if opts.Persist {
			persist = 1
		}
		if err := unix.IoctlSetInt(fd, unix.TUNSETPERSIST, persist); err != nil {
			return fmt.Errorf("tap: TUNSETPERSIST: %w", err)
		}
	}
	l, err := netlink.LinkByName(p.name)
	if err != nil {
		return fmt.Errorf("tap: %s: %w", p.name, err)
	}
	if opts.MAC != nil {
		if err := netlink.LinkSetHardwareAddr(l, opts.MAC); err != nil {
			return fmt.Errorf("tap: %s: set MAC: %w", p.name, err)
		}
	}
	if opts.MTU != 0 {
		if err := netlink.LinkSetMTU(l, opts.MTU); err != nil {
			return fmt.Errorf("tap: %s: set MTU: %w", p.name, err)
		}
		p.mtu = opts.MTU
	} else {
		p.mtu = l.Attrs().MTU
	}
	if !opts.Down {
		if err := netlink.LinkSetUp(l); err != nil {
			return fmt.Errorf("tap: %s: set up: %w", p.name, err)
		}
	}
	return nil
}

// markGone records that the device has disappeared. It is called from the
// error path of Recv/Send (EBADFD) and from the watcher.
func (p *Port) markGone() {
	if p.gone.CompareAndSwap(false, true) {
		close(p.removed)
	}
}

// inNetns runs fn in network namespace ns ("" is the caller's own). The
// switch happens on a locked thread that is never unlocked, so the thread
// dies with its goroutine instead of running other goroutines in ns.
func inNetns(ns string, fn func() error) error {
	if ns == "" {
		return fn()
	}
	path := ns
	if !strings.Contains(ns, "/") {
		path = "/var/run/netns/" + ns
	}
	errc := make(chan error, 1)
	go func() {
		runLockedIn(path, fn, errc)
	}()
	return <-errc
}

func runLockedIn(path string, fn func() error, errc chan<- error) {
	runtime.LockOSThread() // never unlocked: see inNetns
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		errc <- fmt.Errorf("tap: netns %s: %w", path, err)
		return
	}
	err = unix.Setns(fd, unix.CLONE_NEWNET)
	unix.Close(fd)
	if err != nil {
		errc <- fmt.Errorf("tap: setns %s: %w", path, err)
		return
	}
	errc <- fn()
}

// Name implements netdev.Netdev.
func (p *Port) Name() string { return p.name }

// NumRxQueues implements netdev.Netdev.
func (p *Port) NumRxQueues() int { return len(p.rx) }

// NumTxQueues implements netdev.Netdev.
func (p *Port) NumTxQueues() int { return len(p.tx) }

// MTU implements netdev.Netdev.
func (p *Port) MTU() int {
	if p.link != nil {
		return p.link.MTU()
	}
	return p.mtu
}

// LinkUp implements netdev.Netdev.
func (p *Port) LinkUp() bool {
	if p.gone.Load() {
		return false
	}
	if p.link != nil {
		return p.link.Up()
	}
	return true
}

// USO reports whether the kernel accepted UDP segmentation offload, so that
// UDP GSO frames reach the driver unsegmented.
func (p *Port) USO() bool { return p.uso }

// Removed implements netdev.Remover.
func (p *Port) Removed() <-chan struct{} { return p.removed }

// RxFD implements netdev.Waiter.
func (p *Port) RxFD(q int) int { return p.rx[q].fd }

// ArmRx implements netdev.RxArmer for a PMD about to sleep: the tap's
// descriptor needs no arming, but a poll back-off in progress
// (PollBackoff) ends, so that the frame that wakes the PMD is read at
// its first poll rather than after the skipped ones.
func (p *Port) ArmRx(q int) bool {
	p.rx[q].skip = 0
	return false
}

// Stats implements netdev.Netdev.
func (p *Port) Stats() netdev.Stats {
	var s netdev.Stats
	for i := range p.counters {
		p.counters[i].AddTo(&s)
	}
	return s
}

// Close implements netdev.Netdev. Without Options.Persist the kernel removes
// the device when the last descriptor closes.
func (p *Port) Close() error {
	p.closeMu.Lock()
	defer p.closeMu.Unlock()
	if p.closed {
		return errors.New("tap: port already closed")
	}
	p.closed = true
	if p.link != nil {
		p.link.Stop()
	}
	return p.closeFDs()
}

func (p *Port) closeFDs() error {
	var first error
	for _, fd := range p.fds {
		if err := unix.Close(fd); err != nil && first == nil {
			first = err
		}
	}
	p.fds = nil
	return first
}

// Recv implements netdev.Netdev.
func (p *Port) Recv(q int, pool *packet.Pool, b *packet.Batch) int {
	rq := &p.rx[q]
	if rq.skip > 0 {
		rq.skip--
		return 0
	}
	n, bytes, errs := 0, 0, 0
	for b.N < packet.BatchSize {
		pkt := pool.Get()
		if pkt == nil {
			// Frames not read stay queued in the kernel, which counts
			// them (tap tx_dropped) if its queue overflows.
			break
		}
		if rq.segPending {
			l, ok, err := rq.seg.Next(pkt.Buffer())
			if err != nil || !ok {
				pkt.Free()
				rq.segPending = false
				if err != nil {
					errs++
				}
				continue
			}
			pkt.SetLen(l)
			b.Add(pkt)
			n++
			bytes += l
			continue
		}
		buf := pkt.Buffer()
		direct := len(buf)
		if direct > maxDirect {
			direct = maxDirect
		}
		rq.iov[1].Base = &buf[0]
		rq.iov[1].SetLen(direct)
		rq.iov[2].Base = &rq.big[direct]
		rq.iov[2].SetLen(len(rq.big) - direct)
		r, _, e := unix.RawSyscall(unix.SYS_READV, uintptr(rq.fd), uintptr(unsafe.Pointer(&rq.iov[0])), 3)
		if e != 0 {
			pkt.Free()
			if e != unix.EAGAIN && e != unix.EINTR {
				errs++
				if e == unix.EBADFD || e == unix.EBADF {
					p.markGone()
				}
			}
			break
		}
		l, ok := rq.deliver(pkt, buf, direct, int(r))
		if !ok {
			pkt.Free()
			errs++
			continue
		}
		if l == 0 {
			pkt.Free() // a GSO frame: whole, or its segments follow
			if bp := p.takeWhole(rq, pool); bp != nil {
				rq.segPending = false
				b.Add(bp)
				n++
				bytes += bp.Len()
			}
			continue
		}
		b.Add(pkt)
		n++
		bytes += l
	}
	if n != 0 || errs != 0 {
		c := &p.counters[q]
		c.RxPackets.Add(uint64(n))
		c.RxBytes.Add(uint64(bytes))
		c.RxErrors.Add(uint64(errs))
	}
	if p.pollBackoff > 0 {
		if n == 0 && !rq.segPending {
			rq.backoff = min(max(2*rq.backoff, 1), p.pollBackoff)
			rq.skip = rq.backoff
		} else {
			rq.backoff = 0
		}
	}
	return n
}

// deliver handles one frame of r bytes (vnet header included) that readv
// put into rq.hdr, buf[:direct] and rq.big[direct:]. A frame that fits and
// needs no segmentation is finished in place in pkt and its length
// returned; a GSO or oversized frame is gathered into rq.big and handed to
// the segmenter (l == 0). ok is false for a frame that must be dropped.
func (rq *rxQueue) deliver(pkt *packet.Packet, buf []byte, direct, r int) (l int, ok bool) {
	got := r - vnethdr.Len
	if got <= 0 {
		return 0, false
	}
	h, err := vnethdr.Decode(rq.hdr[:])
	if err != nil {
		return 0, false
	}
	if h.GSOType == vnethdr.GSONone && got <= direct {
		frame := buf[:got]
		if vnethdr.CompleteChecksum(&h, frame) != nil {
			return 0, false
		}
		pkt.SetLen(got)
		return got, true
	}
	if got > len(rq.big) {
		return 0, false
	}
	copy(rq.big[:direct], buf[:min(direct, got)])
	if rq.seg.Reset(&h, rq.big[:got]) != nil {
		return 0, false
	}
	rq.segPending = true
	rq.gsoLen, rq.gsoHdr = got, h
	return 0, true
}

// takeWhole copies the GSO frame deliver found into a big buffer with its
// offload state, or returns nil for it to be segmented: a frame that is
// not one (an oversized plain frame), not a kind that ports taking GSO get
// whole (UFO, or no partial checksum), or no big buffer free (counted).
func (p *Port) takeWhole(rq *rxQueue, pool *packet.Pool) *packet.Packet {
	h := &rq.gsoHdr
	switch h.GSOType &^ vnethdr.GSOECN {
	case vnethdr.GSOTCPv4, vnethdr.GSOTCPv6, vnethdr.GSOUDPL4:
	default:
		return nil
	}
	if h.Flags&vnethdr.FlagNeedsCsum == 0 || pool.Big() == nil {
		return nil
	}
	bp := pool.GetBig()
	if bp == nil || !bp.SetLen(rq.gsoLen) {
		if bp != nil {
			bp.Free()
		}
		p.gso.RxSegmented.Add(1)
		return nil
	}
	copy(bp.Data(), rq.big[:rq.gsoLen])
	bp.Offload = packet.Offload(*h)
	p.gso.RxWhole.Add(1)
	return bp
}

// GSOStats returns the port's GSO counters.
func (p *Port) GSOStats() netdev.GSOStats { return p.gso.Load() }

// SendsGSO implements netdev.GSOSender: the tap's vnet header carries a
// GSO frame's state into the host stack.
func (p *Port) SendsGSO() bool { return true }

// Send implements netdev.Netdev.
func (p *Port) Send(q int, b *packet.Batch) int {
	tq := &p.tx[q]
	sent, bytes, drops, errs := 0, 0, 0, 0
	for i, pkt := range b.Packets() {
		d := pkt.Data()
		if len(d) == 0 {
			errs++
			continue
		}
		gso := pkt.GSO()
		if gso {
			h := vnethdr.Header(pkt.Offload)
			if !h.SetTxHdrLen(d) {
				errs++
				continue
			}
			h.Encode(tq.hdr[:])
		}
		tq.iov[1].Base = &d[0]
		tq.iov[1].SetLen(len(d))
		_, _, e := unix.RawSyscall(unix.SYS_WRITEV, uintptr(tq.fd), uintptr(unsafe.Pointer(&tq.iov[0])), 2)
		if gso {
			tq.hdr = [vnethdr.Len]byte{}
			if e == 0 {
				p.gso.TxWhole.Add(1)
			}
		}
		if e != 0 {
			if e == unix.EAGAIN || e == unix.ENOBUFS {
				drops++
				continue
			}
			if e == unix.EBADFD || e == unix.EBADF {
				// The device is gone: the rest would fail the same way.
				p.markGone()
				errs += b.N - i
				break
			}
			errs++
			continue
		}
		sent++
		bytes += len(d)
	}
	c := &p.counters[len(p.rx)+q]
	c.TxPackets.Add(uint64(sent))
	c.TxBytes.Add(uint64(bytes))
	c.TxKicks.Add(uint64(sent + drops + errs)) // one writev each, tried or not
	if drops != 0 {
		c.TxDrops.Add(uint64(drops))
	}
	if errs != 0 {
		c.TxErrors.Add(uint64(errs))
	}
	return sent
}

// TxKicks implements netdev.TxKicker: a tap takes one writev per frame,
// so it kicks once per packet whatever the batch.
func (p *Port) TxKicks(q int) uint64 { return p.counters[len(p.rx)+q].TxKicks.Load() }

var (
	_ netdev.Netdev    = (*Port)(nil)
	_ netdev.Waiter    = (*Port)(nil)
	_ netdev.Remover   = (*Port)(nil)
	_ netdev.TxKicker  = (*Port)(nil)
	_ netdev.GSOSender = (*Port)(nil)
)

// Package afxdp is the port driver for NICs and veth: one AF_XDP socket per
// queue, each with its own UMEM, fed by a small XDP program that redirects
// every frame of a served queue to that queue's socket and passes the rest
// to the kernel stack. The program and its maps (an XSKMAP, and the slot of
// each interface's queue in it) are shared by every port of the process
// in a network namespace (prog.go).
//
// Frames are copied between UMEM frames and the PMD's pool buffers in both
// directions, so UMEM frames never leave the driver and the rx and tx
// halves of a socket share nothing: Recv and Send of the same queue may run
// on different goroutines.
//
// Offloads: AF_XDP carries no checksum or GSO metadata.
//   - GSO: attaching native XDP to a veth makes the kernel clear TSO (the
//     NETIF_F_GSO_SOFTWARE features) on its peer until the program goes
//     (checked by TestE2EPeerOffloads: tcp-segmentation-offload on → off →
//     on), so the peer's stack segments before the veth and only MTU-sized
//     frames arrive. Generic XDP does not do this: on a veth in generic
//     mode, or a NIC with GRO/LRO, super-frames reach the socket, do not
//     fit a UMEM frame, and the kernel drops them and counts them in
//     XDP_STATISTICS rx_dropped, which Stats reports as RxDrops. Set
//     ethtool -K <peer> tso off (generic-mode veth) or ethtool -K <nic> gro
//     off lro off.
//   - Checksums: a local sender behind the peer of a veth with tx checksum
//     offload (the default, and XDP leaves it on) sends TCP/UDP with the
//     pseudo-header sum only. With FixChecksums (on by default for veth)
//     Recv completes them in software (vnethdr.CompletePartialL4Checksum:
//     a sum over the frame only when its field holds the pseudo-header
//     sum, so frames that arrive complete cost a header parse, about 17 ns
//     for 1.5 KB against 107 ns for a verifying sum); the alternative is
//     ethtool -K <peer> tx off and FixChecksums Off.
//     NICs deliver wire frames with complete checksums: default Off.
//
// Transmit uses the socket's tx ring, which in copy mode becomes an skb
// sent with the device's ordinary xmit, not XDP_REDIRECT (ndo_xdp_xmit):
// the receiving veth peer needs no XDP program and no GRO/NAPI of its own.
// GSO frames, which a descriptor cannot describe, go through a packet
// socket beside the ring in copy mode (gso.go).
//
// The program is attached through a BPF link (the kernel detaches it when
// the last fd of the link closes, so a crashed process leaves nothing
// behind; TestE2ELinkDetachedOnCrash kills a process to check).
package afxdp

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/vswitch-go/vswitch/datapath/packet"
	"github.com/vswitch-go/vswitch/netdev"
	"github.com/vswitch-go/vswitch/netdev/internal/bgclose"
	"github.com/vswitch-go/vswitch/netdev/linkwatch"
	"github.com/vswitch-go/vswitch/netdev/vnethdr"
)

// Mode selects how the XDP program is attached.
type Mode int

// Attachment modes.
const (
	// ModeAuto uses native XDP where the driver has it, generic otherwise.
	ModeAuto Mode = iota
	// ModeNative requires driver (native) XDP.
	ModeNative
	// ModeGeneric forces generic (SKB) XDP, which works on any interface
	// but runs after the kernel has built an skb.
	ModeGeneric
)

// String returns the mode's name.
func (m Mode) String() string {
	switch m {
	case ModeAuto:
		return "auto"
	case ModeNative:
		return "native"
	case ModeGeneric:
		return "generic"
	}
	return fmt.Sprintf("Mode(%d)", int(m))
}

// Setting is an on/off option whose default depends on the interface.
type Setting int

// Setting values.
const (
	Auto Setting = iota
	On
	Off
)

// Defaults.
const (
	DefaultRingSize = 2048
	// DefaultRxRingSize is the default fill and rx ring size, and with
	// DefaultFrames the number of receive frames: how many frames the
	// kernel can queue while the PMD is off its CPU or busy in a send.
	// At 1 Mpps 8,192 frames are 8 ms; with 2,048 a PMD held up for 2 ms
	// (a time slice lost to another task on its CPU) already found the
	// fill ring empty and the kernel dropped (rx_fill_ring_empty_descs).
	DefaultRxRingSize = 8192
	// DefaultFrames is twice DefaultRxRingSize: half the UMEM for
	// receive, the other half capped by the completion ring (2,048
	// transmit frames), 20 MiB per queue with 2 KiB frames.
	DefaultFrames    = 2 * DefaultRxRingSize
	DefaultFrameSize = 2048
	// DefaultBusyWait bounds the wait for a queue that a closed socket
	// still holds (see xsk.bind): the kernel usually takes tens of
	// milliseconds, but its deferred release needs RTNL, and on a host
	// busy creating and deleting namespaces that took more than 2 s; a
	// queue held by a live process is still reported within seconds.
	DefaultBusyWait = 5 * time.Second
)

// Options configure a Port. Zero values select defaults.
type Options struct {
	// Queues is the number of queues served (queue ids 0..Queues-1), each
	// with one socket that is both rx and tx queue. Default: the
	// interface's combined (or rx) channel count, or 1.
	Queues int
	// Mode selects native or generic XDP (default ModeAuto).
	Mode Mode
	// ZeroCopy asks for zero-copy sockets, falling back to copy mode where
	// the driver cannot (veth never can).
	ZeroCopy bool
	// Ring sizes in entries, powers of two (default DefaultRxRingSize
	// for fill and rx, DefaultRingSize for completion and tx).
	FillSize, CompSize, RxSize, TxSize int
	// Frames is the number of UMEM frames per queue (default
	// DefaultFrames): half for receive, half for transmit, the receive
	// half capped at FillSize so that the fill ring always has room.
	Frames int
	// FrameSize is the UMEM frame size, 2048 or 4096 (default
	// DefaultFrameSize). The kernel keeps 256 bytes of XDP headroom in
	// each, so the largest frame is FrameSize-256.
	FrameSize int
	// FixChecksums completes partial TCP/UDP checksums on receive
	// (see the package comment). Auto means On for veth, Off otherwise.
	FixChecksums Setting
	// BusyWait bounds how long a queue bind refused with EBUSY is retried
	// (default DefaultBusyWait; negative: not at all). The kernel frees a
	// closed socket's queue asynchronously, so reopening a port right
	// after Close, or after its previous owner was killed, meets EBUSY
	// for a while.
	BusyWait time.Duration
	// Log, if set, receives a line for each queue that had to wait.
	Log *slog.Logger
	// BusyPoll, if positive, makes each socket busy-poll the device's
	// NAPI from Recv (SO_PREFER_BUSY_POLL, SO_BUSY_POLL of this many
	// microseconds; see busypoll.go). For busy-polling PMDs only.
	BusyPoll time.Duration
	// BusyPollBudget is SO_BUSY_POLL_BUDGET (default: a PMD batch).
	BusyPollBudget int
	// Filter, if set, redirects only the frames it matches to the
	// sockets and passes everything else to the kernel (an underlay for a
	// tunnel port whose address stays on the interface).
	Filter *UDPFilter
}

// Port is an AF_XDP port. Use New.
type Port struct {
	name     string
	ifindex  int
	lnk      *linkwatch.Link
	prog     *xdp
	xsks     []*xsk
	counters []netdev.Counters // rx queues, then tx queues
	fixCsum  bool
	maxFrame int  // largest frame a UMEM frame holds
	mode     Mode // ModeNative or ModeGeneric
	zeroCopy bool
	bindWait time.Duration // longest wait for a busy queue in New
	gsoTx    []*gsoTx      // per tx queue, in copy mode (gso.go); nil: no GSO

	gone     atomic.Bool // the interface was deleted
	stopWait chan struct{}

	mu     sync.Mutex // serialises Stats' getsockopt against Close
	closed bool
	kstats []unix.XDPStatistics // last kernel counters per queue (kept after Close)
	// busyPoll is Options.BusyPoll > 0; napiOld the device settings it
	// replaced.
	busyPoll bool
	napiOld  []string
	closeWG  sync.WaitGroup
}

func pow2(n int) bool { return n > 0 && n&(n-1) == 0 }

// New opens ifname: loads and attaches the XDP program and binds one socket
// per queue.
func New(ifname string, opts Options) (*Port, error) {
	if opts.Queues <= 0 {
		opts.Queues = rxQueueCount(ifname)
	}
	if opts.FillSize == 0 {
		opts.FillSize = DefaultRxRingSize
	}
	if opts.RxSize == 0 {
		opts.RxSize = DefaultRxRingSize
	}
	for _, s := range []*int{&opts.FillSize, &opts.CompSize, &opts.RxSize, &opts.TxSize} {
		if *s == 0 {
			*s = DefaultRingSize
		}
		if !pow2(*s) {
			return nil, fmt.Errorf("afxdp: %s: ring size %d is not a power of two", ifname, *s)
		}
	}
	if opts.Frames <= 0 {
		opts.Frames = DefaultFrames
	}
	if opts.BusyWait == 0 {
		opts.BusyWait = DefaultBusyWait
	}
	if opts.FrameSize == 0 {
		opts.FrameSize = DefaultFrameSize
	}
	if opts.FrameSize != 2048 && opts.FrameSize != 4096 {
		return nil, fmt.Errorf("afxdp: %s: frame size %d is not 2048 or 4096", ifname, opts.FrameSize)
	}
	if opts.Frames < 2 {
		return nil, fmt.Errorf("afxdp: %s: %d UMEM frames are too few", ifname, opts.Frames)
	}
	lay := layout{frameSize: uint64(opts.FrameSize)}
	lay.rxFrames = uint64(min(opts.Frames/2, opts.FillSize))
	// Every tx frame may sit on the completion ring at once.
	lay.txFrames = uint64(min(opts.Frames-opts.Frames/2, opts.CompSize))
	sizes := ringSizes{fill: uint32(opts.FillSize), comp: uint32(opts.CompSize), rx: uint32(opts.RxSize), tx: uint32(opts.TxSize)}

	lw, err := linkwatch.Watch(ifname)
	if err != nil {
		return nil, fmt.Errorf("afxdp: %w", err)
	}
	p := &Port{
		name:     ifname,
		ifindex:  lw.Index,
		lnk:      lw,
		counters: make([]netdev.Counters, 2*opts.Queues),
		maxFrame: opts.FrameSize - unix.XDP_PACKET_HEADROOM,
		stopWait: make(chan struct{}),
		kstats:   make([]unix.XDPStatistics, opts.Queues),
	}
	switch opts.FixChecksums {
	case On:
		p.fixCsum = true
	case Auto:
		p.fixCsum = driverName(ifname) == "veth"
	}
	fail := func(err error) (*Port, error) {
		p.release()
		return nil, fmt.Errorf("afxdp: %s: %w", ifname, err)
	}
	if p.prog, err = loadXDP(opts.Queues, opts.Filter); err != nil {
		return fail(err)
	}
	// Attach first: the bind below needs to know whether the program runs
	// in the driver (where zero-copy may work) or generically.
	if err := p.prog.attach(p.ifindex, opts.Mode); err != nil {
		return fail(err)
	}
	p.mode = p.prog.mode
	for q := 0; q < opts.Queues; q++ {
		var x *xsk
		var err error
		if opts.ZeroCopy && p.prog.mode == ModeNative {
			x, err = openXSK(p.ifindex, q, lay, sizes, unix.XDP_ZEROCOPY, opts.BusyWait)
		}
		if x == nil && !errors.Is(err, unix.EBUSY) {
			x, err = openXSK(p.ifindex, q, lay, sizes, unix.XDP_COPY, opts.BusyWait)
		}
		if err != nil {
			return fail(err)
		}
		if x.bindBusy > 0 {
			p.bindWait = max(p.bindWait, x.bindWait)
			if opts.Log != nil {
				opts.Log.Info("AF_XDP queue was still held by a closed socket; bound after retrying",
					"port", ifname, "queue", q, "busy", x.bindBusy, "waited", x.bindWait.Round(time.Millisecond))
			}
		}
		p.zeroCopy = x.zeroCopy // the same for every queue of a device
		x.r.c = &p.counters[q]
		x.t.c = &p.counters[opts.Queues+q]
		p.xsks = append(p.xsks, x)
		if err := p.prog.setSocket(q, x.fd); err != nil {
			return fail(fmt.Errorf("XSKMAP[%d]: %w", q, err))
		}
		if opts.BusyPoll > 0 {
			if err := setBusyPoll(x.fd, opts.BusyPoll, cmp.Or(opts.BusyPollBudget, defaultBusyPollBudget)); err != nil {
				return fail(err)
			}
		}
	}
	if opts.BusyPoll > 0 {
		if p.napiOld, err = setNAPIDefer(ifname); err != nil {
			return fail(err)
		}
		p.busyPoll = true
	}
	if !p.zeroCopy {
		gs := make([]*gsoTx, 0, opts.Queues)
		for range opts.Queues {
			g, err := openGSOTx(p.ifindex)
			if err != nil {
				// Without it the datapath segments GSO frames for the
				// port, as before.
				if opts.Log != nil {
					opts.Log.Warn("AF_XDP port sends no GSO frames", "port", ifname, "err", err)
				}
				for _, g := range gs {
					unix.Close(g.fd)
				}
				gs = nil
				break
			}
			gs = append(gs, g)
		}
		p.gsoTx = gs
	}
	portOpened(lay, sizes)
	p.closeWG.Add(1)
	go p.watchRemoval()
	return p, nil
}

// watchRemoval turns the interface's removal into a flag Recv and Send
// check with one atomic load.
func (p *Port) watchRemoval() {
	defer p.closeWG.Done()
	select {
	case <-p.lnk.Removed():
		p.gone.Store(true)
	case <-p.stopWait:
	}
}

// release frees whatever New or the port holds. Called with p.mu held or
// before p is shared.
func (p *Port) release() error {
	var errs []error
	// Detach before closing the sockets, so that no frame is redirected to
	// a socket on its way out.
	if p.prog != nil {
		errs = append(errs, p.prog.close())
		p.prog = nil
	}
	for i, x := range p.xsks {
		if s, err := x.stats(); err == nil {
			p.kstats[i] = s
		}
		bgclose.Run(func() { x.close() })
	}
	p.xsks = nil
	for _, g := range p.gsoTx {
		bgclose.Run(func() { unix.Close(g.fd) })
	}
	p.gsoTx = nil
	if p.napiOld != nil {
		restoreNAPIDefer(p.name, p.napiOld)
		p.napiOld = nil
	}
	if p.lnk != nil {
		p.lnk.Stop()
	}
	return errors.Join(errs...)
}

// WaitClosed waits until the sockets of every port closed so far are
// closed and their memory unmapped (Close leaves that to bgclose).
func WaitClosed() { bgclose.Wait() }

// Close implements netdev.Netdev: it takes the sockets out of the shared
// XSKMAP and detaches the XDP program, then closes the sockets and unmaps
// their rings and UMEMs in the background (package bgclose; WaitClosed
// waits for that).
func (p *Port) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return errors.New("afxdp: " + p.name + ": already closed")
	}
	p.closed = true
	close(p.stopWait)
	p.closeWG.Wait()
	portClosed()
	return p.release()
}

// Name implements netdev.Netdev.
func (p *Port) Name() string { return p.name }

// NumRxQueues implements netdev.Netdev.
func (p *Port) NumRxQueues() int { return len(p.kstats) }

// NumTxQueues implements netdev.Netdev.
func (p *Port) NumTxQueues() int { return len(p.kstats) }

// MTU implements netdev.Netdev: the interface's MTU, capped by what a UMEM
// frame holds (less an Ethernet header and a VLAN tag).
func (p *Port) MTU() int { return min(p.lnk.MTU(), p.maxFrame-18) }

// LinkUp implements netdev.Netdev.
func (p *Port) LinkUp() bool { return p.lnk.Up() }

// Removed implements netdev.Remover.
func (p *Port) Removed() <-chan struct{} { return p.lnk.Removed() }

// RxFD implements netdev.Waiter: an XDP socket polls readable when its rx
// ring has frames.
func (p *Port) RxFD(q int) int { return p.xsks[q].fd }

// AttachMode returns the XDP mode in use (ModeNative or ModeGeneric).
func (p *Port) AttachMode() Mode { return p.mode }

// BusyWaited returns the longest time New waited for a queue still held
// by a closed socket (zero if no queue was busy).
func (p *Port) BusyWaited() time.Duration { return p.bindWait }

// ZeroCopy reports whether the sockets are in zero-copy mode.
func (p *Port) ZeroCopy() bool { return p.zeroCopy }

// FixesChecksums reports whether Recv completes L4 checksums.
func (p *Port) FixesChecksums() bool { return p.fixCsum }

// KernelStats returns the XDP_STATISTICS counters summed over the queues
// (the last values read if the port is closed).
func (p *Port) KernelStats() unix.XDPStatistics {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.kernelStatsLocked()
}

func (p *Port) kernelStatsLocked() unix.XDPStatistics {
	if !p.closed {
		for i, x := range p.xsks {
			if s, err := x.stats(); err == nil {
				p.kstats[i] = s
			}
		}
	}
	var t unix.XDPStatistics
	for _, s := range p.kstats {
		t.Rx_dropped += s.Rx_dropped
		t.Rx_invalid_descs += s.Rx_invalid_descs
		t.Tx_invalid_descs += s.Tx_invalid_descs
		t.Rx_ring_full += s.Rx_ring_full
		t.Rx_fill_ring_empty_descs += s.Rx_fill_ring_empty_descs
		t.Tx_ring_empty_descs += s.Tx_ring_empty_descs
	}
	return t
}

// Stats implements netdev.Netdev. Besides the driver's own counters it
// folds in the kernel's: frames the kernel dropped for want of a fill
// buffer or because they did not fit a frame (rx_dropped) or because the
// rx ring was full (rx_ring_full) are RxDrops; invalid fill and tx
// descriptors are RxErrors and TxErrors. The *_empty_descs counters count
// events, not frames (a frame lost to an empty fill ring is already in
// rx_dropped), so they are only in KernelStats.
func (p *Port) Stats() netdev.Stats {
	var s netdev.Stats
	for i := range p.counters {
		p.counters[i].AddTo(&s)
	}
	p.mu.Lock()
	k := p.kernelStatsLocked()
	p.mu.Unlock()
	s.RxDrops += k.Rx_dropped + k.Rx_ring_full
	s.RxErrors += k.Rx_invalid_descs
	s.TxErrors += k.Tx_invalid_descs
	return s
}

// Recv implements netdev.Netdev: it copies up to a batch of frames from
// the rx ring into pool buffers and gives their UMEM frames straight back
// to the fill ring.
func (p *Port) Recv(q int, pool *packet.Pool, b *packet.Batch) int {
	x := p.xsks[q]
	r := &x.r
	if p.gone.Load() {
		return 0
	}
	if len(r.recycle) > 0 {
		recycle(r)
	}
	n := r.rx.avail(uint32(packet.BatchSize - b.N))
	if n == 0 && p.busyPoll {
		// The kernel runs the device's NAPI in this call (busypoll.go).
		if e := kickRx(x.fd); !transient(e) {
			r.c.RxErrors.Add(1)
		}
		n = r.rx.avail(uint32(packet.BatchSize - b.N))
	}
	if n == 0 {
		// In zero-copy mode the driver may stop when the fill ring ran
		// dry and wait for a syscall; in copy mode the flag stays clear.
		if r.fill.needWakeup() {
			if e := kickRx(x.fd); !transient(e) {
				r.c.RxErrors.Add(1)
			}
		}
		return 0
	}
	room := r.fill.free(n)
	var got, filled uint32
	var bytes, drops, errs uint64
	umem := x.umem
	for i := uint32(0); i < n; i++ {
		d := r.rx.descs[(r.rx.cachedCons+i)&r.rx.mask]
		off, l, base, res := x.lay.rxDesc(d)
		if res != descBadAddr {
			if filled < room {
				r.fill.addrs[(r.fill.cachedProd+filled)&r.fill.mask] = base
				filled++
			} else if len(r.recycle) < cap(r.recycle) {
				r.recycle = append(r.recycle, base)
			}
		}
		if res != descOK {
			errs++
			continue
		}
		pkt := pool.Get()
		if pkt == nil {
			drops++
			continue
		}
		if l > len(pkt.Buffer()) {
			pool.Put(pkt)
			errs++
			continue
		}
		pkt.SetData(umem[off : off+l])
		if p.fixCsum {
			vnethdr.CompletePartialL4Checksum(pkt.Data())
		}
		b.Add(pkt)
		got++
		bytes += uint64(l)
	}
	r.fill.submit(filled)
	r.rx.release(n)
	if got > 0 {
		r.c.RxPackets.Add(uint64(got))
		r.c.RxBytes.Add(bytes)
	}
	if drops > 0 {
		r.c.RxDrops.Add(drops)
	}
	if errs > 0 {
		r.c.RxErrors.Add(errs)
	}
	return int(got)
}

// recycle moves frames parked in r.recycle to the fill ring.
func recycle(r *rxSide) {
	n := r.fill.free(uint32(len(r.recycle)))
	for i := uint32(0); i < n; i++ {
		r.fill.addrs[(r.fill.cachedProd+i)&r.fill.mask] = r.recycle[len(r.recycle)-1-int(i)]
	}
	r.recycle = r.recycle[:len(r.recycle)-int(n)]
	r.fill.submit(n)
}

// reclaim moves completed tx frames back to the free list.
func reclaim(t *txSide, lay *layout) {
	n := t.comp.avail(uint32(cap(t.free) - len(t.free)))
	if n == 0 {
		return
	}
	var bad uint64
	for i := uint32(0); i < n; i++ {
		a := t.comp.addrs[(t.comp.cachedCons+i)&t.comp.mask]
		if lay.txAddr(a) && len(t.free) < cap(t.free) {
			t.free = append(t.free, a)
		} else {
			bad++
		}
	}
	t.comp.release(n)
	if bad > 0 {
		t.c.TxErrors.Add(bad)
	}
}

// Send implements netdev.Netdev: it copies the batch into free tx frames,
// publishes their descriptors and kicks the kernel once if it asks to be
// kicked (always, in copy mode); a GSO frame (copy mode only) goes whole
// through the queue's packet socket after a kick for the frames before it
// (gso.go). Packets that find no free frame or ring slot are TxDrops;
// packets too large for a frame, and GSO frames the kernel refused, are
// TxErrors.
func (p *Port) Send(q int, b *packet.Batch) int {
	x := p.xsks[q]
	t := &x.t
	if p.gone.Load() {
		t.c.TxErrors.Add(uint64(b.N))
		return 0
	}
	reclaim(t, &x.lay)
	pkts := b.Packets()
	var sent uint32
	var bytes, tooBig, gsoErrs uint64
	for len(pkts) > 0 {
		i := len(pkts)
		if p.gsoTx != nil {
			for i = 0; i < len(pkts) && !pkts[i].GSO(); i++ {
			}
		}
		s, by, tb := p.sendRing(x, nil, pkts[:i])
		sent += s
		bytes += by
		tooBig += tb
		if i < len(pkts) {
			t.c.TxKicks.Add(1)
			if e := p.gsoTx[q].send(pkts[i]); e == 0 {
				sent++
				bytes += uint64(pkts[i].Len())
			} else {
				gsoErrs++
			}
			i++
		}
		pkts = pkts[i:]
	}
	if sent > 0 {
		t.c.TxPackets.Add(uint64(sent))
		t.c.TxBytes.Add(bytes)
	}
	if tooBig+gsoErrs > 0 {
		t.c.TxErrors.Add(tooBig + gsoErrs)
	}
	if d := uint64(b.N) - uint64(sent) - tooBig - gsoErrs; d > 0 {
		t.c.TxDrops.Add(d)
	}
	return int(sent)
}

// sendRing copies pkts into free tx frames, each behind hdrs[i] when
// hdrs is not nil (SendPrefixed), publishes their descriptors and kicks
// the kernel if it asks to be kicked. It returns the packets queued, their
// bytes and the packets too large for a frame.
func (p *Port) sendRing(x *xsk, hdrs [][]byte, pkts []*packet.Packet) (sent uint32, bytes, tooBig uint64) {
	t := &x.t
	slots := t.tx.free(uint32(len(pkts)))
	umem := x.umem
	fs := int(x.lay.frameSize)
	for i, pkt := range pkts {
		if sent == slots || len(t.free) == 0 {
			break
		}
		var h []byte
		if hdrs != nil {
			h = hdrs[i]
		}
		l := len(h) + pkt.Len()
		if l > p.maxFrame {
			tooBig++
			continue
		}
		a := t.free[len(t.free)-1]
		t.free = t.free[:len(t.free)-1]
		f := umem[a : int(a)+fs]
		copy(f[copy(f, h):], pkt.Data())
		t.tx.descs[(t.tx.cachedProd+sent)&t.tx.mask] = unix.XDPDesc{Addr: a, Len: uint32(l)}
		sent++
		bytes += uint64(l)
	}
	if sent > 0 {
		t.tx.submit(sent)
	}
	// Kick also when nothing new was queued but an earlier kick left
	// descriptors behind, so that they do not wait for more traffic.
	if t.tx.needWakeup() && (sent > 0 || t.tx.pending() > 0) {
		kick(x, sent)
	}
	return sent, bytes, tooBig
}

// kick makes the kernel transmit x's tx ring. In copy mode a frame the
// device refuses (NET_XMIT_DROP: a veth whose peer's MTU is smaller than
// the frame, a carrier gone) ends the kernel's pass with EBUSY: it has
// consumed and completed that descriptor, but leaves the ones behind it
// for the next kick, which may not come before the next batch, or ever.
// So each EBUSY counts one refused frame, and the ring is kicked again
// while descriptors wait: at most once per frame queued in this call
// (each such kick follows a frame gone), so a device that refuses
// everything costs a syscall per frame and no loop.
func kick(x *xsk, queued uint32) {
	t := &x.t
	for kicks := uint32(0); ; kicks++ {
		t.c.TxKicks.Add(1)
		e := kickTx(x.fd)
		if e == unix.EBUSY && !x.zeroCopy {
			t.c.TxDrops.Add(1)
			t.c.TxRefused.Add(1)
			if kicks < queued && t.tx.pending() > 0 {
				continue
			}
			return
		}
		if !transient(e) {
			t.c.TxErrors.Add(1)
		}
		return
	}
}

// TxKicks implements netdev.TxKicker: the sendto calls that asked the
// kernel to transmit tx queue q.
func (p *Port) TxKicks(q int) uint64 { return p.xsks[q].t.c.TxKicks.Load() }

var (
	_ netdev.Netdev    = (*Port)(nil)
	_ netdev.Waiter    = (*Port)(nil)
	_ netdev.Remover   = (*Port)(nil)
	_ netdev.TxKicker  = (*Port)(nil)
	_ netdev.GSOSender = (*Port)(nil)
)

// Package afpacket is the portable kernel port driver: AF_PACKET sockets
// with memory-mapped rings, for any Linux interface (veth, physical NICs,
// anything with an Ethernet header).
//
// Per queue pair there are two sockets, so that each direction uses the
// ring format that suits it:
//
//   - Receive: a TPACKET_V3 ring (variable-sized frames packed into blocks,
//     which the kernel retires when full or after RetireTimeout, 1 ms by
//     default, so a lone packet is not held) with PACKET_VNET_HDR, so that
//     GSO super-frames (up to 64 KiB) and CHECKSUM_PARTIAL frames arrive
//     with a virtio_net_hdr; vnethdr segments and completes them. A V3
//     block holds frames of any size up to the block size, so one ring
//     serves both 64-byte floods and 64 KiB super-frames; a V2 ring would
//     need every slot to be 64 KiB. Linux 6.18 fills the vnet header in V3
//     rings (tpacket_rcv writes it for every version; the e2e TCP test
//     depends on it). PACKET_IGNORE_OUTGOING keeps frames the host sends
//     out of the interface away from the switch. The socket is bound with
//     ETH_P_ALL and puts the interface in promiscuous mode
//     (PACKET_MR_PROMISC). With Queues > 1 the receive sockets form a
//     PACKET_FANOUT group of type FANOUT_HASH, so the kernel spreads flows
//     over them; FANOUT_FLAG_DEFRAG is not set, because it would hand the
//     switch reassembled datagrams larger than the MTU, and the fanout
//     hash of IP fragments covers the addresses only, so the fragments of
//     one datagram share a queue anyway.
//   - Transmit: a TPACKET_V2 ring of fixed slots (simplest, and all
//     transmitted frames are at most MTU-sized) on a socket bound with
//     protocol 0 (it receives nothing), with PACKET_QDISC_BYPASS,
//     PACKET_LOSS (a malformed slot is skipped instead of stalling the
//     ring) and PACKET_VNET_HDR: each slot carries a virtio_net_hdr with
//     no offload and hdr_len covering the frame, which makes the kernel
//     copy the frame instead of lending the ring's pages to the skb (see
//     txQueue.send). A batch ends with one sendto(MSG_DONTWAIT).
//
// Neither Recv nor Send makes more than one system call per batch (Recv
// none). VLAN tags the kernel moved into tp_vlan_tci are put back into the
// frame, so tagged frames stay tagged through the switch.
package afpacket

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"vswitch/datapath/packet"
	"vswitch/netdev"
	"vswitch/netdev/linkwatch"
)

// Options configure a Port. Zero values select the defaults.
type Options struct {
	// Queues is the number of rx/tx queue pairs (default 1).
	Queues int
	// RxBlockSize is the size of a receive ring block in bytes, a
	// multiple of the page size (default 256 KiB). It bounds the largest
	// frame the kernel can deliver whole, so it must exceed 64 KiB plus
	// headers for GSO super-frames to arrive untruncated.
	RxBlockSize int
	// RxBlocks is the number of receive ring blocks (default 32, so 8 MiB
	// of ring per queue: about 58,000 minimum-size frames or 120
	// super-frames of backlog).
	RxBlocks int
	// RetireTimeout is how long, in milliseconds, the kernel keeps a
	// partly filled receive block before handing it over (default 1, the
	// smallest the kernel takes).
	RetireTimeout int
	// TxFrameSize is the size of a transmit ring slot, a power of two of
	// at least 2048 bytes (default 2048: room for a 1518-byte frame).
	TxFrameSize int
	// TxFrames is the number of transmit ring slots (default 1024).
	TxFrames int
}

// Defaults.
const (
	DefaultRxBlockSize   = 256 << 10
	DefaultRxBlocks      = 32
	DefaultRetireTimeout = 1
	DefaultTxFrameSize   = 2048
	DefaultTxFrames      = 1024
)

// txBlockSize is the tx ring's block size: the kernel wants blocks of whole
// pages holding whole slots.
const txBlockSize = 64 << 10

func (o Options) withDefaults() (Options, error) {
	if o.Queues <= 0 {
		o.Queues = 1
	}
	if o.RxBlockSize <= 0 {
		o.RxBlockSize = DefaultRxBlockSize
	}
	if o.RxBlocks <= 0 {
		o.RxBlocks = DefaultRxBlocks
	}
	if o.RetireTimeout <= 0 {
		o.RetireTimeout = DefaultRetireTimeout
	}
	if o.TxFrameSize <= 0 {
		o.TxFrameSize = DefaultTxFrameSize
	}
	if o.TxFrames <= 0 {
		o.TxFrames = DefaultTxFrames
	}
	page := os.Getpagesize()
	switch {
	case o.Queues > 64:
		return o, fmt.Errorf("afpacket: %d queues (at most 64)", o.Queues)
	case o.RxBlockSize%page != 0:
		return o, fmt.Errorf("afpacket: rx block size %d is not a multiple of the page size %d", o.RxBlockSize, page)
	case o.TxFrameSize < 2048 || o.TxFrameSize > txBlockSize || o.TxFrameSize&(o.TxFrameSize-1) != 0:
		return o, fmt.Errorf("afpacket: tx frame size %d is not a power of two in 2048..%d", o.TxFrameSize, txBlockSize)
	}
	perBlock := txBlockSize / o.TxFrameSize
	o.TxFrames = (o.TxFrames + perBlock - 1) / perBlock * perBlock
	return o, nil
}

// Port is an AF_PACKET port. Use New.
type Port struct {
	name     string
	link     *linkwatch.Link
	rx       []*rxQueue
	tx       []*txQueue
	counters []netdev.Counters // one per rx queue, then one per tx queue

	statsMu     sync.Mutex // serialises PACKET_STATISTICS reads and Close
	kernelDrops uint64     // frames the kernel dropped for want of ring space
	freezes     uint64     // times a receive ring was full (tp_freeze_q_cnt)
	closed      atomic.Bool
}

// New opens a port on interface ifname.
func New(ifname string, opts Options) (*Port, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	link, err := linkwatch.Watch(ifname)
	if err != nil {
		return nil, fmt.Errorf("afpacket: %w", err)
	}
	p := &Port{
		name:     ifname,
		link:     link,
		counters: make([]netdev.Counters, 2*opts.Queues),
	}
	if err := p.open(opts); err != nil {
		p.release()
		return nil, fmt.Errorf("afpacket: %s: %w", ifname, err)
	}
	return p, nil
}

func (p *Port) open(opts Options) error {
	fanoutID := -1
	for i := 0; i < opts.Queues; i++ {
		q, err := openRx(p.link.Index, opts, &p.counters[i])
		if q != nil {
			p.rx = append(p.rx, q)
		}
		if err != nil {
			return err
		}
		if i == 0 {
			// The membership lasts as long as the socket.
			mreq := unix.PacketMreq{Ifindex: int32(p.link.Index), Type: unix.PACKET_MR_PROMISC}
			if err := unix.SetsockoptPacketMreq(q.fd, unix.SOL_PACKET, unix.PACKET_ADD_MEMBERSHIP, &mreq); err != nil {
				return fmt.Errorf("PACKET_ADD_MEMBERSHIP promisc: %w", err)
			}
		}
		if opts.Queues > 1 {
			if fanoutID, err = joinFanout(q.fd, fanoutID); err != nil {
				return err
			}
		}
	}
	for i := 0; i < opts.Queues; i++ {
		q, err := openTx(p.link, opts, &p.counters[opts.Queues+i])
		if q != nil {
			p.tx = append(p.tx, q)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// openRx creates a receive socket with its ring. On error it returns what
// it has built so far, for the caller to release.
func openRx(ifindex int, opts Options, c *netdev.Counters) (*rxQueue, error) {
	// Protocol 0: nothing arrives before the ring exists and the socket
	// is bound.
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socket: %w", err)
	}
	q := &rxQueue{fd: fd, blockSize: opts.RxBlockSize, blockNr: opts.RxBlocks, vnet: true, c: c}
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_VERSION, unix.TPACKET_V3); err != nil {
		return q, fmt.Errorf("PACKET_VERSION V3: %w", err)
	}
	// Before the ring: the kernel refuses it (EBUSY) once a ring exists.
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_VNET_HDR, 1); err != nil {
		return q, fmt.Errorf("PACKET_VNET_HDR: %w", err)
	}
	// frame_size means nothing to a V3 ring beyond the kernel's
	// consistency checks (frames are packed), so any divisor works.
	const frameSize = 2048
	req := unix.TpacketReq3{
		Block_size:     uint32(opts.RxBlockSize),
		Block_nr:       uint32(opts.RxBlocks),
		Frame_size:     frameSize,
		Frame_nr:       uint32(opts.RxBlockSize / frameSize * opts.RxBlocks),
		Retire_blk_tov: uint32(opts.RetireTimeout),
	}
	if err := unix.SetsockoptTpacketReq3(fd, unix.SOL_PACKET, unix.PACKET_RX_RING, &req); err != nil {
		return q, fmt.Errorf("PACKET_RX_RING: %w", err)
	}
	ring, err := unix.Mmap(fd, 0, opts.RxBlockSize*opts.RxBlocks, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return q, fmt.Errorf("mmap rx ring: %w", err)
	}
	q.ring = ring
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1); err != nil {
		return q, fmt.Errorf("PACKET_IGNORE_OUTGOING: %w", err)
	}
	sa := unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifindex}
	if err := unix.Bind(fd, &sa); err != nil {
		return q, fmt.Errorf("bind: %w", err)
	}
	return q, nil
}

// joinFanout adds fd to the hash fanout group id, or, with id -1, creates a
// group with an id the kernel picks (unique in the network namespace, so
// ports do not collide) and returns it.
func joinFanout(fd, id int) (int, error) {
	if id < 0 {
		arg := unix.PACKET_FANOUT_HASH<<16 | unix.PACKET_FANOUT_FLAG_UNIQUEID<<16
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_FANOUT, arg); err != nil {
			return -1, fmt.Errorf("PACKET_FANOUT: %w", err)
		}
		v, err := unix.GetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_FANOUT)
		if err != nil {
			return -1, fmt.Errorf("PACKET_FANOUT id: %w", err)
		}
		return v & 0xffff, nil
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_FANOUT, unix.PACKET_FANOUT_HASH<<16|id); err != nil {
		return -1, fmt.Errorf("PACKET_FANOUT join %d: %w", id, err)
	}
	return id, nil
}

// openTx creates a transmit socket with its ring.
func openTx(link *linkwatch.Link, opts Options, c *netdev.Counters) (*txQueue, error) {
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("socket: %w", err)
	}
	q := &txQueue{fd: fd, frameSize: opts.TxFrameSize, frameNr: opts.TxFrames, link: link, c: c}
	for _, o := range []struct {
		name     string
		opt, val int
	}{
		{"PACKET_VERSION V2", unix.PACKET_VERSION, unix.TPACKET_V2},
		{"PACKET_VNET_HDR", unix.PACKET_VNET_HDR, 1},
		{"PACKET_LOSS", unix.PACKET_LOSS, 1},
		{"PACKET_QDISC_BYPASS", unix.PACKET_QDISC_BYPASS, 1},
	} {
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, o.opt, o.val); err != nil {
			return q, fmt.Errorf("%s: %w", o.name, err)
		}
	}
	// Every frame in flight is charged to the send buffer until the
	// receiver's stack orphans it; the default (208 KiB) would make kicks
	// fail with EAGAIN long before the ring is full. Best effort: without
	// CAP_NET_ADMIN the default stays.
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, opts.TxFrames*opts.TxFrameSize*2)
	req := unix.TpacketReq{
		Block_size: txBlockSize,
		Block_nr:   uint32(opts.TxFrames / (txBlockSize / opts.TxFrameSize)),
		Frame_size: uint32(opts.TxFrameSize),
		Frame_nr:   uint32(opts.TxFrames),
	}
	if err := unix.SetsockoptTpacketReq(fd, unix.SOL_PACKET, unix.PACKET_TX_RING, &req); err != nil {
		return q, fmt.Errorf("PACKET_TX_RING: %w", err)
	}
	ring, err := unix.Mmap(fd, 0, opts.TxFrames*opts.TxFrameSize, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return q, fmt.Errorf("mmap tx ring: %w", err)
	}
	q.ring = ring
	// Protocol 0: the socket only sends.
	sa := unix.SockaddrLinklayer{Ifindex: link.Index}
	if err := unix.Bind(fd, &sa); err != nil {
		return q, fmt.Errorf("bind: %w", err)
	}
	return q, nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// Name implements netdev.Netdev.
func (p *Port) Name() string { return p.name }

// NumRxQueues implements netdev.Netdev.
func (p *Port) NumRxQueues() int { return len(p.rx) }

// NumTxQueues implements netdev.Netdev.
func (p *Port) NumTxQueues() int { return len(p.tx) }

// MTU implements netdev.Netdev.
func (p *Port) MTU() int { return p.link.MTU() }

// LinkUp implements netdev.Netdev.
func (p *Port) LinkUp() bool { return p.link.Up() }

// Removed implements netdev.Remover.
func (p *Port) Removed() <-chan struct{} { return p.link.Removed() }

// RxFD implements netdev.Waiter.
func (p *Port) RxFD(q int) int {
	if q < 0 || q >= len(p.rx) {
		return -1
	}
	return p.rx[q].fd
}

// Recv implements netdev.Netdev. It makes no system call, except that
// while the link is down and the ring empty it clears the socket's pending
// error: the kernel sets ENETDOWN when the interface goes down, which
// keeps the fd readable in poll and would make an idle PMD spin.
func (p *Port) Recv(q int, pool *packet.Pool, b *packet.Batch) int {
	rq := p.rx[q]
	n := rq.recv(pool, b)
	if n == 0 && !p.link.Up() {
		_, _ = unix.GetsockoptInt(rq.fd, unix.SOL_SOCKET, unix.SO_ERROR)
	}
	return n
}

// Send implements netdev.Netdev.
func (p *Port) Send(q int, b *packet.Batch) int {
	return p.tx[q].send(b)
}

// Stats implements netdev.Netdev. RxDrops includes the frames the kernel
// dropped because a receive ring was full (PACKET_STATISTICS tp_drops,
// which the kernel resets on every read, so the port accumulates them).
func (p *Port) Stats() netdev.Stats {
	var s netdev.Stats
	for i := range p.counters {
		p.counters[i].AddTo(&s)
	}
	p.statsMu.Lock()
	p.readKernelStats()
	s.RxDrops += p.kernelDrops
	p.statsMu.Unlock()
	return s
}

// RingFreezes returns how many times a receive ring was found full by the
// kernel (tp_freeze_q_cnt). It counts episodes, not frames, which is why
// it is not part of RxDrops.
func (p *Port) RingFreezes() uint64 {
	p.statsMu.Lock()
	defer p.statsMu.Unlock()
	p.readKernelStats()
	return p.freezes
}

// readKernelStats folds the kernel's counters into the port's. Called with
// statsMu held.
func (p *Port) readKernelStats() {
	if p.closed.Load() {
		return
	}
	for _, q := range p.rx {
		st, err := unix.GetsockoptTpacketStatsV3(q.fd, unix.SOL_PACKET, unix.PACKET_STATISTICS)
		if err != nil {
			continue
		}
		p.kernelDrops += uint64(st.Drops)
		p.freezes += uint64(st.Freeze_q_cnt)
	}
}

// Close implements netdev.Netdev: it unmaps the rings, closes the sockets
// (which ends the promiscuous membership) and stops watching the link.
func (p *Port) Close() error {
	p.statsMu.Lock()
	defer p.statsMu.Unlock()
	if p.closed.Load() {
		return errors.New("afpacket: port already closed")
	}
	p.readKernelStats() // keep the last drops for Stats after Close
	p.closed.Store(true)
	return p.release()
}

// release frees whatever New built.
func (p *Port) release() error {
	var errs []error
	for _, q := range p.rx {
		if q.ring != nil {
			errs = append(errs, unix.Munmap(q.ring))
			q.ring = nil
		}
		errs = append(errs, unix.Close(q.fd))
	}
	for _, q := range p.tx {
		if q.ring != nil {
			errs = append(errs, unix.Munmap(q.ring))
			q.ring = nil
		}
		errs = append(errs, unix.Close(q.fd))
	}
	p.link.Stop()
	return errors.Join(errs...)
}

var (
	_ netdev.Netdev  = (*Port)(nil)
	_ netdev.Waiter  = (*Port)(nil)
	_ netdev.Remover = (*Port)(nil)
)

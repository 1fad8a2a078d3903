// Package afpacket is the portable kernel port driver: AF_PACKET sockets
// with memory-mapped rings, for any Linux interface (veth, physical NICs,
// anything with an Ethernet header).
//
// Per queue pair there are two sockets, so that each direction uses the
// ring format that suits it:
//
//   - Receive: by default a TPACKET_V2 ring (RingV2): fixed slots, each
//     with its own status word, which the kernel hands over the moment it
//     has written the frame, so a lone packet reaches the PMD at once
//     (libpcap's immediate mode uses V2 for the same reason). The socket
//     has PACKET_VNET_HDR, so GSO super-frames (up to 64 KiB) and
//     CHECKSUM_PARTIAL frames arrive with a virtio_net_hdr; a super-frame
//     is handed to the switch whole in a big buffer when the PMD has one
//     free, else vnethdr segments it, and partial checksums are
//     completed. Slots are sized for MTU frames (2,048 bytes, 8,192 of
//     them: 16 MiB per queue, 8 ms of backlog at 1 Mpps for a PMD held
//     off its CPU), and a frame that does not fit its slot (a
//     super-frame) is queued whole on the socket (PACKET_COPY_THRESH)
//     and read with one recvfrom: slots big enough for super-frames
//     (66,048 bytes) made 16 MiB hold only 252 frames, and a TCP sender
//     behind a veth with TSO off sends bursts of MTU frames longer than
//     that whenever the PMD is held up (by the receiver's stack running in
//     its sendto), so the kernel dropped about one frame in ten and TCP
//     retransmitted them (docs/benchmarks.md, TCP). RingV3 selects a TPACKET_V3 ring
//     instead: frames of any size packed into blocks, far denser for small
//     frames, but the kernel hands a block over only when it is full or
//     its retire timer (RetireTimeout, at least 1 ms) fires, so at low
//     rates every packet waits up to that long: for capture-style
//     throughput, not for a switch that cares about latency. Linux 6.18
//     fills the vnet header in both ring versions (tpacket_rcv writes it
//     for every version; the e2e TCP test depends on it).
//     PACKET_IGNORE_OUTGOING keeps frames the host sends out of the
//     interface away from the switch. The socket is bound with ETH_P_ALL
//     and puts the interface in promiscuous mode (PACKET_MR_PROMISC). With
//     Queues > 1 the receive sockets form a PACKET_FANOUT group of type
//     FANOUT_HASH, so the kernel spreads flows over them;
//     FANOUT_FLAG_DEFRAG is not set, because it would hand the switch
//     reassembled datagrams larger than the MTU, and the fanout hash of IP
//     fragments covers the addresses only, so the fragments of one
//     datagram share a queue anyway.
//   - Transmit: a TPACKET_V2 ring of fixed slots (simplest, and all
//     frames but GSO super-frames are at most MTU-sized) on a socket bound with
//     protocol 0 (it receives nothing), with PACKET_QDISC_BYPASS,
//     PACKET_LOSS (a malformed slot is skipped instead of stalling the
//     ring; a frame the device refuses is made one, see txQueue.flush) and PACKET_VNET_HDR: each slot carries a virtio_net_hdr with
//     no offload and hdr_len covering the frame, which makes the kernel
//     copy the frame instead of lending the ring's pages to the skb (see
//     txQueue.send). A batch ends with one sendto(MSG_DONTWAIT). GSO
//     super-frames kept whole (see "Big frames" in docs/architecture.md)
//     go through a second, ringless socket with PACKET_VNET_HDR, one
//     sendmsg each carrying their offload state, after a kick of the
//     ring so that the frames queued before them leave first.
//
// Neither Recv nor Send makes more than one system call per batch (Recv
// none), plus one per GSO super-frame sent. VLAN tags the kernel moved into tp_vlan_tci are put back into the
// frame, so tagged frames stay tagged through the switch.
package afpacket

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/vswitch-go/vswitch/datapath/packet"
	"github.com/vswitch-go/vswitch/netdev"
	"github.com/vswitch-go/vswitch/netdev/internal/bgclose"
	"github.com/vswitch-go/vswitch/netdev/linkwatch"
	"github.com/vswitch-go/vswitch/netdev/vnethdr"
)

// RingVersion selects the format of the receive ring.
type RingVersion int

const (
	// RingV2 is a TPACKET_V2 ring of fixed slots, each handed over as soon
	// as the kernel has written it: the lowest latency, at the price of
	// a slot the size of a GSO super-frame per packet (the default).
	RingV2 RingVersion = iota
	// RingV3 is a TPACKET_V3 ring of blocks packed with frames of any
	// size: dense and cheap per packet under load, but a block is handed
	// over only when full or after RetireTimeout, which adds up to that
	// many milliseconds of latency at low packet rates. Use it for
	// capture-style throughput where that delay is acceptable.
	RingV3
)

// String returns the ring's name as used in test and log output.
func (v RingVersion) String() string {
	switch v {
	case RingV2:
		return "V2"
	case RingV3:
		return "V3"
	}
	return fmt.Sprintf("RingVersion(%d)", int(v))
}

// Options configure a Port. Zero values select the defaults.
type Options struct {
	// Queues is the number of rx/tx queue pairs (default 1).
	Queues int
	// RxRing is the receive ring format (default RingV2).
	RxRing RingVersion

	// RxFrameSize is the size of a V2 receive slot in bytes, a multiple
	// of 16 (default 2,048: a 1,518-byte frame behind the tpacket2 and
	// vnet headers). Frames that do not fit a slot, GSO super-frames
	// above all, take the slower way through the socket's queue (one
	// recvfrom each); MinRxFrameSize or more puts every frame in the ring.
	// V2 only.
	RxFrameSize int
	// RxFrames is the number of V2 receive slots, rounded up to whole
	// ring blocks (default 8,192: 16 MiB of ring per queue with the
	// default slots, a backlog of 8,192 frames; what overflows it is
	// dropped by the kernel and shows in RxDrops). V2 only.
	RxFrames int

	// RxBlockSize is the size of a V3 receive ring block in bytes, a
	// multiple of the page size (default 256 KiB). It bounds the largest
	// frame the kernel can deliver whole, so it must exceed 64 KiB plus
	// headers for GSO super-frames to arrive untruncated. With RingV2 the
	// port picks the block size itself (the one that wastes least memory
	// for RxFrames slots of RxFrameSize) and a value set here is ignored.
	RxBlockSize int
	// RxBlocks is the number of V3 receive ring blocks (default 32, so 8
	// MiB of ring per queue: about 58,000 minimum-size frames or 120
	// super-frames of backlog). Ignored with RingV2, like RxBlockSize.
	RxBlocks int
	// RetireTimeout is how long, in milliseconds, the kernel keeps a
	// partly filled V3 receive block before handing it over (default 1,
	// the smallest the kernel takes). V3 only.
	RetireTimeout int

	// TxFrameSize is the size of a transmit ring slot, a power of two of
	// at least 2048 bytes (default 2048: room for a 1518-byte frame).
	TxFrameSize int
	// TxFrames is the number of transmit ring slots (default 1024).
	TxFrames int
}

// Defaults.
const (
	DefaultRxFrameSize = 2048
	// DefaultRxFrames: at 1 Mpps 4,096 slots lasted 4 ms, and a PMD that
	// lost a time slice or two to another task on its CPU came back to a
	// full ring (tp_drops); 8,192 last 8 ms.
	DefaultRxFrames      = 8192
	DefaultRxBlockSize   = 256 << 10
	DefaultRxBlocks      = 32
	DefaultRetireTimeout = 1
	DefaultTxFrameSize   = 2048
	DefaultTxFrames      = 1024
)

// MinRxFrameSize is the smallest V2 receive slot that holds a GSO
// super-frame in the ring itself: the kernel puts the network header at
// TPACKET_ALIGN(TPACKET2_HDRLEN + link header length) + the vnet header,
// which is offset 90 for link headers of up to 28 bytes (an Ethernet
// header with up to three tags left in the frame), and the IP datagram
// behind it may be 65,535 bytes long.
const MinRxFrameSize = (maxNetOffV2 + 65535 + tpAlign - 1) &^ (tpAlign - 1)

// copyQueueBytes is the receive buffer of a V2 socket, which holds the
// frames too large for a slot until the PMD reads them: a few dozen GSO
// super-frames (each costs its truesize, up to about 128 KiB). Without
// CAP_NET_ADMIN the kernel caps it at net.core.rmem_max; a super-frame
// that finds the queue full arrives truncated and counts as an RxError.
const copyQueueBytes = 4 << 20

// maxNetOffV2 is where the kernel puts the network header in a V2 slot
// for link headers of up to 28 bytes.
const maxNetOffV2 = (tp2HdrLenAddr+28+tpAlign-1)&^(tpAlign-1) + vnethdr.Len

// minRxFrameSize is the smallest V2 receive slot New accepts: room for
// a 1518-byte frame behind the headers, so that only super-frames can
// be truncated.
const minRxFrameSize = 2048

// maxRxBlockSize is the largest ring block the port picks for a V2 ring:
// 4 MiB is the largest allocation of contiguous pages (MAX_PAGE_ORDER 10
// with 4 KiB pages); beyond it the kernel falls back to vmalloc.
const maxRxBlockSize = 4 << 20

// txBlockSize is the tx ring's block size: the kernel wants blocks of whole
// pages holding whole slots.
const txBlockSize = 64 << 10

func (o Options) withDefaults() (Options, error) {
	if o.Queues <= 0 {
		o.Queues = 1
	}
	if o.RxFrameSize <= 0 {
		o.RxFrameSize = DefaultRxFrameSize
	}
	if o.RxFrames <= 0 {
		o.RxFrames = DefaultRxFrames
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
	case o.RxRing != RingV2 && o.RxRing != RingV3:
		return o, fmt.Errorf("afpacket: unknown %v", o.RxRing)
	case o.RxRing == RingV3 && o.RxBlockSize%page != 0:
		return o, fmt.Errorf("afpacket: rx block size %d is not a multiple of the page size %d", o.RxBlockSize, page)
	case o.RxRing == RingV2 && (o.RxFrameSize%tpAlign != 0 || o.RxFrameSize < minRxFrameSize || o.RxFrameSize > maxRxBlockSize):
		return o, fmt.Errorf("afpacket: rx frame size %d is not a multiple of %d in %d..%d", o.RxFrameSize, tpAlign, minRxFrameSize, maxRxBlockSize)
	case o.TxFrameSize < 2048 || o.TxFrameSize > txBlockSize || o.TxFrameSize&(o.TxFrameSize-1) != 0:
		return o, fmt.Errorf("afpacket: tx frame size %d is not a power of two in 2048..%d", o.TxFrameSize, txBlockSize)
	}
	if o.RxRing == RingV2 {
		o.RxBlockSize, o.RxBlocks = v2Geometry(o.RxFrameSize, o.RxFrames, page)
		o.RxFrames = o.RxBlocks * (o.RxBlockSize / o.RxFrameSize)
	}
	perBlock := txBlockSize / o.TxFrameSize
	o.TxFrames = (o.TxFrames + perBlock - 1) / perBlock * perBlock
	return o, nil
}

// v2Geometry picks the block size and count of a V2 ring for at least
// frames slots of frameSize bytes. The kernel allocates each block as 2^n
// pages and puts only whole slots in it, so the candidates are the power of
// two page counts, and the one that needs the least memory in all wins (on
// a tie, the one with more slots, then the larger block: fewer
// allocations).
func v2Geometry(frameSize, frames, page int) (blockSize, blockNr int) {
	best, bestFrames := 0, 0
	for bs := page; bs <= maxRxBlockSize; bs *= 2 {
		per := bs / frameSize
		if per == 0 {
			continue
		}
		n := (frames + per - 1) / per
		total := n * bs
		if best == 0 || total < best || total == best && n*per >= bestFrames {
			best, bestFrames = total, n*per
			blockSize, blockNr = bs, n
		}
	}
	return blockSize, blockNr
}

// Port is an AF_PACKET port. Use New.
type Port struct {
	name     string
	link     *linkwatch.Link
	rx       []*rxQueue
	tx       []*txQueue
	counters []netdev.Counters // one per rx queue, then one per tx queue
	gso      netdev.GSOCounters

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

// open creates the sockets of every queue side by side, then, in queue
// order, binds each receive socket, puts the first in promiscuous mode and
// each in the fanout group right after its bind (a socket bound outside
// the group gets a copy of every frame).
//
// Why side by side: setting up a ring (PACKET_RX_RING, PACKET_TX_RING)
// waits for an RCU grace period in the kernel (synchronize_net in
// packet_set_ring), 4–16 ms each on a 2-CPU host, while the memory of a
// 16 MiB ring takes about 1 ms whatever its block size; waits that run
// at once share a grace period, so a port opens in about one instead of
// two per queue. The sockets themselves are created here, on the caller's
// thread: a socket belongs to the network namespace of the thread that
// creates it, and a caller may have entered another one (the goroutines
// setting up the rings run on threads of the process's own).
func (p *Port) open(opts Options) error {
	rx := make([]*rxQueue, opts.Queues)
	tx := make([]*txQueue, opts.Queues)
	errs := make([]error, 2*opts.Queues)
	fds := make([]int, 0, 3*opts.Queues) // per queue: receive, send, send of GSO frames
	for range 3 * opts.Queues {
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			for _, fd := range fds {
				unix.Close(fd)
			}
			return fmt.Errorf("socket: %w", err)
		}
		fds = append(fds, fd)
	}
	var wg sync.WaitGroup
	for i := range opts.Queues {
		rxFD, txFD, bigFD := fds[3*i], fds[3*i+1], fds[3*i+2]
		wg.Go(func() { rx[i], errs[i] = openRx(rxFD, opts, &p.counters[i], &p.gso) })
		wg.Go(func() {
			tx[i], errs[opts.Queues+i] = openTx(txFD, bigFD, p.link, opts, &p.counters[opts.Queues+i], &p.gso)
		})
	}
	wg.Wait()
	for i := range opts.Queues {
		if rx[i] != nil {
			p.rx = append(p.rx, rx[i])
		}
		if tx[i] != nil {
			p.tx = append(p.tx, tx[i])
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	fanoutID := -1
	for i, q := range p.rx {
		if err := bindRx(q.fd, p.link.Index); err != nil {
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
			var err error
			if fanoutID, err = joinFanout(q.fd, fanoutID); err != nil {
				return err
			}
		}
	}
	return nil
}

// openRx makes packet socket fd (protocol 0: nothing arrives before the
// ring exists and the socket is bound) a receive queue with its ring, not
// yet bound (bindRx). It returns the queue, which owns fd, even on error,
// for the caller to release.
func openRx(fd int, opts Options, c *netdev.Counters, gso *netdev.GSOCounters) (*rxQueue, error) {
	q := &rxQueue{fd: fd, v3: opts.RxRing == RingV3, blockSize: opts.RxBlockSize, blockNr: opts.RxBlocks, vnet: true, c: c, gso: gso}
	version := unix.TPACKET_V2
	if q.v3 {
		version = unix.TPACKET_V3
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_VERSION, version); err != nil {
		return q, fmt.Errorf("PACKET_VERSION %v: %w", opts.RxRing, err)
	}
	// Before the ring: the kernel refuses it (EBUSY) once a ring exists.
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_VNET_HDR, 1); err != nil {
		return q, fmt.Errorf("PACKET_VNET_HDR: %w", err)
	}
	if q.v3 {
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
			return q, fmt.Errorf("PACKET_RX_RING V3 %+v: %w", req, err)
		}
	} else {
		// Frames that do not fit a slot (super-frames, with slots sized
		// for the MTU) are queued on the socket whole instead of being
		// truncated (rxQueue.readCopied); the queue must hold a burst of
		// them.
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_COPY_THRESH, 1); err != nil {
			return q, fmt.Errorf("PACKET_COPY_THRESH: %w", err)
		}
		if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, copyQueueBytes) != nil {
			_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, copyQueueBytes)
		}
		q.frameSize = opts.RxFrameSize
		q.framesPerBlock = opts.RxBlockSize / opts.RxFrameSize
		q.frameNr = opts.RxFrames
		req := unix.TpacketReq{
			Block_size: uint32(opts.RxBlockSize),
			Block_nr:   uint32(opts.RxBlocks),
			Frame_size: uint32(opts.RxFrameSize),
			Frame_nr:   uint32(opts.RxFrames),
		}
		if err := unix.SetsockoptTpacketReq(fd, unix.SOL_PACKET, unix.PACKET_RX_RING, &req); err != nil {
			return q, fmt.Errorf("PACKET_RX_RING V2 %+v: %w", req, err)
		}
	}
	ring, err := unix.Mmap(fd, 0, opts.RxBlockSize*opts.RxBlocks, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return q, fmt.Errorf("mmap rx ring: %w", err)
	}
	q.ring = ring
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1); err != nil {
		return q, fmt.Errorf("PACKET_IGNORE_OUTGOING: %w", err)
	}
	return q, nil
}

// bindRx starts the receive socket fd on ifindex.
func bindRx(fd, ifindex int) error {
	sa := unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifindex}
	if err := unix.Bind(fd, &sa); err != nil {
		return fmt.Errorf("bind: %w", err)
	}
	return nil
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
func openTx(fd, bigFD int, link *linkwatch.Link, opts Options, c *netdev.Counters, gso *netdev.GSOCounters) (*txQueue, error) {
	q := &txQueue{fd: fd, bigFD: bigFD, frameSize: opts.TxFrameSize, frameNr: opts.TxFrames, link: link, c: c, gso: gso}
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
	for _, o := range []struct {
		name     string
		opt, val int
	}{
		{"PACKET_VNET_HDR", unix.PACKET_VNET_HDR, 1},
		{"PACKET_QDISC_BYPASS", unix.PACKET_QDISC_BYPASS, 1},
	} {
		if err := unix.SetsockoptInt(q.bigFD, unix.SOL_PACKET, o.opt, o.val); err != nil {
			return q, fmt.Errorf("GSO socket %s: %w", o.name, err)
		}
	}
	// Room for a few dozen super-frames in flight (best effort, as above).
	_ = unix.SetsockoptInt(q.bigFD, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, 4<<20)
	if err := unix.Bind(q.bigFD, &sa); err != nil {
		return q, fmt.Errorf("bind GSO socket: %w", err)
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

// GSOStats returns the port's GSO counters.
func (p *Port) GSOStats() netdev.GSOStats { return p.gso.Load() }

// SendsGSO implements netdev.GSOSender: the kernel takes GSO frames with
// a virtio_net_hdr on any interface.
func (p *Port) SendsGSO() bool { return true }

// TxKicks implements netdev.TxKicker: the sendto calls that made the
// kernel transmit tx queue q's ring.
func (p *Port) TxKicks(q int) uint64 { return p.tx[q].c.TxKicks.Load() }

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

// RingFreezes returns how many times a V3 receive ring was found full by
// the kernel (tp_freeze_q_cnt). It counts episodes, not frames, which is
// why it is not part of RxDrops. V2 rings have no such counter (the kernel
// only flags the next frame it delivers with TP_STATUS_LOSING), so it
// stays 0 with RingV2.
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
		if !q.v3 {
			st, err := unix.GetsockoptTpacketStats(q.fd, unix.SOL_PACKET, unix.PACKET_STATISTICS)
			if err == nil {
				p.kernelDrops += uint64(st.Drops)
			}
			continue
		}
		st, err := unix.GetsockoptTpacketStatsV3(q.fd, unix.SOL_PACKET, unix.PACKET_STATISTICS)
		if err != nil {
			continue
		}
		p.kernelDrops += uint64(st.Drops)
		p.freezes += uint64(st.Freeze_q_cnt)
	}
}

// Close implements netdev.Netdev: it stops watching the link and leaves
// the sockets to close (which ends the promiscuous membership) and their
// rings to unmap in the background (package bgclose; WaitClosed waits
// for that). The caller no longer polls the port, so nothing reads the
// rings meanwhile.
func (p *Port) Close() error {
	p.statsMu.Lock()
	defer p.statsMu.Unlock()
	if p.closed.Load() {
		return errors.New("afpacket: port already closed")
	}
	p.readKernelStats() // keep the last drops for Stats after Close
	p.closed.Store(true)
	p.release()
	return nil
}

// WaitClosed waits until the sockets of every port closed so far are
// closed and their rings unmapped.
func WaitClosed() { bgclose.Wait() }

// release frees whatever New built, the sockets in the background.
func (p *Port) release() {
	for _, q := range p.rx {
		bgclose.Run(func() {
			if q.ring != nil {
				unix.Munmap(q.ring)
			}
			unix.Close(q.fd)
		})
	}
	for _, q := range p.tx {
		bgclose.Run(func() {
			if q.ring != nil {
				unix.Munmap(q.ring)
			}
			unix.Close(q.fd)
			if q.bigFD >= 0 {
				unix.Close(q.bigFD)
			}
		})
	}
	p.link.Stop()
}

var (
	_ netdev.Netdev    = (*Port)(nil)
	_ netdev.Waiter    = (*Port)(nil)
	_ netdev.Remover   = (*Port)(nil)
	_ netdev.GSOSender = (*Port)(nil)
)

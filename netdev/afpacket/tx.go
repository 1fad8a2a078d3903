package afpacket

import (
	"encoding/binary"

	"golang.org/x/sys/unix"

	"github.com/vswitch-go/vswitch/datapath/header"
	"github.com/vswitch-go/vswitch/datapath/packet"
	"github.com/vswitch-go/vswitch/netdev"
	"github.com/vswitch-go/vswitch/netdev/linkwatch"
	"github.com/vswitch-go/vswitch/netdev/vnethdr"
)

// txDataOff is where a frame's bytes start in a tx ring slot: after the
// tpacket2_hdr comes the virtio_net_hdr (the tx socket has
// PACKET_VNET_HDR), then the frame.
const txDataOff = tp2HdrLen + vnethdr.Len

// txQueue is one transmit socket and its TPACKET_V2 ring of fixed-size
// slots. The PMD fills slots in order from head and marks them
// SEND_REQUEST; one sendto per batch makes the kernel transmit every
// requested slot; the kernel marks a slot AVAILABLE again when it is done
// with it, which the PMD notices when head comes round to it.
type txQueue struct {
	fd int
	// bigFD is a second send socket, without a ring, for GSO frames: a
	// super-frame does not fit a ring slot, and sendmsg on a socket
	// with a tx ring only kicks the ring. It has PACKET_VNET_HDR, so each
	// send carries the frame's offload state for the kernel to act on.
	bigFD     int
	big       vnethdr.FrameSender
	gso       *netdev.GSOCounters
	ring      []byte
	frameSize int
	frameNr   int
	head      int
	link      *linkwatch.Link
	c         *netdev.Counters
}

// slot returns slot i, capped so that no slice of it reaches past it.
func (q *txQueue) slot(i int) []byte {
	s := i * q.frameSize
	return q.ring[s : s+q.frameSize : s+q.frameSize]
}

// send copies the frames of b into free slots and kicks the kernel once.
// Frames that do not fit the link (runts, longer than the MTU allows) are
// counted as TxErrors; frames that find the ring full, and frames the
// device refuses (see flush), as TxDrops. It never blocks.
func (q *txQueue) send(b *packet.Batch) int {
	// The kernel refuses untagged frames longer than MTU+14 and tagged
	// ones longer than MTU+18.
	maxLen := q.frameSize - txDataOff
	if mtu := q.link.MTU(); mtu > 0 && mtu+header.EthernetLen+header.VLANTagLen < maxLen {
		maxLen = mtu + header.EthernetLen + header.VLANTagLen
	}
	sent, bytes, errs, drops := 0, 0, 0, 0
	queued := 0 // ring slots requested since the last kick
	for _, pkt := range b.Packets() {
		data := pkt.Data()
		l := len(data)
		if pkt.GSO() {
			// Frames before it leave first: kick the ring now, as the
			// big socket's frame goes out at once.
			if queued > 0 {
				errs += q.flush(queued)
				queued = 0
			}
			switch q.sendBig(pkt) {
			case 0:
				sent++
				bytes += l
			case unix.EAGAIN, unix.ENOBUFS:
				drops++
			default:
				errs++
			}
			continue
		}
		if l < header.EthernetLen || l > maxLen || (l > maxLen-header.VLANTagLen && !tagged(data)) {
			errs++
			continue
		}
		s := q.slot(q.head)
		if loadStatus(s[tp2StatusOff:]) != statusAvailable {
			drops++
			continue
		}
		// A virtio_net_hdr with hdr_len covering the whole frame makes
		// the kernel copy the frame into the skb instead of attaching
		// the ring's pages to it: a local receiver (veth, tap, the host
		// stack) may hold an skb long after the kernel has marked the
		// slot available again, and would see the next frame we write
		// there.
		v := s[tp2HdrLen:txDataOff]
		v[0], v[1] = 0, 0 // flags, gso_type
		binary.LittleEndian.PutUint16(v[2:], uint16(l))
		binary.LittleEndian.PutUint32(v[4:], 0) // gso_size, csum_start
		binary.LittleEndian.PutUint16(v[8:], 0) // csum_offset
		copy(s[txDataOff:], data)
		binary.LittleEndian.PutUint32(s[tp2LenOff:], uint32(vnethdr.Len+l))
		storeStatus(s[tp2StatusOff:], statusSendRequest)
		q.head++
		if q.head == q.frameNr {
			q.head = 0
		}
		sent++
		queued++
		bytes += l
	}
	if queued > 0 {
		errs += q.flush(queued)
	}
	c := q.c
	if sent > 0 {
		c.TxPackets.Add(uint64(sent))
		c.TxBytes.Add(uint64(bytes))
	}
	if drops > 0 {
		c.TxDrops.Add(uint64(drops))
	}
	if errs > 0 {
		c.TxErrors.Add(uint64(errs))
	}
	return sent
}

// sendBig sends a GSO frame whole through bigFD, its offload state in the
// virtio_net_hdr, and returns the errno (0 when the kernel took it). The
// kernel copies the frame into its own skb, so the packet is free to go
// back to its pool at once.
func (q *txQueue) sendBig(pkt *packet.Packet) unix.Errno {
	q.c.TxKicks.Add(1)
	e := q.big.Send(q.bigFD, vnethdr.Header(pkt.Offload), pkt.Data())
	if e == 0 {
		q.gso.TxWhole.Add(1)
	}
	return e
}

// tagged reports whether an Ethernet frame carries an 802.1Q/802.1ad tag.
func tagged(f []byte) bool {
	t := uint16(f[12])<<8 | uint16(f[13])
	return t == header.EtherTypeVLAN || t == header.EtherTypeQinQ
}

// flush kicks the kernel to transmit every requested slot and returns 1
// if the kick failed for a reason other than a refused frame or a full
// socket (the slots stay requested and the next kick sends them), else 0.
//
// A frame the device refuses (NET_XMIT_DROP: a veth whose peer's MTU is
// smaller than the frame, a carrier gone) makes the kernel put its slot
// back to SEND_REQUEST, leave its ring head there and fail the kick with
// ENOBUFS: every later kick would offer the device that same frame first
// and nothing behind it would ever leave. flush drops such a frame as
// refused (the device dropped it already; the kernel only means to retry
// it) by making its slot one the kernel skips (PACKET_LOSS), and kicks
// again, so the frames behind it leave in this call. Each kick after the
// first follows a dropped frame, and at most queued (the slots requested
// since the last kick) are dropped, so a device that refuses everything
// costs one syscall per frame it refuses and no loop.
func (q *txQueue) flush(queued int) int {
	for refused := 0; ; {
		q.c.TxKicks.Add(1)
		switch kick(q.fd) {
		case 0, unix.EAGAIN, unix.EINTR:
			return 0
		case unix.ENOBUFS:
		default:
			return 1
		}
		i := q.refusedSlot()
		if i < 0 || refused == queued {
			return 0
		}
		skipSlot(q.slot(i))
		refused++
		q.c.TxDrops.Add(1)
		q.c.TxRefused.Add(1)
	}
}

// refusedSlot returns the slot at the kernel's ring head after a kick
// the kernel failed, or -1 if no slot is waiting. The kernel takes slots
// in order and leaves every slot it has taken in another state than
// SEND_REQUEST, so the slots still requested are the run that ends just
// before head, and its first slot is the kernel's head.
func (q *txQueue) refusedSlot() int {
	first := -1
	for n, i := 0, q.head; n < q.frameNr; n++ {
		if i == 0 {
			i = q.frameNr
		}
		i--
		if loadStatus(q.slot(i)[tp2StatusOff:]) != statusSendRequest {
			break
		}
		first = i
	}
	return first
}

// skipSlot makes a requested slot one the kernel drops instead of sending:
// a length shorter than the virtio_net_hdr fails the kernel's parse of the
// slot, and with PACKET_LOSS the kernel then marks it AVAILABLE and moves
// its head past it. The slot stays SEND_REQUEST, so the next kick is the
// one that skips it.
func skipSlot(s []byte) {
	binary.LittleEndian.PutUint32(s[tp2LenOff:], 0)
}

// kick makes the kernel transmit every slot marked SEND_REQUEST, without
// waiting for completions, and returns the errno of the sendto.
func kick(fd int) unix.Errno {
	_, _, e := unix.Syscall6(unix.SYS_SENDTO, uintptr(fd), 0, 0, unix.MSG_DONTWAIT, 0, 0)
	return e
}

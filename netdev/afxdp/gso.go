package afxdp

import (
	"golang.org/x/sys/unix"

	"github.com/vswitch-go/vswitch/datapath/packet"
	"github.com/vswitch-go/vswitch/netdev/vnethdr"
)

// GSO frames on transmit. An AF_XDP descriptor carries no offload state,
// so a super-frame cannot go through the tx ring; but the datapath merges
// consecutive TCP segments into super-frames for ports that take them
// (datapath/coalesce.go), because behind a veth the receiver's stack runs
// in the PMD's send, once per skb, and that is what limits TCP at MTU
// frames (docs/architecture.md, "What limits TCP at MTU-sized frames").
// So a port in copy mode gets, per tx queue, a packet socket with
// PACKET_VNET_HDR for super-frames, as afpacket has: one sendmsg each,
// with the frame's offload state in a virtio_net_hdr; the kernel makes one
// skb of it and segments it only if the device needs that (a veth does
// not).
//
// Order: Send kicks the tx ring before it sends a super-frame. In copy
// mode the kick transmits the ring's descriptors in the sendto itself
// (the kernel's generic xmit, up to 32 at a time, which a batch never
// exceeds), so frames queued before the super-frame leave before it. In
// zero-copy mode the kick only wakes the driver, which sends later, so a
// zero-copy port takes no GSO frames and the datapath segments them.

// gsoTx is one tx queue's socket for GSO frames.
type gsoTx struct {
	fd     int
	sender vnethdr.FrameSender
}

// openGSOTx opens the GSO socket for one tx queue of interface ifindex.
func openGSOTx(ifindex int) (*gsoTx, error) {
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	g := &gsoTx{fd: fd}
	for _, opt := range []int{unix.PACKET_VNET_HDR, unix.PACKET_QDISC_BYPASS} {
		if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, opt, 1); err != nil {
			unix.Close(fd)
			return nil, err
		}
	}
	// Room for a few dozen super-frames in flight (best effort: without
	// CAP_NET_ADMIN the kernel caps it at wmem_max).
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, 4<<20)
	// Protocol 0: the socket only sends.
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Ifindex: ifindex}); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return g, nil
}

// send sends pkt, a GSO frame, whole and returns the errno (0 when the
// kernel took it; it copies the frame, so pkt may be freed at once).
func (g *gsoTx) send(pkt *packet.Packet) unix.Errno {
	return g.sender.Send(g.fd, vnethdr.Header(pkt.Offload), pkt.Data())
}

// SendsGSO implements netdev.GSOSender: a port in copy mode sends GSO
// frames whole through its packet sockets.
func (p *Port) SendsGSO() bool { return p.gsoTx != nil }

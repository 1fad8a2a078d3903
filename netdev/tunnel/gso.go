package tunnel

import (
	"encoding/binary"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/vswitch-go/vswitch/datapath/packet"
)

// UDP segmentation offload on the send side. A TCP stream through the
// switch arrives as a run of MTU-size frames for one destination, and the
// raw path (rawsend.go) hands the kernel one datagram per frame: each pays
// routing, netfilter, the qdisc and the driver on its own. With
// UDP_SEGMENT one sendmsg carries a whole run of equal-size datagrams to
// one destination (the last may be shorter) as one buffer that the kernel
// cuts into datagrams as late as it can: in the driver or the NIC, or
// never, when the receiver is a local socket with UDP_GRO (rxgro.go).
//
// The run goes out through one of gsoSockets ordinary UDP sockets bound to
// ephemeral ports: the kernel writes the headers, so the outer source port
// is the socket's, and the flow's hash picks the socket, which keeps some
// entropy for ECMP and RSS (gsoSockets source ports instead of the raw
// path's ~28000). The price: a flow's runs and its single packets leave
// from different source ports, so an underlay that spreads flows over
// several paths may reorder them; on one path they stay in order. The kernel refuses segmentation it cannot do: EIO when
// the device cannot checksum (the switch then stops using it on that
// queue), EINVAL when a segment would not fit the path MTU; either way the
// run goes the raw path, which counts an oversize packet as CauseMTU.

const (
	gsoSockets = 4
	// gsoMaxSegs is the kernel's UDP_MAX_SEGMENTS (64 before Linux 6.2).
	gsoMaxSegs = 64
	// gsoMaxBytes bounds a run's UDP payload: an IP datagram's length
	// field.
	gsoMaxBytes = 65535 - 40 - 8
	// gsoMaxFails is how many EINVALs in a row (not explained by the
	// MTU, which fails the same way) turn the offload off for a queue.
	gsoMaxFails = 8
	cmsgUDPSeg  = unix.SizeofCmsghdr + 8 // CMSG_SPACE(sizeof(uint16))
	gsoCtrlLen  = cmsgUDPSeg + tosTTLCtrlLen
)

// gsoTx is one tx queue's segmentation-offload state.
type gsoTx struct {
	fds   [gsoSockets]int
	on    bool
	fails int
	hdr   [hdrLen]byte // every segment of a run has the same VNI
	iovs  [2 * packet.BatchSize]unix.Iovec
	ctrl  [gsoCtrlLen]byte // UDP_SEGMENT, then the run's TOS and TTL when they are not the socket's
	name  unix.RawSockaddrInet6
	msg   unix.Msghdr
	runs  uint64 // runs sent with one sendmsg, for tests
}

// openGSO opens the queue's offload sockets; a kernel without UDP_SEGMENT
// leaves the offload off, which is no error.
func (p *Port) openGSO(g *gsoTx) error {
	for i := range g.fds {
		g.fds[i] = -1
	}
	df4, df6 := unix.IP_PMTUDISC_DO, unix.IPV6_PMTUDISC_DO
	for i := range g.fds {
		fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_UDP)
		if err != nil {
			return err
		}
		g.fds[i] = fd
		for _, so := range [...][3]int{
			{unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 0},
			{unix.SOL_SOCKET, unix.SO_SNDBUF, 4 << 20},
			{unix.SOL_SOCKET, unix.SO_RCVBUF, 4096}, // nothing is sent to these ports
			{unix.IPPROTO_IPV6, unix.IPV6_UNICAST_HOPS, int(p.opt.TTL)},
			{unix.IPPROTO_IPV6, unix.IPV6_TCLASS, int(p.opt.TOS)},
			{unix.IPPROTO_IPV6, unix.IPV6_MTU_DISCOVER, df6},
			{unix.IPPROTO_IP, unix.IP_TTL, int(p.opt.TTL)},
			{unix.IPPROTO_IP, unix.IP_TOS, int(p.opt.TOS)},
			{unix.IPPROTO_IP, unix.IP_MTU_DISCOVER, df4},
		} {
			if err := unix.SetsockoptInt(fd, so[0], so[1], so[2]); err != nil {
				return err
			}
		}
		if err := unix.Bind(fd, &unix.SockaddrInet6{Addr: p.local}); err != nil {
			return err
		}
		// Probing the option: a kernel without UDP segmentation (before
		// 4.18) refuses it.
		if unix.SetsockoptInt(fd, unix.SOL_UDP, unix.UDP_SEGMENT, 0) != nil {
			closeGSO(g)
			return nil
		}
	}
	h := (*unix.Cmsghdr)(unsafe.Pointer(&g.ctrl[0]))
	h.Level, h.Type = unix.SOL_UDP, unix.UDP_SEGMENT
	h.SetLen(unix.SizeofCmsghdr + 2)
	g.on = true
	return nil
}

func closeGSO(g *gsoTx) {
	for i, fd := range g.fds {
		if fd > 0 {
			unix.Close(fd)
		}
		g.fds[i] = -1
	}
	g.on = false
}

// gsoRun returns how many packets from the start of pkts form a run one
// segmented send can carry: one flow (one hash, so that the flows a raw
// send would spread over source ports are not merged onto one), one
// destination and VNI, the same length (the last may be shorter). Fewer
// than 2 is no run.
func (p *Port) gsoRun(pkts []*packet.Packet, dst *[16]byte, vni uint32) int {
	seg := len(pkts[0].Data())
	hash := flowHash(pkts[0])
	tos, ttl := p.outerTOSTTL(pkts[0].Data())
	total := hdrLen + seg
	n := 1
	for n < len(pkts) && n < gsoMaxSegs {
		q := pkts[n]
		d, v, ok := p.target(q)
		l := len(q.Data())
		if !ok || v != vni || *d != *dst || l > seg || l == 0 || total+hdrLen+l > gsoMaxBytes || flowHash(q) != hash {
			break
		}
		// One run has one outer TOS and TTL.
		if qtos, qttl := p.outerTOSTTL(q.Data()); qtos != tos || qttl != ttl {
			break
		}
		total += hdrLen + l
		n++
		if l < seg {
			break
		}
	}
	return n
}

// sendGSO sends a run with one segmented sendmsg. It returns false,
// without counting anything, when the kernel refused the segmentation and
// the run must go the ordinary way; else the run is sent (sent packets,
// inner bytes), or dropped as a whole (drops, counted by cause here).
func (p *Port) sendGSO(q int, run []*packet.Packet, dst *[16]byte, vni uint32) (handled bool, sent int, bytes, drops uint64) {
	g := &p.tx[q].gso
	encapHeader(p.opt.Kind, &g.hdr, vni)
	for i, pkt := range run {
		d := pkt.Data()
		g.iovs[2*i].Base = &g.hdr[0]
		g.iovs[2*i].SetLen(hdrLen)
		g.iovs[2*i+1].Base = &d[0]
		g.iovs[2*i+1].SetLen(len(d))
		bytes += uint64(len(d))
	}
	binary.NativeEndian.PutUint16(g.ctrl[unix.SizeofCmsghdr:], uint16(hdrLen+len(run[0].Data())))
	g.name = sockaddr(*dst, p.opt.DstPort)
	m := &g.msg
	m.Name = (*byte)(unsafe.Pointer(&g.name))
	m.Namelen = unix.SizeofSockaddrInet6
	m.Iov = &g.iovs[0]
	m.SetIovlen(2 * len(run))
	m.Control = &g.ctrl[0]
	m.SetControllen(cmsgUDPSeg)
	if tos, ttl := p.outerTOSTTL(run[0].Data()); tos != p.opt.TOS || ttl != p.opt.TTL {
		m.SetControllen(cmsgUDPSeg + tosTTLCtrl(g.ctrl[cmsgUDPSeg:], isV4(dst), tos, ttl))
	}
	fd := g.fds[flowHash(run[0])%gsoSockets]
	causes := &p.causes[q]
	for {
		_, _, e := unix.Syscall(unix.SYS_SENDMSG, uintptr(fd), uintptr(unsafe.Pointer(m)), unix.MSG_DONTWAIT)
		p.tx[q].kicks.Add(1)
		c := CauseTxError
		switch e {
		case 0:
			g.fails = 0
			g.runs++
			return true, len(run), bytes, 0
		case unix.EINTR:
			continue
		case unix.EIO:
			closeGSO(g)
			return false, 0, 0, 0
		case unix.EINVAL, unix.EMSGSIZE:
			if g.fails++; g.fails >= gsoMaxFails {
				closeGSO(g)
			}
			return false, 0, 0, 0
		case unix.ENETUNREACH, unix.EHOSTUNREACH, unix.EADDRNOTAVAIL:
			c = CauseNoRoute
		}
		causes.n[c].Add(uint64(len(run)))
		return true, 0, 0, uint64(len(run))
	}
}

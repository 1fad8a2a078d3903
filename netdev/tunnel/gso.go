package tunnel

import (
	"encoding/binary"
	"unsafe"

	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/vswitch-go/vswitch/datapath/packet"
	"github.com/vswitch-go/vswitch/netdev"
	"github.com/vswitch-go/vswitch/netdev/vnethdr"
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
	hdr   [maxHdrLen]byte // every segment of a run has the same header
	hl    int             // hdr's length
	iovs  [2 * packet.BatchSize]unix.Iovec
	ctrl  [gsoCtrlLen]byte // UDP_SEGMENT, then the run's TOS and TTL when they are not the socket's
	name  unix.RawSockaddrInet6
	msg   unix.Msghdr
	runs  uint64 // runs sent with one sendmsg, for tests
	// open: the sockets are open (on may still turn off: super-frames
	// then go one datagram per segment through the same sockets).
	open bool
	// connected: the sockets are connected to the port's fixed remote,
	// so a send names no address and the kernel reuses the socket's
	// cached route instead of looking one up for every run (a tenth of
	// the send's kernel time, profiled on the tunnel benchmark).
	connected bool

	// Super-frames (tcpseg.go): the segmenter, each segment's header
	// slot, the run's iovecs, and messages for sending segments one by
	// one when the kernel refuses the segmented send.
	seg   tcpSegmenter
	vseg  vnethdr.Segmenter
	cut   []byte // vseg's segments (one run's worth), allocated on first use
	shdr  [gsoMaxSegs][segHdrMax]byte
	siovs [2 * gsoMaxSegs]unix.Iovec
	smsgs [gsoMaxSegs]mmsghdr
	super superCounters
	// flat holds a run of small frames with their headers (sendGSO).
	flat [gsoMaxSegs * (maxHdrLen + flatMax)]byte
}

// flatMax is the largest frame a run copies into gsoTx.flat instead of
// gathering it with its own iovec.
const flatMax = 256

// noFlat turns the copy into gsoTx.flat off, for the benchmark that
// compares the two.
var noFlat bool

// superCounters count a queue's super-frames; read by Stats readers.
type superCounters struct {
	frames, sends, segs atomic.Uint64
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
	// Only with local_ip as well: a socket bound to any address would keep
	// the source address the kernel chose at connect time. A connect that
	// fails (no route yet) leaves the sockets unconnected.
	if p.opt.Remote.IsValid() && p.opt.Local.IsValid() {
		g.connected = true
		for _, fd := range g.fds {
			if unix.Connect(fd, &unix.SockaddrInet6{Port: int(p.opt.DstPort), Addr: p.opt.Remote.As16()}) != nil {
				g.connected = false
				break
			}
		}
		if !g.connected {
			// AF_UNSPEC dissolves the association of those that did.
			var unspec unix.RawSockaddrInet6
			for _, fd := range g.fds {
				unix.Syscall(unix.SYS_CONNECT, uintptr(fd), uintptr(unsafe.Pointer(&unspec)), unix.SizeofSockaddrInet6)
			}
		}
	}
	h := (*unix.Cmsghdr)(unsafe.Pointer(&g.ctrl[0]))
	h.Level, h.Type = unix.SOL_UDP, unix.UDP_SEGMENT
	h.SetLen(unix.SizeofCmsghdr + 2)
	g.on, g.open = true, true
	return nil
}

func closeGSO(g *gsoTx) {
	for i, fd := range g.fds {
		if fd > 0 {
			unix.Close(fd)
		}
		g.fds[i] = -1
	}
	g.on, g.open = false, false
}

// gsoRun returns how many packets from the start of pkts form a run one
// segmented send can carry: one flow (one hash, so that the flows a raw
// send would spread over source ports are not merged onto one), one
// destination and VNI, the same length (the last may be shorter). Fewer
// than 2 is no run, and so is a run that a single datagram could carry
// (runMin): a peer whose generic XDP program sees a segmented send as one
// frame tells it from a datagram only by its length.
func (p *Port) gsoRun(pkts []*packet.Packet, dst *[16]byte, key hdrKey, m *netdev.TunnelOption) int {
	seg := len(pkts[0].Data())
	hash := flowHash(pkts[0])
	tos, ttl := p.outerTOSTTL(pkts[0].Data())
	hl := key.len()
	total := hl + seg
	n := 1
	for n < len(pkts) && n < gsoMaxSegs {
		q := pkts[n]
		d, k, ok := p.target(q, m)
		l := len(q.Data())
		if !ok || q.GSO() || k != key || *d != *dst || l > seg || l == 0 || total+hl+l > gsoMaxBytes || flowHash(q) != hash {
			break
		}
		// One run has one outer TOS and TTL.
		if qtos, qttl := p.outerTOSTTL(q.Data()); qtos != tos || qttl != ttl {
			break
		}
		total += hl + l
		n++
		if l < seg {
			break
		}
	}
	if total <= p.runMin {
		return 1
	}
	return n
}

// setName points m at the run's destination, or at none on connected
// sockets.
func (g *gsoTx) setName(m *unix.Msghdr) {
	if g.connected {
		m.Name, m.Namelen = nil, 0
		return
	}
	m.Name = (*byte)(unsafe.Pointer(&g.name))
	m.Namelen = unix.SizeofSockaddrInet6
}

// refusedICMP reports whether e is an ICMP error the peer reported
// earlier on a connected socket (port unreachable): it fails the send
// that collects it, and nothing was sent, so the send is tried once more.
func refusedICMP(e unix.Errno, retried *bool) bool {
	if e != unix.ECONNREFUSED || *retried {
		return false
	}
	*retried = true
	return true
}

// refused notes that the kernel refused a segmented send with e: EIO
// turns the offload off for the queue, as do gsoMaxFails EINVALs in a
// row. The sockets stay open for super-frames sent segment by segment.
func (g *gsoTx) refused(e unix.Errno) {
	if g.fails++; e == unix.EIO || g.fails >= gsoMaxFails {
		g.on = false
	}
}

// sendGSO sends a run with one segmented sendmsg. It returns false,
// without counting anything, when the kernel refused the segmentation and
// the run must go the ordinary way; else the run is sent (sent packets,
// inner bytes), or dropped as a whole (drops, counted by cause here).
func (p *Port) sendGSO(q int, run []*packet.Packet, dst *[16]byte, key hdrKey, opt *netdev.TunnelOption) (handled bool, sent int, bytes, drops uint64) {
	g := &p.tx[q].gso
	g.hl = encapHeader(p.opt.Kind, &g.hdr, key, opt)
	niov := 2 * len(run)
	if len(run[0].Data()) <= flatMax && !noFlat {
		// Small frames are copied into one buffer: the kernel walks an
		// iovec array element by element, which for 64-byte frames
		// costs more than the copy.
		off := 0
		for _, pkt := range run {
			d := pkt.Data()
			copy(g.flat[off:], g.hdr[:g.hl])
			off += g.hl + copy(g.flat[off+g.hl:], d)
			bytes += uint64(len(d))
		}
		g.iovs[0].Base = &g.flat[0]
		g.iovs[0].SetLen(off)
		niov = 1
	} else {
		for i, pkt := range run {
			d := pkt.Data()
			g.iovs[2*i].Base = &g.hdr[0]
			g.iovs[2*i].SetLen(g.hl)
			g.iovs[2*i+1].Base = &d[0]
			g.iovs[2*i+1].SetLen(len(d))
			bytes += uint64(len(d))
		}
	}
	binary.NativeEndian.PutUint16(g.ctrl[unix.SizeofCmsghdr:], uint16(g.hl+len(run[0].Data())))
	g.name = sockaddr(*dst, p.opt.DstPort)
	m := &g.msg
	g.setName(m)
	m.Iov = &g.iovs[0]
	m.SetIovlen(niov)
	m.Control = &g.ctrl[0]
	m.SetControllen(cmsgUDPSeg)
	if tos, ttl := p.outerTOSTTL(run[0].Data()); tos != p.opt.TOS || ttl != p.opt.TTL {
		m.SetControllen(cmsgUDPSeg + tosTTLCtrl(g.ctrl[cmsgUDPSeg:], isV4(dst), tos, ttl))
	}
	fd := g.fds[flowHash(run[0])%gsoSockets]
	causes := &p.causes[q]
	retried := false
	for {
		_, _, e := unix.Syscall(unix.SYS_SENDMSG, uintptr(fd), uintptr(unsafe.Pointer(m)), unix.MSG_DONTWAIT)
		p.tx[q].kicks.Add(1)
		c := CauseTxError
		if e == unix.EINTR || refusedICMP(e, &retried) {
			continue
		}
		switch e {
		case 0:
			g.fails = 0
			g.runs++
			return true, len(run), bytes, 0
		case unix.EIO, unix.EINVAL, unix.EMSGSIZE:
			g.refused(e)
			return false, 0, 0, 0
		case unix.ENETUNREACH, unix.EHOSTUNREACH, unix.EADDRNOTAVAIL:
			c = CauseNoRoute
		}
		causes.n[c].Add(uint64(len(run)))
		return true, 0, 0, uint64(len(run))
	}
}

// SendsGSO reports whether Send takes TCP (and other) super-frames whole:
// on the raw path with the offload sockets open (tcpseg.go). A port that
// lets the kernel fragment (df_default=false), sends on its UDP socket
// (SocketSend) or has udp_offload=false gets segments from the datapath.
func (p *Port) SendsGSO() bool { return p.superOK }

// SendsRuns: runs of segments go out with one sendmsg as they are
// (gsoRun), so the datapath need not merge them.
func (p *Port) SendsRuns() {}

// GSOStats returns the super-frames the port sent whole (TxWhole) and
// received (RxWhole: built from runs, or come whole, rxmerge.go).
func (p *Port) GSOStats() netdev.GSOStats {
	var s netdev.GSOStats
	for i := range p.tx {
		s.TxWhole += p.tx[i].gso.super.frames.Load()
	}
	for i := range p.rx {
		if g := p.rx[i].gro; g != nil {
			s.RxWhole += g.merged.Load() + g.supers.Load()
		}
	}
	return s
}

// SuperStats count the segmented sends that carried super-frames.
type SuperStats struct {
	// Frames is the super-frames sent (every segment went out).
	Frames uint64 `json:"frames"`
	// Sends is the sendmsg calls with UDP_SEGMENT that carried them,
	// Segments the datagrams those calls held: Segments/Sends is the
	// run length the kernel got per system call.
	Sends    uint64 `json:"sends"`
	Segments uint64 `json:"segments"`
}

// SuperStats returns the port's super-frame counters.
func (p *Port) SuperStats() SuperStats {
	var s SuperStats
	for i := range p.tx {
		c := &p.tx[i].gso.super
		s.Frames += c.frames.Load()
		s.Sends += c.sends.Load()
		s.Segments += c.segs.Load()
	}
	return s
}

// sendSuper sends the super-frame pkt as runs of tunnel datagrams, as few
// UDP_SEGMENT sendmsg calls as the kernel's limits allow (gsoMaxSegs
// datagrams, gsoMaxBytes per call: a 64 KiB frame needs two, as each
// segment repeats the headers). It returns whether every segment went,
// and the segments dropped (counted by cause here).
func (p *Port) sendSuper(q int, pkt *packet.Packet, dst *[16]byte, key hdrKey, m *netdev.TunnelOption) (ok bool, drops uint64) {
	g := &p.tx[q].gso
	causes := &p.causes[q]
	d := pkt.Data()
	g.hl = encapHeader(p.opt.Kind, &g.hdr, key, m)
	fast := g.seg.reset(d, &pkt.Offload, p.mtu, g.hl)
	if !fast {
		h := vnethdr.Header(pkt.Offload)
		if g.vseg.Reset(&h, d) != nil {
			causes.n[CauseBadHeader].Add(1)
			return false, 1
		}
		if g.cut == nil {
			g.cut = make([]byte, gsoMaxBytes)
		}
	}
	g.name = sockaddr(*dst, p.opt.DstPort)
	ctrl := 0
	if tos, ttl := p.outerTOSTTL(d); tos != p.opt.TOS || ttl != p.opt.TTL {
		ctrl = tosTTLCtrl(g.ctrl[cmsgUDPSeg:], isV4(dst), tos, ttl)
	}
	fd := g.fds[flowHash(pkt)%gsoSockets]
	for {
		// Fill one run.
		k, total, size, off := 0, 0, 0, 0
		for k < gsoMaxSegs {
			var l int
			if fast {
				if g.seg.done() {
					break
				}
				if l = g.seg.segLen(); total+l > gsoMaxBytes {
					break
				}
				h := &g.shdr[k]
				copy(h[:g.hl], g.hdr[:g.hl])
				pay := g.seg.next(h[g.hl:])
				g.siovs[2*k].Base = &h[0]
				g.siovs[2*k].SetLen(g.hl + g.seg.hl)
				g.siovs[2*k+1].Base = &pay[0]
				g.siovs[2*k+1].SetLen(len(pay))
			} else {
				if g.vseg.Done() {
					break
				}
				n, more, err := g.vseg.Next(g.cut[off : off+max(0, gsoMaxBytes-total-g.hl)])
				if err != nil || !more {
					if k == 0 {
						// A segment that fits no run: nothing more goes.
						causes.n[CauseBadHeader].Add(1)
						return false, drops + 1
					}
					break
				}
				l = g.hl + n
				g.siovs[2*k].Base = &g.hdr[0]
				g.siovs[2*k].SetLen(g.hl)
				g.siovs[2*k+1].Base = &g.cut[off]
				g.siovs[2*k+1].SetLen(n)
				off += n
			}
			if k == 0 {
				size = l
			}
			total += l
			k++
		}
		if k == 0 {
			break
		}
		drops += p.sendSegs(q, fd, k, size, total, ctrl)
	}
	if drops == 0 {
		g.super.frames.Add(1)
	}
	return drops == 0, drops
}

// sendSegs sends the k segments in g.siovs (all size bytes but the last,
// total in all) with one segmented sendmsg, or one datagram each when the
// kernel refuses that or a single datagram could carry them (runMin, see
// gsoRun), and returns how many were dropped (counted by cause).
func (p *Port) sendSegs(q, fd, k, size, total, ctrl int) (drops uint64) {
	tq := &p.tx[q]
	g := &tq.gso
	causes := &p.causes[q]
	if g.on && k > 1 && total > p.runMin {
		binary.NativeEndian.PutUint16(g.ctrl[unix.SizeofCmsghdr:], uint16(size))
		m := &g.msg
		g.setName(m)
		m.Iov = &g.siovs[0]
		m.SetIovlen(2 * k)
		m.Control = &g.ctrl[0]
		m.SetControllen(cmsgUDPSeg + ctrl)
		retried := false
		for {
			_, _, e := unix.Syscall(unix.SYS_SENDMSG, uintptr(fd), uintptr(unsafe.Pointer(m)), unix.MSG_DONTWAIT)
			tq.kicks.Add(1)
			c := CauseTxError
			if e == unix.EINTR || refusedICMP(e, &retried) {
				continue
			}
			switch e {
			case 0:
				g.fails = 0
				g.super.sends.Add(1)
				g.super.segs.Add(uint64(k))
				return 0
			case unix.EIO, unix.EINVAL, unix.EMSGSIZE:
				g.refused(e)
			case unix.ENETUNREACH, unix.EHOSTUNREACH, unix.EADDRNOTAVAIL:
				c = CauseNoRoute
				fallthrough
			default:
				causes.n[c].Add(uint64(k))
				return uint64(k)
			}
			break
		}
	}
	// One datagram per segment, on the same socket.
	for i := range k {
		m := &g.smsgs[i].hdr
		g.setName(m)
		m.Iov = &g.siovs[2*i]
		m.SetIovlen(2)
		m.Control = nil
		m.SetControllen(0)
		if ctrl > 0 {
			m.Control = &g.ctrl[cmsgUDPSeg]
			m.SetControllen(ctrl)
		}
	}
	for off := 0; off < k; {
		got, failed, cause := sendmmsg(fd, g.smsgs[off:k])
		tq.kicks.Add(1)
		if failed > 0 {
			causes.n[cause].Add(uint64(failed))
			drops += uint64(failed)
		}
		off += got + failed
	}
	return drops
}

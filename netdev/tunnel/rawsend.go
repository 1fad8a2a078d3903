package tunnel

import (
	"encoding/binary"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/vswitch-go/vswitch/datapath/packet"
	"github.com/vswitch-go/vswitch/netdev"
	"github.com/vswitch-go/vswitch/netdev/vnethdr"
)

// The raw send path. A kernel UDP socket stamps every datagram with its
// bound port as the source port, so all the tunnel's flows look like one
// to the underlay's ECMP hashing and to the receiver's RSS. With DF set
// (the default) the port therefore sends through IPPROTO_RAW sockets
// instead: the switch writes the outer IP and UDP headers itself (source
// port from the inner flow's hash, as Linux's vxlan does; UDP checksum;
// DF; TTL and TOS), and the kernel still routes the packet, resolves the
// neighbour and transmits it on the host's own interface. Oversize
// packets fail with EMSGSIZE (the kernel never fragments a raw packet),
// which is what DF asks for anyway. Ports with df_default=false keep the
// UDP socket send path, where the kernel fragments.
//
// The outer source address is local_ip, or else the address the kernel
// would choose for the destination, learnt by connecting a probe UDP
// socket and cached per destination for routeTTL.

// Linux's range for hashed UDP source ports (udp_flow_src_port with the
// default ip_local_port_range).
const (
	srcPortMin = 32768
	srcPortMax = 61000
)

const (
	routeSlots = 64
	routeTTL   = time.Second
	maxOuter   = 40 + 8 + maxHdrLen
)

// route is a cached source address for a destination.
type route struct {
	dst, src [16]byte
	expires  int64
	ok       bool
}

// rawTx is the raw send state of one tx queue.
type rawTx struct {
	fd4, fd6 int
	probe    int // UDP socket connected to a destination to learn its source
	routes   [routeSlots]route
	outer    [packet.BatchSize][maxOuter]byte
	sa4      [packet.BatchSize]unix.RawSockaddrInet4
	v4       [packet.BatchSize]bool
}

var v4Prefix = [12]byte{10: 0xff, 11: 0xff}

func isV4(a *[16]byte) bool { return [12]byte(a[:12]) == v4Prefix }

// openRaw opens the raw and probe sockets of one tx queue.
func openRaw(r *rawTx) error {
	var err error
	r.fd4, r.fd6, r.probe = -1, -1, -1
	if r.fd4, err = unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW); err != nil {
		return err
	}
	if r.fd6, err = unix.Socket(unix.AF_INET6, unix.SOCK_RAW|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW); err != nil {
		return err
	}
	for _, fd := range []int{r.fd4, r.fd6} {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, 4<<20); err != nil {
			return err
		}
	}
	r.probe, err = unix.Socket(unix.AF_INET6, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.IPPROTO_UDP)
	if err == nil {
		err = unix.SetsockoptInt(r.probe, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 0)
	}
	return err
}

func closeRaw(r *rawTx) {
	for _, fd := range []int{r.fd4, r.fd6, r.probe} {
		if fd > 0 {
			unix.Close(fd)
		}
	}
	r.fd4, r.fd6, r.probe = -1, -1, -1
}

// source returns the outer source address for dst: local_ip, or the
// kernel's choice, cached. now is read lazily once per batch.
func (p *Port) source(r *rawTx, dst *[16]byte, now *int64) ([16]byte, bool) {
	if p.opt.Local.IsValid() {
		return p.local, true
	}
	h := uint32(binary.BigEndian.Uint32(dst[12:])) ^ uint32(binary.BigEndian.Uint32(dst[8:]))
	e := &r.routes[(h^h>>8^h>>16)%routeSlots]
	if *now == 0 {
		*now = time.Now().UnixNano()
	}
	if e.ok && e.dst == *dst && *now < e.expires {
		return e.src, true
	}
	// A miss: one connect and getsockname (rare: once per destination per
	// routeTTL), so a route change is followed within a second.
	e.ok = false
	if err := unix.Connect(r.probe, &unix.SockaddrInet6{Port: int(p.opt.DstPort), Addr: *dst}); err != nil {
		return [16]byte{}, false
	}
	sa, err := unix.Getsockname(r.probe)
	s6, ok := sa.(*unix.SockaddrInet6)
	if err != nil || !ok {
		return [16]byte{}, false
	}
	*e = route{dst: *dst, src: s6.Addr, expires: *now + int64(routeTTL), ok: true}
	return e.src, true
}

// flowHash is the inner flow's hash for the outer source port: the PMD's
// hash when it computed one, else the key's, else the Ethernet addresses'.
func flowHash(pkt *packet.Packet) uint32 {
	switch {
	case pkt.HashValid:
		return pkt.Hash
	case pkt.KeyValid:
		return pkt.Key.Hash()
	}
	d := pkt.Data()
	if len(d) < 12 {
		return 0
	}
	x := binary.LittleEndian.Uint64(d[0:8]) ^ uint64(binary.LittleEndian.Uint32(d[8:12]))<<17
	x *= 0x9e3779b97f4a7c15
	return uint32(x >> 32)
}

func csumAdd(a, b uint16) uint16 {
	s := uint32(a) + uint32(b)
	return uint16(s&0xffff + s>>16)
}

// buildOuter writes the outer IP, UDP and tunnel headers for an inner frame
// of n bytes into h and returns their length. The IPv4 header checksum,
// total length and ID are the kernel's (IP_HDRINCL fills them).
func (p *Port) buildOuter(h *[maxOuter]byte, src, dst *[16]byte, key hdrKey, m *netdev.TunnelOption, hash uint32, inner []byte) int {
	tos, ttl := p.outerTOSTTL(inner)
	o := &p.opt
	var th [maxHdrLen]byte
	thl := encapHeader(o.Kind, &th, key, m)
	udpLen := 8 + thl + len(inner)
	sport := uint16(srcPortMin + (uint64(hash)*(srcPortMax-srcPortMin))>>32)
	var ipl int
	var pseudo uint16
	if isV4(dst) {
		ipl = 20
		h[0], h[1] = 0x45, tos
		binary.BigEndian.PutUint16(h[2:], uint16(ipl+udpLen))
		h[4], h[5], h[6], h[7] = 0, 0, 0, 0
		if !o.NoDF {
			h[6] = 0x40
		}
		h[8], h[9], h[10], h[11] = ttl, unix.IPPROTO_UDP, 0, 0
		copy(h[12:16], src[12:])
		copy(h[16:20], dst[12:])
		if o.Csum {
			var ph [12]byte
			copy(ph[0:8], h[12:20])
			ph[9] = unix.IPPROTO_UDP
			binary.BigEndian.PutUint16(ph[10:], uint16(udpLen))
			pseudo = vnethdr.Sum(ph[:])
		}
	} else {
		ipl = 40
		label := hash & 0xfffff // RFC 6438: the flow label from the inner flow
		binary.BigEndian.PutUint32(h[0:], 6<<28|uint32(tos)<<20|label)
		binary.BigEndian.PutUint16(h[4:], uint16(udpLen))
		h[6], h[7] = unix.IPPROTO_UDP, ttl
		copy(h[8:24], src[:])
		copy(h[24:40], dst[:])
		var ph [8]byte
		binary.BigEndian.PutUint32(ph[0:], uint32(udpLen))
		ph[7] = unix.IPPROTO_UDP
		pseudo = csumAdd(vnethdr.Sum(h[8:40]), vnethdr.Sum(ph[:]))
	}
	u := h[ipl:]
	binary.BigEndian.PutUint16(u[0:], sport)
	binary.BigEndian.PutUint16(u[2:], o.DstPort)
	binary.BigEndian.PutUint16(u[4:], uint16(udpLen))
	u[6], u[7] = 0, 0
	copy(u[8:], th[:thl])
	if ipl == 40 || o.Csum {
		c := ^csumAdd(pseudo, csumAdd(vnethdr.Sum(u[:8+thl]), vnethdr.Sum(inner)))
		if c == 0 {
			c = 0xffff // 0 means "no checksum"
		}
		binary.BigEndian.PutUint16(u[6:], c)
	}
	return ipl + 8 + thl
}

// target is where pkt goes: the outer destination and the header (VNI,
// option m when it carries it), or false when a remote_ip=flow port has no
// destination in the packet.
func (p *Port) target(pkt *packet.Packet, m *netdev.TunnelOption) (*[16]byte, hdrKey, bool) {
	key := p.hdrKey(pkt, m)
	if p.opt.Remote.IsValid() {
		return &p.remote.Addr, key, true
	}
	if !pkt.KeyValid || pkt.Key.Tun.Dst == ([16]byte{}) {
		return nil, 0, false
	}
	return &pkt.Key.Tun.Dst, key, true
}

// sendRaw is Send on the raw path; runs of equal-size packets to one
// destination go as one segmented send instead (gso.go).
func (p *Port) sendRaw(q int, b *packet.Batch) int {
	tq := &p.tx[q]
	r := &tq.raw
	ctr, causes := &p.ctr[q], &p.causes[q]
	var now int64
	n := 0
	var drops, bytes uint64
	var lens [packet.BatchSize]int
	sent := 0
	pkts := b.Packets()
	noGSO := 0 // packets before this index went back from a refused run
	m := p.optMap.Load()
	for i := 0; i < len(pkts); i++ {
		pkt := pkts[i]
		dst, key, ok := p.target(pkt, m)
		if !ok {
			causes.n[CauseNoRemote].Add(1)
			drops++
			continue
		}
		d := pkt.Data()
		if pkt.GSO() && tq.gso.open {
			// What is queued goes first: the order holds.
			s, dr, by := p.flushRaw(q, n, &lens)
			sent, drops, bytes, n = sent+s, drops+dr, bytes+by, 0
			// A frame not sent whole is one drop (the causes count
			// its datagrams).
			if ok, _ := p.sendSuper(q, pkt, dst, key, m); ok {
				sent++
				bytes += uint64(len(d))
			} else {
				drops++
			}
			continue
		}
		if tq.gso.on && i >= noGSO && len(d) > 0 {
			if k := p.gsoRun(pkts[i:], dst, key, m); k >= 2 {
				// What is queued goes first: the order holds.
				s, dr, by := p.flushRaw(q, n, &lens)
				sent, drops, bytes, n = sent+s, drops+dr, bytes+by, 0
				if ok, s, by, dr := p.sendGSO(q, pkts[i:i+k], dst, key, m); ok {
					sent, bytes, drops = sent+s, bytes+by, drops+dr
					i += k - 1
					continue
				}
				noGSO = i + k
			}
		}
		src, ok := p.source(r, dst, &now)
		if !ok || len(d) == 0 {
			causes.n[CauseNoRoute].Add(1)
			drops++
			continue
		}
		hl := p.buildOuter(&r.outer[n], &src, dst, key, m, flowHash(pkt), d)
		tq.iovs[n][0].Base = &r.outer[n][0]
		tq.iovs[n][0].SetLen(hl)
		tq.iovs[n][1].Base = &d[0]
		tq.iovs[n][1].SetLen(len(d))
		m := &tq.msgs[n].hdr
		r.v4[n] = isV4(dst)
		if r.v4[n] {
			r.sa4[n] = unix.RawSockaddrInet4{Family: unix.AF_INET, Addr: [4]byte(dst[12:])}
			m.Name = (*byte)(unsafe.Pointer(&r.sa4[n]))
			m.Namelen = unix.SizeofSockaddrInet4
		} else {
			tq.names[n] = unix.RawSockaddrInet6{Family: unix.AF_INET6, Addr: *dst}
			m.Name = (*byte)(unsafe.Pointer(&tq.names[n]))
			m.Namelen = unix.SizeofSockaddrInet6
		}
		m.Iov = &tq.iovs[n][0]
		m.SetIovlen(2)
		m.Control = nil
		m.SetControllen(0)
		lens[n] = len(d)
		n++
	}
	s, dr, by := p.flushRaw(q, n, &lens)
	sent, drops, bytes = sent+s, drops+dr, bytes+by
	ctr.CountTx(sent, bytes, drops)
	return sent
}

// flushRaw sends the first n prepared messages of queue q, a run of one
// address family per sendmmsg, and returns how many went, how many were
// dropped (counted by cause) and the inner bytes sent.
func (p *Port) flushRaw(q, n int, lens *[packet.BatchSize]int) (sent int, drops, bytes uint64) {
	tq := &p.tx[q]
	r := &tq.raw
	causes := &p.causes[q]
	for off := 0; off < n; {
		end := off + 1
		for end < n && r.v4[end] == r.v4[off] {
			end++
		}
		fd := r.fd6
		if r.v4[off] {
			fd = r.fd4
		}
		got, failed, cause := sendmmsg(fd, tq.msgs[off:end])
		tq.kicks.Add(1)
		for i := off; i < off+got; i++ {
			bytes += uint64(lens[i])
		}
		sent += got
		if failed > 0 {
			causes.n[cause].Add(uint64(failed))
			drops += uint64(failed)
		}
		off += got + failed
	}
	return sent, drops, bytes
}

// sendmmsg sends msgs and returns how many went, and how many failed
// (with the cause) before the next call can make progress: a message the
// kernel refused, or with a full socket buffer the rest. got+failed > 0
// unless msgs is empty.
func sendmmsg(fd int, msgs []mmsghdr) (got, failed int, cause Cause) {
	for {
		r, _, e := unix.Syscall6(unix.SYS_SENDMMSG, uintptr(fd), uintptr(unsafe.Pointer(&msgs[0])), uintptr(len(msgs)),
			unix.MSG_DONTWAIT, 0, 0)
		switch e {
		case 0:
			return int(r), 0, 0
		case unix.EINTR:
			continue
		case unix.EMSGSIZE:
			return 0, 1, CauseMTU
		case unix.ENETUNREACH, unix.EHOSTUNREACH, unix.EADDRNOTAVAIL:
			return 0, 1, CauseNoRoute
		case unix.EAGAIN, unix.ENOBUFS:
			return 0, len(msgs), CauseTxError
		}
		return 0, 1, CauseTxError
	}
}

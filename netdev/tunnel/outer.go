package tunnel

import (
	"encoding/binary"
	"unsafe"

	"github.com/vswitch-go/vswitch/datapath/header"
	"golang.org/x/sys/unix"
)

// Outer TOS and TTL per packet. The outer header's TOS (IPv6 traffic
// class) and TTL (hop limit) come from the port's tos and ttl options: a
// number, or "inherit", which takes the inner IPv4/IPv6 packet's DSCP or
// TTL (a non-IP frame gets the default: TOS 0, TTL 64), as in Open
// vSwitch. ECN follows RFC 6040's normal mode as Open vSwitch and Linux
// apply it whatever the tos option says: an inner packet that is ECN
// capable (ECT(0), ECT(1)) passes its codepoint to the outer header, so
// that congestion marked on the underlay reaches the receiver; CE goes out
// as ECT(0), so that a mark made before the tunnel is not attributed to
// the underlay; a not-ECT inner packet leaves the outer ECN bits as the
// tos option has them.

const (
	ecnMask = 0x03
	ecnECT0 = 0x02
	ecnCE   = 0x03
)

// innerIP returns the TOS (traffic class) and TTL (hop limit) of the IPv4
// or IPv6 packet inside an Ethernet frame, behind up to two VLAN tags.
func innerIP(d []byte) (tos, ttl uint8, ok bool) {
	off := 12
	for range 3 {
		if len(d) < off+2 {
			return 0, 0, false
		}
		switch binary.BigEndian.Uint16(d[off:]) {
		case header.EtherTypeVLAN, header.EtherTypeQinQ, header.EtherTypeQinQOld:
			off += 4
			continue
		case header.EtherTypeIPv4:
			ip := d[off+2:]
			if len(ip) < 20 || ip[0]>>4 != 4 {
				return 0, 0, false
			}
			return ip[1], ip[8], true
		case header.EtherTypeIPv6:
			ip := d[off+2:]
			if len(ip) < 40 || ip[0]>>4 != 6 {
				return 0, 0, false
			}
			return ip[0]<<4 | ip[1]>>4, ip[7], true
		}
		return 0, 0, false
	}
	return 0, 0, false
}

// outerTOSTTL is the outer TOS and TTL for the inner frame d.
func (p *Port) outerTOSTTL(d []byte) (tos, ttl uint8) {
	o := &p.opt
	tos, ttl = o.TOS, o.TTL
	itos, ittl, ok := innerIP(d)
	if !ok {
		return tos, ttl
	}
	if o.TOSInherit {
		tos = itos &^ ecnMask
	}
	if o.TTLInherit && ittl != 0 {
		ttl = ittl
	}
	switch itos & ecnMask {
	case 0:
	case ecnCE:
		tos = tos&^ecnMask | ecnECT0
	default:
		tos = tos&^ecnMask | itos&ecnMask
	}
	return tos, ttl
}

// tosTTLCtrl writes control messages setting a datagram's TOS and TTL
// into b (which must hold tosTTLCtrlLen bytes) and returns their length:
// for a send on the UDP sockets (df_default=false, segmented runs) whose
// values differ from the socket's. An IPv4 destination on the dual-stack
// socket takes the IPv4 forms, which the kernel's IPv4 send path reads.
func tosTTLCtrl(b []byte, v4 bool, tos, ttl uint8) int {
	level, tosType, ttlType := unix.IPPROTO_IPV6, unix.IPV6_TCLASS, unix.IPV6_HOPLIMIT
	if v4 {
		level, tosType, ttlType = unix.IPPROTO_IP, unix.IP_TOS, unix.IP_TTL
	}
	n := 0
	for _, c := range [2][2]int{{tosType, int(tos)}, {ttlType, int(ttl)}} {
		h := (*unix.Cmsghdr)(unsafe.Pointer(&b[n]))
		h.Level, h.Type = int32(level), int32(c[0])
		h.SetLen(unix.SizeofCmsghdr + 4)
		binary.NativeEndian.PutUint32(b[n+unix.SizeofCmsghdr:], uint32(c[1]))
		n += cmsgAlign(unix.SizeofCmsghdr + 4)
	}
	return n
}

// tosTTLCtrlLen is the room tosTTLCtrl needs.
const tosTTLCtrlLen = 2 * (unix.SizeofCmsghdr + 8)

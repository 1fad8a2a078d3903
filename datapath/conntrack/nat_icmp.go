package conntrack

import (
	"encoding/binary"

	"github.com/vswitch-go/vswitch/datapath/header"
	"github.com/vswitch-go/vswitch/datapath/packet"
)

// natRelated translates an ICMP error about a packet of c, which NAT
// translated, as Open vSwitch does: the packet it quotes becomes the
// packet its sender sent (addresses, ports or query identifier, checksums),
// and the outer address NAT stands in for is translated as a packet going
// the error's way would be. reply says the error travels c's reply
// direction (it quotes a packet of the original one). The ICMP checksum,
// which covers the quoted packet, is computed afresh. c.mu is held.
func (c *Conn) natRelated(pkt *packet.Packet, reply bool) {
	d := pkt.Data()
	l3, l4 := int(pkt.Offsets.L3), int(pkt.Offsets.L4)
	v6 := c.orig.IPv6
	end := ipEnd(d, l3, v6)
	if end < l4+8 || end > len(d) {
		return
	}
	// What the quoted packet must say, and the outer addresses.
	want := &c.reply
	outerSrc, outerDst := (*[16]byte)(nil), (*[16]byte)(nil)
	if reply {
		want = &c.orig
		if c.nat&natSrc != 0 {
			outerDst = &c.orig.Src
		}
		if c.nat&natDst != 0 {
			outerSrc = &c.orig.Dst
		}
	} else {
		if c.nat&natSrc != 0 {
			outerSrc = &c.reply.Dst
		}
		if c.nat&natDst != 0 {
			outerDst = &c.reply.Src
		}
	}
	if !rewriteQuoted(d[l4+8:end], v6, want) {
		return
	}
	k := &pkt.Key
	if v6 {
		if outerSrc != nil {
			copy(d[l3+header.IPv6SrcOff:], outerSrc[:])
			k.IPv6Src = *outerSrc
		}
		if outerDst != nil {
			copy(d[l3+header.IPv6DstOff:], outerDst[:])
			k.IPv6Dst = *outerDst
		}
	} else {
		if outerSrc != nil {
			copy(d[l3+header.IPv4SrcOff:], outerSrc[12:])
			k.IPv4Src = binary.BigEndian.Uint32(outerSrc[12:])
		}
		if outerDst != nil {
			copy(d[l3+header.IPv4DstOff:], outerDst[12:])
			k.IPv4Dst = binary.BigEndian.Uint32(outerDst[12:])
		}
		header.SetIPv4Checksum(d[l3:])
	}
	icmp := d[l4:end]
	icmp[2], icmp[3] = 0, 0
	var sum uint32
	if v6 {
		// The pseudo-header: both addresses, the length, the next header.
		sum = header.CsumSum(uint32(len(icmp))+header.IPProtoICMPv6, d[l3+header.IPv6SrcOff:l3+header.IPv6SrcOff+32])
	}
	binary.BigEndian.PutUint16(icmp[2:], ^header.CsumFold(header.CsumSum(sum, icmp)))
}

// ipEnd is where the IP packet at l3 ends by its own length.
func ipEnd(d []byte, l3 int, v6 bool) int {
	if v6 {
		if l3+header.IPv6Len > len(d) {
			return -1
		}
		return l3 + header.IPv6Len + int(binary.BigEndian.Uint16(d[l3+header.IPv6PayloadLenOff:]))
	}
	if l3+header.IPv4MinLen > len(d) {
		return -1
	}
	return l3 + int(binary.BigEndian.Uint16(d[l3+header.IPv4TotalLenOff:]))
}

// rewriteQuoted makes the packet b quotes (its IP header and what follows,
// as much as the error carries) have tuple t's addresses and ports (or
// query identifier), with its IPv4 header checksum and, when quoted, its
// transport checksum kept right.
func rewriteQuoted(b []byte, v6 bool, t *Tuple) bool {
	var l4 []byte
	var oldAddrs, newAddrs []byte
	if v6 {
		if len(b) < header.IPv6Len {
			return false
		}
		oldAddrs = append([]byte(nil), b[header.IPv6SrcOff:header.IPv6SrcOff+32]...)
		copy(b[header.IPv6SrcOff:], t.Src[:])
		copy(b[header.IPv6DstOff:], t.Dst[:])
		newAddrs = b[header.IPv6SrcOff : header.IPv6SrcOff+32]
		l4 = b[header.IPv6Len:]
	} else {
		ihl := int(b[0]&0x0f) * 4
		if len(b) < header.IPv4MinLen || ihl < header.IPv4MinLen || len(b) < ihl {
			return false
		}
		oldAddrs = append([]byte(nil), b[header.IPv4SrcOff:header.IPv4SrcOff+8]...)
		copy(b[header.IPv4SrcOff:], t.Src[12:])
		copy(b[header.IPv4DstOff:], t.Dst[12:])
		newAddrs = b[header.IPv4SrcOff : header.IPv4SrcOff+8]
		header.SetIPv4Checksum(b)
		l4 = b[ihl:]
	}
	if len(l4) < 4 {
		return true
	}
	oldPorts := append([]byte(nil), l4[:4]...)
	csumAt := -1
	switch t.Proto {
	case header.IPProtoTCP:
		csumAt = 16
	case header.IPProtoUDP:
		csumAt = 6
	case header.IPProtoICMP, header.IPProtoICMPv6:
		if len(l4) < 8 {
			return true
		}
		old := binary.BigEndian.Uint16(l4[4:])
		binary.BigEndian.PutUint16(l4[4:], t.SrcPort)
		delta := header.CsumDelta(0, old, t.SrcPort)
		if t.Proto == header.IPProtoICMPv6 { // the pseudo-header's addresses
			delta = header.CsumDeltaBytes(delta, oldAddrs, newAddrs)
		}
		header.AdjustField(l4, 2, delta)
		return true
	}
	binary.BigEndian.PutUint16(l4[0:], t.SrcPort)
	binary.BigEndian.PutUint16(l4[2:], t.DstPort)
	if csumAt >= 0 && len(l4) >= csumAt+2 && !(t.Proto == header.IPProtoUDP && l4[6] == 0 && l4[7] == 0) {
		header.AdjustField(l4, csumAt, header.CsumDeltaBytes(header.CsumDeltaBytes(0, oldAddrs, newAddrs), oldPorts, l4[:4]))
	}
	return true
}

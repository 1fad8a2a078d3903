package nstest

import (
	"encoding/binary"
	"net"
)

// UnusedMAC is a unicast address no test host has: a flood sent to it
// crosses the switch and is counted by the far interface, whose stack then
// drops it without answering.
var UnusedMAC = net.HardwareAddr{0x02, 0, 0xc6, 0x12, 0, 0x99}

// Checksum returns the folded one's-complement sum of b added to sum (not
// inverted), so a pseudo-header sum can be chained into the L4 sum and a
// correct header or datagram checks to 0xffff.
func Checksum(b []byte, sum uint32) uint16 {
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return uint16(sum)
}

// Tag is one VLAN tag as it stands in a frame.
type Tag struct{ TPID, TCI uint16 }

// Dot1Q is an 802.1Q (customer) tag with tci (priority<<13 | VLAN id).
func Dot1Q(tci uint16) Tag { return Tag{TPID: 0x8100, TCI: tci} }

// Dot1AD is an 802.1ad (service, QinQ outer) tag with tci.
func Dot1AD(tci uint16) Tag { return Tag{TPID: 0x88a8, TCI: tci} }

// UDP describes an Ethernet/IPv4/UDP test frame.
type UDP struct {
	Dst, Src         net.HardwareAddr
	SrcIP, DstIP     net.IP
	SrcPort, DstPort uint16
	// Tags go between the source MAC and the IPv4 EtherType, outermost
	// first.
	Tags []Tag
	// Payload defaults to 18 zero bytes: the size that makes an untagged
	// frame the 60-byte Ethernet minimum, so no padding is needed.
	Payload []byte
	// PartialChecksum leaves only the pseudo-header sum in the UDP
	// checksum field, as Linux hands over a CHECKSUM_PARTIAL frame; send
	// it with VnetHeader so the receiver completes it.
	PartialChecksum bool
}

// Frame builds the frame with a valid IPv4 header checksum and a complete
// UDP checksum (unless PartialChecksum), zero-padded to 60 bytes if short.
func (u UDP) Frame() []byte {
	payload := u.Payload
	if payload == nil {
		payload = make([]byte, 18)
	}
	udpLen := 8 + len(payload)
	f := make([]byte, 0, 14+4*len(u.Tags)+20+udpLen)
	f = append(f, u.Dst[:6]...)
	f = append(f, u.Src[:6]...)
	for _, tg := range u.Tags {
		f = binary.BigEndian.AppendUint16(f, tg.TPID)
		f = binary.BigEndian.AppendUint16(f, tg.TCI)
	}
	f = binary.BigEndian.AppendUint16(f, 0x0800)
	l3 := len(f)
	f = append(f, make([]byte, 20+8)...)
	f = append(f, payload...)
	ip := f[l3 : l3+20]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(20+udpLen))
	ip[8] = 64
	ip[9] = 17
	copy(ip[12:16], u.SrcIP.To4())
	copy(ip[16:20], u.DstIP.To4())
	binary.BigEndian.PutUint16(ip[10:], ^Checksum(ip, 0))
	udp := f[l3+20:]
	binary.BigEndian.PutUint16(udp[0:], u.SrcPort)
	binary.BigEndian.PutUint16(udp[2:], u.DstPort)
	binary.BigEndian.PutUint16(udp[4:], uint16(udpLen))
	ps := Checksum(ip[12:20], uint32(17+udpLen))
	if u.PartialChecksum {
		binary.BigEndian.PutUint16(udp[6:], ps)
	} else {
		c := ^Checksum(udp, uint32(ps))
		if c == 0 {
			c = 0xffff // 0 would mean "no checksum"
		}
		binary.BigEndian.PutUint16(udp[6:], c)
	}
	for len(f) < 60 {
		f = append(f, 0)
	}
	return f
}

// VnetHeader returns the 10-byte virtio_net_hdr to send Frame with on a
// PACKET_VNET_HDR socket: all zero, or, for a partial checksum, the
// NEEDS_CSUM request pointing at the UDP checksum field.
func (u UDP) VnetHeader() []byte {
	vh := make([]byte, 10)
	if u.PartialChecksum {
		vh[0] = 1 // VIRTIO_NET_HDR_F_NEEDS_CSUM
		binary.LittleEndian.PutUint16(vh[6:], uint16(14+4*len(u.Tags)+20))
		binary.LittleEndian.PutUint16(vh[8:], 6)
	}
	return vh
}

// UDPFrame is the common case of UDP.Frame: a 60-byte untagged frame with
// an 18-byte zero payload.
func UDPFrame(dst, src net.HardwareAddr, sip, dip net.IP, sport, dport uint16) []byte {
	return UDP{Dst: dst, Src: src, SrcIP: sip, DstIP: dip, SrcPort: sport, DstPort: dport}.Frame()
}

// SeqPayload is the default 18-byte payload with seq in its first four
// bytes (big endian), so a receiver can tell frames apart and see their
// order (ReadSeq reads it back).
func SeqPayload(seq uint32) []byte {
	p := make([]byte, 18)
	binary.BigEndian.PutUint32(p, seq)
	return p
}

// InsertTag returns a copy of f with tag put in front of its outermost
// EtherType (or outermost tag), as a tagged sender or tcpdump shows it.
func InsertTag(f []byte, tag Tag) []byte {
	out := make([]byte, 0, len(f)+4)
	out = append(out, f[:12]...)
	out = binary.BigEndian.AppendUint16(out, tag.TPID)
	out = binary.BigEndian.AppendUint16(out, tag.TCI)
	return append(out, f[12:]...)
}

// FrameTags returns the 802.1Q and 802.1ad tags at the start of f,
// outermost first.
func FrameTags(f []byte) []Tag {
	var tags []Tag
	for off := 12; off+4 <= len(f); off += 4 {
		tpid := binary.BigEndian.Uint16(f[off:])
		if tpid != 0x8100 && tpid != 0x88a8 {
			break
		}
		tags = append(tags, Tag{TPID: tpid, TCI: binary.BigEndian.Uint16(f[off+2:])})
	}
	return tags
}

// StripTags returns f without its VLAN tags (a copy if it had any).
func StripTags(f []byte) []byte {
	n := len(FrameTags(f))
	if n == 0 {
		return f
	}
	return append(f[:12:12], f[12+4*n:]...)
}

// EqualTags reports whether two tag stacks are the same.
func EqualTags(a, b []Tag) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// L3Offset returns where the IPv4 header of a (possibly tagged) frame
// starts, or 0 if the frame is not IPv4.
func L3Offset(f []byte) int {
	off := 12
	for off+2 <= len(f) {
		switch binary.BigEndian.Uint16(f[off:]) {
		case 0x8100, 0x88a8:
			off += 4
		case 0x0800:
			return off + 2
		default:
			return 0
		}
	}
	return 0
}

// UDPPorts returns the ports of a (possibly tagged) IPv4/UDP frame with a
// 20-byte IP header; ok is false for any other frame.
func UDPPorts(f []byte) (sport, dport uint16, ok bool) {
	off := L3Offset(f)
	if off == 0 || len(f) < off+28 || f[off] != 0x45 || f[off+9] != 17 {
		return 0, 0, false
	}
	return binary.BigEndian.Uint16(f[off+20:]), binary.BigEndian.Uint16(f[off+22:]), true
}

// ReadSeq returns the sequence number SeqPayload put into a (possibly
// tagged) IPv4/UDP frame.
func ReadSeq(f []byte) (uint32, bool) {
	if _, _, ok := UDPPorts(f); !ok {
		return 0, false
	}
	off := L3Offset(f) + 28
	if len(f) < off+4 {
		return 0, false
	}
	return binary.BigEndian.Uint32(f[off:]), true
}

// UDPChecksumOK verifies the UDP checksum of a (possibly tagged) IPv4
// frame.
func UDPChecksumOK(f []byte) bool {
	off := L3Offset(f)
	if off == 0 || len(f) < off+28 {
		return false
	}
	ip := f[off : off+20]
	l := int(binary.BigEndian.Uint16(ip[2:])) - 20
	if l < 8 || len(f) < off+20+l {
		return false
	}
	udp := f[off+20 : off+20+l]
	ps := Checksum(ip[12:20], uint32(17+l))
	return Checksum(udp, uint32(ps)) == 0xffff
}

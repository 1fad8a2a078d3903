package actions

import (
	"encoding/binary"

	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/datapath/header"
	"github.com/vswitch-go/vswitch/datapath/packet"
)

// Set-field rewrites OpenFlow 1.3 adds beyond Open vSwitch's usual set
// actions: IPv6 flow label, ARP, neighbour discovery, ICMP type and code,
// and the tunnel ID metadata.

// ndLLOptionLen is the length of an ND option carrying an Ethernet address.
const ndLLOptionLen = 8

// setIPv6Label rewrites the 20-bit flow label.
func setIPv6Label(p *packet.Packet, label uint32) {
	d, l3, ok := ipv6Header(p)
	if !ok {
		return
	}
	label &= 0xfffff
	d[l3+1] = d[l3+1]&0xf0 | byte(label>>16)
	d[l3+2], d[l3+3] = byte(label>>8), byte(label)
	p.Key.IPv6Label = label
}

// arpBody returns the frame and the offset of an Ethernet/IPv4 ARP body,
// the only kind whose fields the key (and so OpenFlow) describes.
func arpBody(p *packet.Packet) (d []byte, l3 int, ok bool) {
	if p.Key.EthType != header.EtherTypeARP || p.Offsets.L3 == flow.NoOffset {
		return nil, 0, false
	}
	d = p.Data()
	l3 = int(p.Offsets.L3)
	if l3+header.ARPLen > len(d) {
		return nil, 0, false
	}
	h := d[l3:]
	if binary.BigEndian.Uint16(h[0:]) != 1 || binary.BigEndian.Uint16(h[2:]) != header.EtherTypeIPv4 || h[4] != 6 || h[5] != 4 {
		return nil, 0, false
	}
	return d, l3, true
}

// setARPOp writes the opcode; the key holds it in NwProto only when it fits
// a byte, as extraction does.
func setARPOp(p *packet.Packet, op uint16) {
	d, l3, ok := arpBody(p)
	if !ok {
		return
	}
	binary.BigEndian.PutUint16(d[l3+header.ARPOpOff:], op)
	p.Key.NwProto = 0
	if op <= 0xff {
		p.Key.NwProto = uint8(op)
	}
}

// setARPProto writes a protocol address at body offset off (14 sender, 24
// target).
func setARPProto(p *packet.Packet, off int, keyField *uint32, addr *[16]byte) {
	d, l3, ok := arpBody(p)
	if !ok {
		return
	}
	copy(d[l3+off:l3+off+4], addr[:4])
	*keyField = binary.BigEndian.Uint32(addr[:4])
}

// setARPHW writes a hardware address at body offset off (8 sender, 18
// target).
func setARPHW(p *packet.Packet, off int, keyField *[6]byte, addr *[16]byte) {
	d, l3, ok := arpBody(p)
	if !ok {
		return
	}
	copy(d[l3+off:l3+off+6], addr[:6])
	*keyField = [6]byte(addr[:6])
}

// ndMessage returns the frame, the offset of a neighbour solicitation or
// advertisement and where its IPv6 payload ends, when the packet has one
// with its target address in the frame.
func ndMessage(p *packet.Packet) (d []byte, l4, end int, ok bool) {
	if p.Key.EthType != header.EtherTypeIPv6 || p.Key.NwProto != header.IPProtoICMPv6 ||
		p.Offsets.L3 == flow.NoOffset || p.Offsets.L4 == flow.NoOffset || p.Key.NwFrag&flow.FragLater != 0 {
		return nil, 0, 0, false
	}
	d = p.Data()
	l4 = int(p.Offsets.L4)
	end = ipPayloadEnd(p, d)
	if l4+header.NDOptionsOff > end || (d[l4] != header.ICMPv6NeighborSolicit && d[l4] != header.ICMPv6NeighborAdvert) || d[l4+header.ICMPCodeOff] != 0 {
		return nil, 0, 0, false
	}
	return d, l4, end, true
}

// writeICMPv6 overwrites field (an even-length, evenly aligned part of the
// ICMPv6 message at l4) with val and updates the checksum. The key's ND
// fields depend on every option (a malformed one clears them all), so the
// frame is parsed again rather than patched.
func writeICMPv6(p *packet.Packet, d []byte, l4 int, field, val []byte) {
	acc := header.CsumDeltaBytes(0, field, val)
	copy(field, val)
	header.AdjustField(d, l4+header.ICMPChecksumOff, acc)
	reextract(p)
}

// setNDTarget rewrites the target address.
func setNDTarget(p *packet.Packet, addr *[16]byte) {
	d, l4, _, ok := ndMessage(p)
	if !ok {
		return
	}
	writeICMPv6(p, d, l4, d[l4+header.NDTargetOff:l4+header.NDOptionsOff], addr[:])
}

// setNDLL rewrites the Ethernet address in the first source (want
// header.NDOptSourceLLAddr, solicitations) or target (header.NDOptTargetLLAddr, advertisements)
// link-layer option. Options are walked as extraction walks them: a
// zero-length or cut option ends the walk.
func setNDLL(p *packet.Packet, want uint8, addr *[16]byte) {
	d, l4, end, ok := ndMessage(p)
	if !ok || (want == header.NDOptSourceLLAddr) != (d[l4] == header.ICMPv6NeighborSolicit) {
		return
	}
	for o := l4 + header.NDOptionsOff; o+2 <= end; {
		n := int(d[o+1]) * 8
		if n == 0 || o+n > end {
			return
		}
		if d[o] == want && n == ndLLOptionLen {
			writeICMPv6(p, d, l4, d[o+2:o+8], addr[:6])
			return
		}
		o += n
	}
}

// setICMP rewrites the ICMPv4 or ICMPv6 type (at byte 0) or code (byte 1)
// of the message at L4.
func setICMP(p *packet.Packet, at int, val uint8) {
	v6 := false
	switch {
	case p.Key.EthType == header.EtherTypeIPv4 && p.Key.NwProto == header.IPProtoICMP:
	case p.Key.EthType == header.EtherTypeIPv6 && p.Key.NwProto == header.IPProtoICMPv6:
		v6 = true
	default:
		return
	}
	if p.Offsets.L4 == flow.NoOffset || p.Key.NwFrag&flow.FragLater != 0 {
		return
	}
	d := p.Data()
	l4 := int(p.Offsets.L4)
	if l4+4 > len(d) {
		return
	}
	old := binary.BigEndian.Uint16(d[l4:])
	d[l4+at] = val
	nw := binary.BigEndian.Uint16(d[l4:])
	header.AdjustField(d, l4+header.ICMPChecksumOff, header.CsumDelta(0, old, nw))
	if v6 && (isNDTypeCode(old) || isNDTypeCode(nw)) {
		// The message turns into or out of neighbour discovery, whose
		// body the key reads.
		reextract(p)
		return
	}
	p.Key.TpSrc, p.Key.TpDst = uint16(d[l4+header.ICMPTypeOff]), uint16(d[l4+header.ICMPCodeOff])
}

// setICMPID writes the identifier of an ICMP query or query reply (echo,
// timestamp, information, address mask; ICMPv6 echo), whose identifier is
// its first four bytes after the checksum; other messages are left alone.
func setICMPID(p *packet.Packet, id uint16) {
	v6 := p.Key.EthType == header.EtherTypeIPv6
	if !(p.Key.NwProto == header.IPProtoICMP && !v6 || p.Key.NwProto == header.IPProtoICMPv6 && v6) ||
		p.Offsets.L4 == flow.NoOffset || p.Key.NwFrag&flow.FragLater != 0 {
		return
	}
	d := p.Data()
	l4 := int(p.Offsets.L4)
	if l4+8 > len(d) {
		return
	}
	query := false
	switch t := d[l4]; {
	case v6:
		query = t == 128 || t == 129
	default:
		query = t == 0 || t == 8 || t >= 13 && t <= 18
	}
	if !query {
		return
	}
	old := binary.BigEndian.Uint16(d[l4+4:])
	if old == id {
		return
	}
	binary.BigEndian.PutUint16(d[l4+4:], id)
	header.AdjustField(d, l4+header.ICMPChecksumOff, header.CsumDelta(0, old, id))
}

// isNDTypeCode reports whether an ICMPv6 type/code word is one extraction
// parses as neighbour discovery.
func isNDTypeCode(w uint16) bool {
	return w == header.ICMPv6NeighborSolicit<<8 || w == header.ICMPv6NeighborAdvert<<8
}

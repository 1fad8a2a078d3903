package actions

import (
	"encoding/binary"

	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/datapath/header"
	"github.com/vswitch-go/vswitch/datapath/packet"
)

// The set-fields OpenFlow 1.3 allows on the fields that say how the rest of
// the packet parses: the Ethernet type and the IP protocol. Both change
// what extraction sees beyond the byte written, so they parse the frame
// again.

// setEthType writes the Ethernet type behind every VLAN tag, unless the
// frame carries an 802.3 length there.
func setEthType(p *packet.Packet, typ uint16) {
	d := p.Data()
	pos := typeOffset(d)
	if pos < 0 || binary.BigEndian.Uint16(d[pos:]) < 0x0600 {
		return
	}
	binary.BigEndian.PutUint16(d[pos:], typ)
	reextract(p)
}

// ipv6ProtoOffset returns the offset of the next-header byte that names
// the transport protocol (the one extraction took for Key.NwProto) and
// where the transport header starts, or -1 when the chain ends otherwise
// (ESP, no next header, cut off).
func ipv6ProtoOffset(p *packet.Packet, d []byte, l3 int) (at, l4 int) {
	at = l3 + header.IPv6NextHeaderOff
	pos := l3 + header.IPv6Len
	end := ipPayloadEnd(p, d)
	for range 16 {
		switch d[at] {
		case header.IPProtoHopByHop, header.IPProtoRouting, header.IPProtoDstOpts:
			if pos+2 > end {
				return -1, 0
			}
			at, pos = pos, pos+(int(d[pos+1])+1)*8
		case header.IPProtoAH:
			if pos+2 > end {
				return -1, 0
			}
			at, pos = pos, pos+(int(d[pos+1])+2)*4
		case header.IPProtoFragment:
			if pos+8 > end {
				return -1, 0
			}
			at, pos = pos, pos+8
		case 50, 59: // ESP, no next header
			return -1, 0
		default:
			return at, pos
		}
	}
	return -1, 0
}

// setIPProto writes the IP protocol and makes the transport checksum right
// for the protocol the packet now carries.
func setIPProto(p *packet.Packet, proto uint8) {
	var l4 int
	if d, l3, ok := ipv4Header(p); ok {
		if d[l3+header.IPv4ProtoOff] == proto {
			return
		}
		ttl := uint16(d[l3+header.IPv4TTLOff]) << 8
		old := ttl | uint16(d[l3+header.IPv4ProtoOff])
		d[l3+header.IPv4ProtoOff] = proto
		adjustField(d, l3+header.IPv4ChecksumOff, csumDelta(0, old, ttl|uint16(proto)))
		l4 = l3 + int(d[l3]&0x0f)*4
	} else if d, l3, ok := ipv6Header(p); ok {
		at, pos := ipv6ProtoOffset(p, d, l3)
		if at < 0 || d[at] == proto {
			return
		}
		d[at] = proto
		l4 = pos
	} else {
		return
	}
	reextract(p)
	recomputeL4Checksum(p, l4)
}

// onesSum adds b to a one's-complement accumulator as big-endian 16-bit
// words (an odd last byte padded with zero).
func onesSum(acc uint32, b []byte) uint32 {
	for len(b) >= 2 {
		acc += uint32(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		acc += uint32(b[0]) << 8
	}
	return acc
}

func foldSum(acc uint32) uint16 {
	for acc>>16 != 0 {
		acc = acc&0xffff + acc>>16
	}
	return uint16(acc)
}

// recomputeL4Checksum computes the transport checksum of p's (freshly
// extracted) protocol, whose header starts at l4, from scratch. It does
// so whenever the checksum field is inside the datagram, also when the
// rest of the header is malformed as the new protocol (a TCP data offset
// below 5): the receiver's checksum check comes first. A fragment is left
// alone: its checksum covers the whole datagram, which one fragment does
// not hold.
func recomputeL4Checksum(p *packet.Packet, l4 int) {
	if p.Offsets.L3 == flow.NoOffset || p.Key.NwFrag&flow.FragAny != 0 {
		return
	}
	d := p.Data()
	l3 := int(p.Offsets.L3)
	end := ipPayloadEnd(p, d)
	if l4 > end {
		return
	}
	seg := d[l4:end]
	v6 := p.Key.EthType == header.EtherTypeIPv6
	field, pseudo := -1, true
	switch p.Key.NwProto {
	case header.IPProtoTCP:
		field = header.TCPChecksumOff
	case header.IPProtoUDP:
		field = header.UDPChecksumOff
	case header.IPProtoICMP:
		field, pseudo = header.ICMPChecksumOff, false
		if v6 {
			return
		}
	case header.IPProtoICMPv6:
		field = header.ICMPv6ChecksumOff
		if !v6 {
			return
		}
	case header.IPProtoSCTP:
		if len(seg) >= header.SCTPCommonLen {
			fixSCTPChecksum(p, d, l4)
		}
		return
	default:
		return
	}
	if field+2 > len(seg) {
		return
	}
	seg[field], seg[field+1] = 0, 0
	var acc uint32
	if pseudo {
		if v6 {
			acc = onesSum(acc, d[l3+header.IPv6SrcOff:l3+header.IPv6Len])
		} else {
			acc = onesSum(acc, d[l3+header.IPv4SrcOff:l3+header.IPv4MinLen])
		}
		acc += uint32(len(seg)>>16) + uint32(len(seg)&0xffff) + uint32(p.Key.NwProto)
	}
	c := ^foldSum(onesSum(acc, seg))
	if c == 0 && p.Key.NwProto == header.IPProtoUDP {
		c = 0xffff // zero would say "no checksum"
	}
	binary.BigEndian.PutUint16(seg[field:], c)
}

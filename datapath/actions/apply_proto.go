package actions

import (
	"encoding/binary"

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

// setIPProto writes the IP protocol. The transport header behind it stays
// as it is, so the only transport checksum that can be kept right is the
// one of the header that is actually there, the old protocol's: TCP's,
// UDP's (unless it is zero, "no checksum") and ICMPv6's cover a
// pseudo-header that holds the protocol number, so they get the change
// of that word. Writing where the new protocol keeps its checksum would
// corrupt the old header instead (UDP's offset is inside TCP's sequence
// number); a receiver that parses the bytes as the new protocol finds
// whatever they say, as after any other rewrite of this field.
func setIPProto(p *packet.Packet, proto uint8) {
	var old uint8
	d, l3, ok := ipv4Header(p)
	if ok {
		old = d[l3+header.IPv4ProtoOff]
		if old == proto {
			return
		}
		ttl := uint16(d[l3+header.IPv4TTLOff]) << 8
		d[l3+header.IPv4ProtoOff] = proto
		header.AdjustField(d, l3+header.IPv4ChecksumOff, header.CsumDelta(0, ttl|uint16(old), ttl|uint16(proto)))
	} else if d, l3, ok = ipv6Header(p); ok {
		at, _ := ipv6ProtoOffset(p, d, l3)
		if at < 0 || d[at] == proto {
			return
		}
		old = d[at]
		d[at] = proto
	} else {
		return
	}
	if c := pseudoChecksumOffset(p, d, old); c >= 0 {
		header.AdjustField(d, c, header.CsumDelta(0, uint16(old), uint16(proto)))
		if old == header.IPProtoUDP && d[c] == 0 && d[c+1] == 0 {
			d[c], d[c+1] = 0xff, 0xff // zero would say "no checksum"
		}
	}
	reextract(p)
}

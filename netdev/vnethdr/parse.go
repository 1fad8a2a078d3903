package vnethdr

import (
	"encoding/binary"

	"github.com/vswitch-go/vswitch/datapath/header"
)

// How deep the parser looks before giving up on a frame.
const (
	maxVLANTags    = 2
	maxIPv6ExtHdrs = 8
)

// parsed locates the IP and L4 headers of an Ethernet frame.
type parsed struct {
	l3off, l4off int
	// end is one past the last byte of the IP packet: from the IP length
	// when the parse trusts it, else the end of the frame.
	end      int
	ipv6     bool
	proto    uint8
	fragment bool // an IPv4 fragment or an IPv6 fragment header
	routed   bool // an IPv6 routing header with segments left
}

// parse fills p from frame and reports whether the headers up to the start
// of L4 are well formed. With trustLen the IP length fields bound the
// packet (and must be consistent with the frame); without, the packet runs
// to the end of the frame, because GSO super-frames may carry a length of
// 0 (BIG TCP) or one we have no reason to believe.
func (p *parsed) parse(frame []byte, trustLen bool) bool {
	if len(frame) < header.EthernetLen {
		return false
	}
	off := header.EthernetLen
	etype := binary.BigEndian.Uint16(frame[header.EthernetTypeOff:])
	for i := 0; i < maxVLANTags && (etype == header.EtherTypeVLAN || etype == header.EtherTypeQinQ || etype == header.EtherTypeQinQOld); i++ {
		if off+header.VLANTagLen > len(frame) {
			return false
		}
		etype = binary.BigEndian.Uint16(frame[off+2:]) // the type after the TCI
		off += header.VLANTagLen
	}
	p.l3off = off
	p.end = len(frame)
	p.fragment, p.routed = false, false
	switch etype {
	case header.EtherTypeIPv4:
		if off+header.IPv4MinLen > len(frame) || frame[off]>>4 != 4 {
			return false
		}
		ihl := int(frame[off]&0x0f) * 4
		if ihl < header.IPv4MinLen || off+ihl > len(frame) {
			return false
		}
		if trustLen {
			tot := int(binary.BigEndian.Uint16(frame[off+header.IPv4TotalLenOff:]))
			if tot < ihl || off+tot > len(frame) {
				return false
			}
			p.end = off + tot
		}
		p.ipv6 = false
		p.proto = frame[off+header.IPv4ProtoOff]
		p.fragment = binary.BigEndian.Uint16(frame[off+header.IPv4FragOff:])&0x3fff != 0
		p.l4off = off + ihl
		return true
	case header.EtherTypeIPv6:
		if off+header.IPv6Len > len(frame) || frame[off]>>4 != 6 {
			return false
		}
		if trustLen {
			pl := int(binary.BigEndian.Uint16(frame[off+header.IPv6PayloadLenOff:]))
			if off+header.IPv6Len+pl > len(frame) {
				return false
			}
			p.end = off + header.IPv6Len + pl
		}
		p.ipv6 = true
		nh := frame[off+header.IPv6NextHeaderOff]
		pos := off + header.IPv6Len
		for i := 0; ; i++ {
			var hlen int
			switch nh {
			case header.IPProtoHopByHop, header.IPProtoRouting, header.IPProtoDstOpts:
				if pos+8 > p.end {
					return false
				}
				if nh == header.IPProtoRouting && frame[pos+3] != 0 {
					p.routed = true
				}
				hlen = (int(frame[pos+1]) + 1) * 8
			case header.IPProtoFragment:
				if pos+8 > p.end {
					return false
				}
				p.fragment = true
				hlen = 8
			case header.IPProtoAH:
				if pos+8 > p.end {
					return false
				}
				hlen = (int(frame[pos+1]) + 2) * 4
			default:
				p.proto = nh
				p.l4off = pos
				return true
			}
			if i == maxIPv6ExtHdrs || pos+hlen > p.end {
				return false
			}
			nh = frame[pos]
			pos += hlen
		}
	}
	return false
}

package vnethdr

import "encoding/binary"

// Ethernet types the parser steps through or stops at.
const (
	etherTypeIPv4   = 0x0800
	etherTypeIPv6   = 0x86dd
	etherTypeVLAN   = 0x8100
	etherTypeQinQ   = 0x88a8
	etherTypeQinQv1 = 0x9100
	maxVLANTags     = 2
	maxIPv6ExtHdrs  = 8
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
	if len(frame) < 14 {
		return false
	}
	off := 14
	etype := binary.BigEndian.Uint16(frame[12:])
	for i := 0; i < maxVLANTags && (etype == etherTypeVLAN || etype == etherTypeQinQ || etype == etherTypeQinQv1); i++ {
		if off+4 > len(frame) {
			return false
		}
		etype = binary.BigEndian.Uint16(frame[off+2:])
		off += 4
	}
	p.l3off = off
	p.end = len(frame)
	p.fragment, p.routed = false, false
	switch etype {
	case etherTypeIPv4:
		if off+20 > len(frame) || frame[off]>>4 != 4 {
			return false
		}
		ihl := int(frame[off]&0x0f) * 4
		if ihl < 20 || off+ihl > len(frame) {
			return false
		}
		if trustLen {
			tot := int(binary.BigEndian.Uint16(frame[off+2:]))
			if tot < ihl || off+tot > len(frame) {
				return false
			}
			p.end = off + tot
		}
		p.ipv6 = false
		p.proto = frame[off+9]
		p.fragment = binary.BigEndian.Uint16(frame[off+6:])&0x3fff != 0
		p.l4off = off + ihl
		return true
	case etherTypeIPv6:
		if off+40 > len(frame) || frame[off]>>4 != 6 {
			return false
		}
		if trustLen {
			pl := int(binary.BigEndian.Uint16(frame[off+4:]))
			if off+40+pl > len(frame) {
				return false
			}
			p.end = off + 40 + pl
		}
		p.ipv6 = true
		nh := frame[off+6]
		pos := off + 40
		for i := 0; ; i++ {
			var hlen int
			switch nh {
			case 0, 43, 60: // hop-by-hop, routing, destination options
				if pos+8 > p.end {
					return false
				}
				if nh == 43 && frame[pos+3] != 0 {
					p.routed = true
				}
				hlen = (int(frame[pos+1]) + 1) * 8
			case 44: // fragment
				if pos+8 > p.end {
					return false
				}
				p.fragment = true
				hlen = 8
			case 51: // authentication header
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

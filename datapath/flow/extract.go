package flow

import "github.com/vswitch-go/vswitch/datapath/header"

// Extraction rules, where the wire leaves a choice:
//
//   - A header contributes its fields only once the part of it the key reads
//     is entirely in the frame; otherwise the status gets Truncated and those
//     fields stay zero. The exception is the L4 ports (and ICMP type/code):
//     they are filled as soon as their first 4 bytes are present, even if the
//     rest of the L4 header is cut.
//   - When parsing stops early, NwProto holds the protocol of the header that
//     could not be parsed (for IPv6, the next-header value that pointed at the
//     missing or cut header), so a truncated UDP packet still classifies as
//     UDP with ports 0.
//   - A VLAN tag cut short leaves EthType = its TPID and the tag unset. A
//     third tag (or an inner 0x9100) is not parsed: EthType = that TPID.
//   - An IPv4 or IPv6 header that fails its sanity check (version, IHL,
//     total length below the header length) gives Malformed and contributes
//     no field and no L3 offset. A total/payload length longer than the frame
//     gives Truncated and parsing continues over what is there; a shorter one
//     trims Ethernet padding off the L4 view.
//   - IPv6 payload length 0 is taken literally (jumbograms are not parsed).
//     More than maxIPv6ExtHeaders extension headers give Malformed with
//     NwProto = the next-header value at which parsing gave up.
//   - IPv6ExtHdr gets the presence bit of every extension header a
//     next-header value announced, even one cut short (and ESP, and NONEXT
//     for next header 59), up to where the walk stopped; the headers behind
//     a later fragment are not seen. UNSEQ is set when the sequence of
//     headers is not a subsequence of RFC 2460's order hop-by-hop, dest,
//     routing, fragment, AH, ESP, dest; UNREP when a type appears more than
//     once (destination options: more than twice).
//   - MPLS and PBB (EthType 0x88e7) end the parse: the key holds the top
//     label stack entry, or the I-SID of the I-TAG, and nothing inner.
//   - Offsets.L3 is set when the network header's sanity checks passed and
//     its fixed part (with IPv4 options, with the whole ARP body) is in the
//     frame. Offsets.L4 is set only when the minimum L4 header is in the
//     frame: 20 bytes TCP, 8 UDP, 12 SCTP, 4 ICMPv4/ICMPv6. So an action that
//     sees L4 != NoOffset may touch ports and checksums without a bound check.
//   - TCP with data offset < 5: Malformed, ports kept, flags zero, no L4
//     offset (the header is not trusted for rewriting). TCP options are not
//     read, so a data offset beyond the frame is not flagged.
//   - Neighbour discovery: an option of length 0 or a second source/target
//     link-layer option is Malformed and, as in Open vSwitch, clears NDTarget,
//     ArpSHA and ArpTHA (ICMPv6 type/code and L4 stay). A cut option gives
//     Truncated and keeps the target and the options parsed before it.
//     Link-layer options whose length is not 8 bytes (non-Ethernet) are
//     skipped.
//   - ICMP is parsed only over IPv4 and ICMPv6 only over IPv6.
//   - Offsets always fit in 16 bits below NoOffset: the deepest header a key
//     reads starts at most 30 + 40 + 16*2048 bytes into the frame.

// maxIPv6ExtHeaders bounds the extension-header walk so that a crafted chain
// cannot make one packet cost much more than another (and keeps offsets
// within 16 bits).
const maxIPv6ExtHeaders = 16

func be16(b []byte) uint16 {
	_ = b[1]
	return uint16(b[0])<<8 | uint16(b[1])
}

func be32(b []byte) uint32 {
	_ = b[3]
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

// Extract parses the Ethernet frame data, received on datapath port inPort,
// into k and records the header offsets in off. It never fails: a frame that
// is cut short or malformed yields a key filled as far as it parsed, and the
// returned status says what was wrong (0 for a clean parse). The rules for
// partial headers are in the comment at the top of this file.
func Extract(data []byte, inPort uint32, k *Key, off *Offsets) Status {
	*k = Key{}
	k.InPort = inPort
	off.L3, off.L4 = NoOffset, NoOffset
	if len(data) < 14 {
		return Truncated
	}
	k.EthDst = [6]byte(data[0:6])
	k.EthSrc = [6]byte(data[6:12])
	typ := be16(data[12:14])
	p := 14

	if typ == header.EtherTypeVLAN || typ == header.EtherTypeQinQ || typ == header.EtherTypeQinQOld {
		if len(data) < p+4 {
			k.EthType = typ
			return Truncated
		}
		k.VLAN[0] = VLANTag{TPID: typ, TCI: be16(data[p : p+2])}
		typ = be16(data[p+2 : p+4])
		p += 4
		if typ == header.EtherTypeVLAN || typ == header.EtherTypeQinQ {
			if len(data) < p+4 {
				k.EthType = typ
				return Truncated
			}
			k.VLAN[1] = VLANTag{TPID: typ, TCI: be16(data[p : p+2])}
			typ = be16(data[p+2 : p+4])
			p += 4
		}
	}

	if typ < header.EtherTypeMin {
		// 802.3 length frame: only LLC with a SNAP header of OUI 0 carries an
		// Ethernet type.
		k.EthType = header.EtherType8023
		llc := data[p:]
		if len(llc) < 3 {
			return Truncated
		}
		if llc[0] != 0xaa || llc[1] != 0xaa || llc[2] != 0x03 {
			return 0
		}
		if len(llc) < 8 {
			return Truncated
		}
		if llc[3] != 0 || llc[4] != 0 || llc[5] != 0 {
			return 0
		}
		typ = be16(llc[6:8])
		p += 8
	}
	k.EthType = typ

	switch typ {
	case header.EtherTypeIPv4:
		return extractIPv4(data, p, k, off)
	case header.EtherTypeIPv6:
		return extractIPv6(data, p, k, off)
	case header.EtherTypeARP, header.EtherTypeRARP:
		return extractARP(data[p:], p, k, off)
	case header.EtherTypeMPLS, header.EtherTypeMPLSMcast:
		if len(data) < p+4 {
			return Truncated
		}
		k.MPLSLse = be32(data[p : p+4])
	case header.EtherTypePBB:
		if len(data) < p+4 {
			return Truncated
		}
		k.PBBISID = be32(data[p:p+4]) & 0xffffff
	}
	return 0
}

func extractIPv4(data []byte, l3 int, k *Key, off *Offsets) Status {
	h := data[l3:]
	if len(h) < 20 {
		return Truncated
	}
	ihl := int(h[0]&0x0f) * 4
	if h[0]>>4 != 4 || ihl < 20 {
		return Malformed
	}
	if len(h) < ihl {
		return Truncated
	}
	totLen := int(be16(h[2:4]))
	if totLen < ihl {
		return Malformed
	}
	var st Status
	end := totLen
	if totLen > len(h) {
		st = Truncated
		end = len(h)
	}
	k.NwTOS = h[1]
	k.NwTTL = h[8]
	k.NwProto = h[9]
	k.IPv4Src = be32(h[12:16])
	k.IPv4Dst = be32(h[16:20])
	off.L3 = uint16(l3)
	if fo := be16(h[6:8]); fo&0x3fff != 0 { // MF or a fragment offset
		k.NwFrag = FragAny
		if fo&0x1fff != 0 {
			k.NwFrag = FragAny | FragLater
			return st
		}
	}
	return st | extractL4(h[ihl:end], l3+ihl, false, k, off)
}

func extractIPv6(data []byte, l3 int, k *Key, off *Offsets) Status {
	h := data[l3:]
	if len(h) < 40 {
		return Truncated
	}
	vtf := be32(h[0:4])
	if vtf>>28 != 6 {
		return Malformed
	}
	var st Status
	rest := h[40:]
	if plen := int(be16(h[4:6])); plen > len(rest) {
		st = Truncated
	} else {
		rest = rest[:plen]
	}
	k.NwTOS = uint8(vtf >> 20)
	k.IPv6Label = vtf & 0xfffff
	k.NwTTL = h[7]
	k.IPv6Src = [16]byte(h[8:24])
	k.IPv6Dst = [16]byte(h[24:40])
	off.L3 = uint16(l3)

	nh := h[6]
	p := l3 + 40
	// slot is the next position in RFC 2460's preferred order (hop-by-hop 0,
	// dest 1, routing 2, fragment 3, AH 4, ESP 5, dest 6) a header may take;
	// dests counts destination options headers.
	slot, dests := 0, 0
	for i := 0; ; i++ {
		switch nh {
		case header.IPProtoHopByHop, header.IPProtoRouting, header.IPProtoDstOpts, header.IPProtoAH, header.IPProtoFragment:
			if i == maxIPv6ExtHeaders {
				k.NwProto = nh
				return st | Malformed
			}
			slot = extHdrSeen(k, nh, slot, &dests)
		case header.IPProtoESP:
			extHdrSeen(k, nh, slot, &dests)
			k.NwProto = nh
			return st
		case header.IPProtoNoNext:
			k.IPv6ExtHdr |= ExtHdrNoNext
			k.NwProto = nh
			return st
		default:
			k.NwProto = nh
			return st | extractL4(rest, p, true, k, off)
		}
		if nh == header.IPProtoFragment {
			if len(rest) < 8 {
				k.NwProto = nh
				return st | Truncated
			}
			k.NwFrag |= FragAny
			fragOff := be16(rest[2:4]) &^ 7
			nh = rest[0]
			rest = rest[8:]
			p += 8
			if fragOff != 0 {
				k.NwFrag |= FragLater
				k.NwProto = nh
				return st
			}
			continue
		}
		if len(rest) < 2 {
			k.NwProto = nh
			return st | Truncated
		}
		n := (int(rest[1]) + 1) * 8
		if nh == header.IPProtoAH {
			n = (int(rest[1]) + 2) * 4
		}
		if len(rest) < n {
			k.NwProto = nh
			return st | Truncated
		}
		nh = rest[0]
		rest = rest[n:]
		p += n
	}
}

// extHdrSeen records extension header nh in k.IPv6ExtHdr and returns the
// next free slot of the preferred order (see extractIPv6).
func extHdrSeen(k *Key, nh uint8, slot int, dests *int) int {
	var bit uint16
	at := 0 // nh's slot in the preferred order
	switch nh {
	case header.IPProtoHopByHop:
		bit, at = ExtHdrHop, 0
	case header.IPProtoDstOpts:
		bit, at = ExtHdrDest, 1
		if slot > 1 {
			at = 6
		}
		*dests++
	case header.IPProtoRouting:
		bit, at = ExtHdrRouter, 2
	case header.IPProtoFragment:
		bit, at = ExtHdrFrag, 3
	case header.IPProtoAH:
		bit, at = ExtHdrAuth, 4
	case header.IPProtoESP:
		bit, at = ExtHdrESP, 5
	}
	eh := k.IPv6ExtHdr
	if eh&bit != 0 && (nh != header.IPProtoDstOpts || *dests > 2) {
		eh |= ExtHdrUnrep
	}
	eh |= bit
	if at < slot {
		eh |= ExtHdrUnseq
	} else {
		slot = at + 1
	}
	k.IPv6ExtHdr = eh
	return slot
}

func extractARP(h []byte, l3 int, k *Key, off *Offsets) Status {
	if len(h) < 8 {
		return Truncated
	}
	hlen, plen := int(h[4]), int(h[5])
	if len(h) < 8+2*(hlen+plen) {
		return Truncated
	}
	off.L3 = uint16(l3)
	if be16(h[0:2]) != 1 || be16(h[2:4]) != header.EtherTypeIPv4 || hlen != 6 || plen != 4 {
		return 0
	}
	if op := be16(h[6:8]); op <= 0xff {
		k.NwProto = uint8(op)
	}
	k.ArpSHA = [6]byte(h[8:14])
	k.IPv4Src = be32(h[14:18])
	k.ArpTHA = [6]byte(h[18:24])
	k.IPv4Dst = be32(h[24:28])
	return 0
}

// extractL4 parses the transport header at h (already trimmed to the IP
// payload), which starts at frame offset p.
func extractL4(h []byte, p int, v6 bool, k *Key, off *Offsets) Status {
	switch k.NwProto {
	case header.IPProtoTCP:
		if len(h) < 4 {
			return Truncated
		}
		k.TpSrc, k.TpDst = be16(h[0:2]), be16(h[2:4])
		if len(h) < 20 {
			return Truncated
		}
		ctl := be16(h[12:14])
		if ctl>>12 < 5 {
			return Malformed
		}
		k.TCPFlags = ctl & 0x0fff
		off.L4 = uint16(p)
	case header.IPProtoUDP:
		if len(h) < 4 {
			return Truncated
		}
		k.TpSrc, k.TpDst = be16(h[0:2]), be16(h[2:4])
		if len(h) < 8 {
			return Truncated
		}
		off.L4 = uint16(p)
	case header.IPProtoSCTP:
		if len(h) < 4 {
			return Truncated
		}
		k.TpSrc, k.TpDst = be16(h[0:2]), be16(h[2:4])
		if len(h) < 12 {
			return Truncated
		}
		off.L4 = uint16(p)
	case header.IPProtoICMP:
		if v6 {
			return 0
		}
		if len(h) < 4 {
			return Truncated
		}
		k.TpSrc, k.TpDst = uint16(h[0]), uint16(h[1])
		off.L4 = uint16(p)
	case header.IPProtoICMPv6:
		if !v6 {
			return 0
		}
		if len(h) < 4 {
			return Truncated
		}
		k.TpSrc, k.TpDst = uint16(h[0]), uint16(h[1])
		off.L4 = uint16(p)
		if (h[0] == header.ICMPv6NeighborSolicit || h[0] == header.ICMPv6NeighborAdvert) && h[1] == 0 {
			return extractND(h, k)
		}
	}
	return 0
}

// extractND parses the target and link-layer address options of a
// neighbour solicitation or advertisement; h starts at the ICMPv6 header.
func extractND(h []byte, k *Key) Status {
	if len(h) < 24 {
		return Truncated
	}
	k.NDTarget = [16]byte(h[8:24])
	want := uint8(header.NDOptSourceLLAddr)
	if h[0] == header.ICMPv6NeighborAdvert {
		want = header.NDOptTargetLLAddr
	}
	seen := false
	opts := h[24:]
	for len(opts) > 0 {
		if len(opts) < 2 {
			return Truncated
		}
		n := int(opts[1]) * 8
		if n == 0 {
			return badND(k)
		}
		if len(opts) < n {
			return Truncated
		}
		if opts[0] == want && n == 8 {
			if seen {
				return badND(k)
			}
			seen = true
			if want == header.NDOptSourceLLAddr {
				k.ArpSHA = [6]byte(opts[2:8])
			} else {
				k.ArpTHA = [6]byte(opts[2:8])
			}
		}
		opts = opts[n:]
	}
	return 0
}

func badND(k *Key) Status {
	k.NDTarget = [16]byte{}
	k.ArpSHA = [6]byte{}
	k.ArpTHA = [6]byte{}
	return Malformed
}

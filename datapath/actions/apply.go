package actions

import (
	"encoding/binary"
	"hash/crc32"

	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/datapath/header"
	"github.com/vswitch-go/vswitch/datapath/packet"
)

// ethAddrsLen is the destination and source MAC: the bytes a VLAN tag goes
// after.
const ethAddrsLen = header.EthernetTypeOff

// castagnoli is built once: crc32.MakeTable allocates, and SCTP port
// rewrites happen per packet.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Apply performs one rewrite action on p and reports whether p survives it;
// false means the caller must drop the packet (DecIPTTL or DecMPLSTTL on a
// TTL of 0 or 1, PushVLAN, PushMPLS or PushPBB without headroom).
//
// p.KeyValid must be true: the rewrites find headers through p.Key and
// p.Offsets instead of parsing again. Apply keeps both in step with the bytes
// it writes, so a later action or the caller sees the key the rewritten
// packet would extract to (flow.Extract on p.Data() gives p.Key and
// p.Offsets). The one exception is a PushVLAN that makes a third tag, or
// uses a TPID extraction does not parse in that position: the key's two tag
// slots cannot describe the packet, so Apply clears p.KeyValid. It still
// moves p.Offsets, so the rest of the list rewrites the right bytes; the
// caller must extract again before classifying on the key. A PopVLAN parses
// the frame again when the stack was deeper than the key could describe
// (this also makes an invalidated key valid again).
//
// The MPLS and PBB pushes and pops, an ICMPv6 type change into or out of
// neighbour discovery, and the ND rewrites change what extraction sees
// beyond the field written, so they parse the frame again (keeping
// Key.TunnelID, which the frame does not carry); this also makes an
// invalidated key valid. The MPLS and PBB actions find their header from
// the bytes, behind every VLAN tag, since the key holds at most two.
//
// A set on a header the packet lacks does nothing. Output, Controller,
// Drop and Meter need the PMD's queues or shared state, so Apply leaves
// them (and Invalid) to the PMD: for those it changes nothing and returns
// true.
func Apply(a *Action, p *packet.Packet) bool {
	switch a.Kind {
	case SetEthSrc:
		setEthAddr(p, header.EthernetSrcOff, &p.Key.EthSrc, &a.Addr)
	case SetEthDst:
		setEthAddr(p, header.EthernetDstOff, &p.Key.EthDst, &a.Addr)
	case SetIPv4Src:
		setIPv4Addr(p, header.IPv4SrcOff, &p.Key.IPv4Src, &a.Addr)
	case SetIPv4Dst:
		setIPv4Addr(p, header.IPv4DstOff, &p.Key.IPv4Dst, &a.Addr)
	case SetIPv6Src:
		setIPv6Addr(p, header.IPv6SrcOff, &p.Key.IPv6Src, &a.Addr)
	case SetIPv6Dst:
		setIPv6Addr(p, header.IPv6DstOff, &p.Key.IPv6Dst, &a.Addr)
	case SetIPTOS:
		setTOS(p, a.Val8, a.Mask8)
	case SetIPTTL:
		setTTL(p, a.Val8)
	case DecIPTTL:
		return decTTL(p)
	case SetL4Src:
		setL4Port(p, header.L4SrcPortOff, &p.Key.TpSrc, a.Val16)
	case SetL4Dst:
		setL4Port(p, header.L4DstPortOff, &p.Key.TpDst, a.Val16)
	case PushVLAN:
		return pushVLAN(p, a.Val16, a.Val16b)
	case PopVLAN:
		popVLAN(p)
	case SetVLANTCI:
		setVLANTCI(p, a.Val16, a.Val16b)
	case PushMPLS:
		return pushMPLS(p, a.Val16)
	case PopMPLS:
		popMPLS(p, a.Val16)
	case SetMPLSLabel:
		setLSE(p, lseLabelMask, a.Val32<<12)
	case SetMPLSTC:
		setLSE(p, lseTCMask, uint32(a.Val8)<<9)
	case SetMPLSTTL:
		setLSE(p, lseTTLMask, uint32(a.Val8))
	case DecMPLSTTL:
		return decMPLSTTL(p)
	case CopyTTLOut:
		copyTTLOut(p)
	case CopyTTLIn:
		copyTTLIn(p)
	case PushPBB:
		return pushPBB(p, uint32(a.Val8)<<24|a.Val32&pbbISIDMax)
	case PopPBB:
		popPBB(p)
	case SetPBBISID:
		setPBBISID(p, a.Val32)
	case SetTunnelID:
		p.Key.TunnelID = binary.BigEndian.Uint64(a.Addr[:8])
	case SetTunnelSrc:
		p.Key.Tun.Src = a.Addr
	case SetTunnelDst:
		p.Key.Tun.Dst = a.Addr
	case SetTunnelOpt:
		p.Key.Tun.SetOpt(int(a.Val8)-1, [4]byte{byte(a.Val32 >> 24), byte(a.Val32 >> 16), byte(a.Val32 >> 8), byte(a.Val32)})
	case SetIPv6Label:
		setIPv6Label(p, a.Val32)
	case SetARPOp:
		setARPOp(p, a.Val16)
	case SetARPSPA:
		setARPProto(p, header.ARPSPAOff, &p.Key.IPv4Src, &a.Addr)
	case SetARPTPA:
		setARPProto(p, header.ARPTPAOff, &p.Key.IPv4Dst, &a.Addr)
	case SetARPSHA:
		setARPHW(p, header.ARPSHAOff, &p.Key.ArpSHA, &a.Addr)
	case SetARPTHA:
		setARPHW(p, header.ARPTHAOff, &p.Key.ArpTHA, &a.Addr)
	case SetNDTarget:
		setNDTarget(p, &a.Addr)
	case SetNDSLL:
		setNDLL(p, header.NDOptSourceLLAddr, &a.Addr)
	case SetNDTLL:
		setNDLL(p, header.NDOptTargetLLAddr, &a.Addr)
	case SetICMPType:
		setICMP(p, header.ICMPTypeOff, a.Val8)
	case SetICMPCode:
		setICMP(p, header.ICMPCodeOff, a.Val8)
	case SetICMPID:
		setICMPID(p, a.Val16)
	case SetEthType:
		setEthType(p, a.Val16)
	case SetIPProto:
		setIPProto(p, a.Val8)
	case SetMPLSBoS:
		setLSE(p, lseBoS, uint32(a.Val8&1)<<8)
	case CTClear:
		p.Key.CT = flow.Conntrack{}
	}
	return true
}

// ApplyList performs the rewrite actions of l in order, skipping the ones the
// PMD carries out, and stops at the first that drops the packet. It is for
// callers (packet-out, tests) that do not interleave outputs with rewrites.
func ApplyList(l List, p *packet.Packet) bool {
	for i := range l {
		if !Apply(&l[i], p) {
			return false
		}
	}
	return true
}

// --- Ethernet ---

// setEthAddr writes a MAC address at off (0 for destination, 6 for source).
// Frames too short to hold an Ethernet header have no Ethernet fields in the
// key, so they are left alone.
func setEthAddr(p *packet.Packet, off int, keyField *[6]byte, addr *[16]byte) {
	d := p.Data()
	if len(d) < header.EthernetLen {
		return
	}
	copy(d[off:off+6], addr[:6])
	copy(keyField[:], addr[:6])
}

// --- IPv4 / IPv6 ---

// ipv4Header returns the frame and the offset of its IPv4 header, or ok
// false when the packet has no complete fixed IPv4 header.
func ipv4Header(p *packet.Packet) (d []byte, l3 int, ok bool) {
	if p.Key.EthType != header.EtherTypeIPv4 || p.Offsets.L3 == flow.NoOffset {
		return nil, 0, false
	}
	d = p.Data()
	l3 = int(p.Offsets.L3)
	if l3+header.IPv4MinLen > len(d) {
		return nil, 0, false
	}
	return d, l3, true
}

// ipv6Header is ipv4Header for the fixed IPv6 header.
func ipv6Header(p *packet.Packet) (d []byte, l3 int, ok bool) {
	if p.Key.EthType != header.EtherTypeIPv6 || p.Offsets.L3 == flow.NoOffset {
		return nil, 0, false
	}
	d = p.Data()
	l3 = int(p.Offsets.L3)
	if l3+header.IPv6Len > len(d) {
		return nil, 0, false
	}
	return d, l3, true
}

// l4ChecksumOffset returns where the checksum that covers the IP
// pseudo-header sits in the frame, or -1 when there is none to update: no L4
// header (later fragment, other protocol), a checksum field cut off by the
// end of the frame, or a UDP checksum of zero, which means "no checksum" and
// must stay zero (also kept for IPv6, where RFC 6935 allows it for tunnels).
func l4ChecksumOffset(p *packet.Packet, d []byte) int {
	return pseudoChecksumOffset(p, d, p.Key.NwProto)
}

// pseudoChecksumOffset is l4ChecksumOffset for a transport header of
// protocol proto at p.Offsets.L4: setIPProto needs the old protocol's
// checksum after the IP header already names the new one.
func pseudoChecksumOffset(p *packet.Packet, d []byte, proto uint8) int {
	if p.Offsets.L4 == flow.NoOffset || p.Key.NwFrag&flow.FragLater != 0 {
		return -1
	}
	l4 := int(p.Offsets.L4)
	off := -1
	switch proto {
	case header.IPProtoTCP:
		off = l4 + header.TCPChecksumOff
	case header.IPProtoUDP:
		off = l4 + header.UDPChecksumOff
	case header.IPProtoICMPv6:
		if p.Key.EthType != header.EtherTypeIPv6 {
			return -1
		}
		off = l4 + header.ICMPv6ChecksumOff
	default:
		return -1
	}
	if off+2 > len(d) {
		return -1
	}
	if proto == header.IPProtoUDP && d[off] == 0 && d[off+1] == 0 {
		return -1
	}
	return off
}

// fixZeroUDP turns a UDP checksum that came out as zero into 0xffff: zero on
// the wire would tell the receiver the datagram carries no checksum.
func fixZeroUDP(p *packet.Packet, d []byte, off int) {
	if p.Key.NwProto == header.IPProtoUDP && d[off] == 0 && d[off+1] == 0 {
		d[off], d[off+1] = 0xff, 0xff
	}
}

// setIPv4Addr writes an IPv4 address at L3+off (12 source, 16 destination)
// and updates the header checksum and the TCP/UDP pseudo-header checksum.
func setIPv4Addr(p *packet.Packet, off int, keyField *uint32, addr *[16]byte) {
	d, l3, ok := ipv4Header(p)
	if !ok {
		return
	}
	field := d[l3+off : l3+off+4]
	old := binary.BigEndian.Uint32(field)
	val := binary.BigEndian.Uint32(addr[:4])
	if old == val {
		return
	}
	acc := header.CsumDelta32(0, old, val)
	binary.BigEndian.PutUint32(field, val)
	header.AdjustField(d, l3+header.IPv4ChecksumOff, acc)
	if c := l4ChecksumOffset(p, d); c >= 0 {
		header.AdjustField(d, c, acc)
		fixZeroUDP(p, d, c)
	}
	*keyField = val
}

// setIPv6Addr writes an IPv6 address at L3+off (8 source, 24 destination)
// and updates the TCP/UDP/ICMPv6 pseudo-header checksum. The key does not
// record a routing header, so a destination rewrite on a packet whose
// pseudo-header uses the routing header's final address still adjusts the
// checksum (a known gap; such packets are rare on a switch).
func setIPv6Addr(p *packet.Packet, off int, keyField *[16]byte, addr *[16]byte) {
	d, l3, ok := ipv6Header(p)
	if !ok {
		return
	}
	field := d[l3+off : l3+off+16]
	acc := header.CsumDeltaBytes(0, field, addr[:])
	copy(field, addr[:])
	if c := l4ChecksumOffset(p, d); c >= 0 {
		header.AdjustField(d, c, acc)
		fixZeroUDP(p, d, c)
	}
	*keyField = *addr
}

// setTOS rewrites the IPv4 TOS byte or the IPv6 traffic class under mask.
func setTOS(p *packet.Packet, val, mask uint8) {
	if mask == 0 {
		mask = 0xff
	}
	if d, l3, ok := ipv4Header(p); ok {
		old := d[l3+header.IPv4TOSOff]
		tos := old&^mask | val&mask
		// TOS shares a checksummed word with version/IHL.
		vihl := uint16(d[l3]) << 8
		d[l3+header.IPv4TOSOff] = tos
		header.AdjustField(d, l3+header.IPv4ChecksumOff, header.CsumDelta(0, vihl|uint16(old), vihl|uint16(tos)))
		p.Key.NwTOS = tos
		return
	}
	if d, l3, ok := ipv6Header(p); ok {
		// The traffic class straddles bytes 0 and 1: version(4) TC(8) label(20).
		old := d[l3]<<4 | d[l3+1]>>4
		tc := old&^mask | val&mask
		d[l3] = d[l3]&0xf0 | tc>>4
		d[l3+1] = d[l3+1]&0x0f | tc<<4
		p.Key.NwTOS = tc
	}
}

// setTTL rewrites the IPv4 TTL or the IPv6 hop limit.
func setTTL(p *packet.Packet, ttl uint8) {
	if d, l3, ok := ipv4Header(p); ok {
		setIPv4TTL(d, l3, ttl)
		p.Key.NwTTL = ttl
		return
	}
	if d, l3, ok := ipv6Header(p); ok {
		d[l3+header.IPv6HopLimitOff] = ttl
		p.Key.NwTTL = ttl
	}
}

// setIPv4TTL writes the TTL; it shares a checksummed word with the protocol.
func setIPv4TTL(d []byte, l3 int, ttl uint8) {
	proto := uint16(d[l3+header.IPv4ProtoOff])
	oldWord := uint16(d[l3+header.IPv4TTLOff])<<8 | proto
	d[l3+header.IPv4TTLOff] = ttl
	header.AdjustField(d, l3+header.IPv4ChecksumOff, header.CsumDelta(0, oldWord, uint16(ttl)<<8|proto))
}

// decTTL decrements the TTL / hop limit and reports false when the packet
// has run out of hops. Packets without an IP header pass untouched.
func decTTL(p *packet.Packet) bool {
	if d, l3, ok := ipv4Header(p); ok {
		ttl := d[l3+header.IPv4TTLOff]
		if ttl <= 1 {
			return false
		}
		setIPv4TTL(d, l3, ttl-1)
		p.Key.NwTTL = ttl - 1
		return true
	}
	if d, l3, ok := ipv6Header(p); ok {
		hl := d[l3+header.IPv6HopLimitOff]
		if hl <= 1 {
			return false
		}
		d[l3+header.IPv6HopLimitOff] = hl - 1
		p.Key.NwTTL = hl - 1
	}
	return true
}

// --- transport ports ---

// setL4Port writes a TCP/UDP/SCTP port at L4+off (0 source, 2 destination).
func setL4Port(p *packet.Packet, off int, keyField *uint16, port uint16) {
	if p.Key.EthType != header.EtherTypeIPv4 && p.Key.EthType != header.EtherTypeIPv6 {
		return
	}
	if p.Offsets.L4 == flow.NoOffset || p.Key.NwFrag&flow.FragLater != 0 {
		return
	}
	d := p.Data()
	l4 := int(p.Offsets.L4)
	switch p.Key.NwProto {
	case header.IPProtoTCP, header.IPProtoUDP:
		if l4+off+2 > len(d) {
			return
		}
		old := binary.BigEndian.Uint16(d[l4+off:])
		binary.BigEndian.PutUint16(d[l4+off:], port)
		if c := l4ChecksumOffset(p, d); c >= 0 {
			header.AdjustField(d, c, header.CsumDelta(0, old, port))
			fixZeroUDP(p, d, c)
		}
	case header.IPProtoSCTP:
		if l4+off+2 > len(d) {
			return
		}
		binary.BigEndian.PutUint16(d[l4+off:], port)
		fixSCTPChecksum(p, d, l4)
	default:
		return
	}
	*keyField = port
}

// fixSCTPChecksum recomputes the CRC32c of the SCTP packet at l4. A
// fragmented SCTP packet cannot be summed from one fragment, so its
// checksum is left as it was (the receiver will discard the datagram; OVS
// offers nothing better and SCTP avoids IP fragmentation anyway).
func fixSCTPChecksum(p *packet.Packet, d []byte, l4 int) {
	if p.Key.NwFrag&flow.FragAny != 0 {
		return
	}
	end := ipPayloadEnd(p, d)
	if end < l4+header.SCTPCommonLen {
		return
	}
	sctp := d[l4:end]
	clear(sctp[header.SCTPChecksumOff : header.SCTPChecksumOff+4])
	crc := crc32.Checksum(sctp, castagnoli)
	// SCTP puts the CRC on the wire least significant byte first (RFC 4960
	// appendix B as implemented everywhere).
	binary.LittleEndian.PutUint32(sctp[header.SCTPChecksumOff:], crc)
}

// ipPayloadEnd returns where the IP datagram ends in the frame, so that
// Ethernet padding is not summed; it falls back to the frame end when the
// length field is missing or claims more than the frame holds.
func ipPayloadEnd(p *packet.Packet, d []byte) int {
	l3 := int(p.Offsets.L3)
	end := len(d)
	switch p.Key.EthType {
	case header.EtherTypeIPv4:
		if l3+header.IPv4TotalLenOff+2 <= len(d) {
			end = l3 + int(binary.BigEndian.Uint16(d[l3+header.IPv4TotalLenOff:]))
		}
	case header.EtherTypeIPv6:
		if l3+header.IPv6PayloadLenOff+2 <= len(d) {
			if pl := int(binary.BigEndian.Uint16(d[l3+header.IPv6PayloadLenOff:])); pl != 0 {
				end = l3 + header.IPv6Len + pl
			}
		}
	}
	if end > len(d) {
		end = len(d)
	}
	return end
}

// --- VLAN ---

// Which TPIDs flow.Extract parses as tags depends on the position: the
// pre-standard 0x9100 only as the outer tag, and never more than two tags.
func isOuterTPID(t uint16) bool {
	return t == header.EtherTypeVLAN || t == header.EtherTypeQinQ || t == header.EtherTypeQinQOld
}
func isInnerTPID(t uint16) bool { return t == header.EtherTypeVLAN || t == header.EtherTypeQinQ }

// pushVLAN inserts an outermost tag. It returns false only when the buffer
// has no headroom for it.
//
// The key follows: the new tag is VLAN[0], the old outer one VLAN[1]. When
// extraction would not see the result that way (a third tag, a TPID it does
// not parse at that position) p.KeyValid is cleared; the offsets are still
// moved, so later rewrites in the same list keep writing the right bytes.
func pushVLAN(p *packet.Packet, tpid, tci uint16) bool {
	if p.Len() < header.EthernetLen {
		return true // not an Ethernet frame: extraction has no fields to keep
	}
	if p.Push(header.VLANTagLen) == nil {
		return false
	}
	d := p.Data()
	copy(d[:ethAddrsLen], d[header.VLANTagLen:header.VLANTagLen+ethAddrsLen])
	binary.BigEndian.PutUint16(d[ethAddrsLen:], tpid)
	binary.BigEndian.PutUint16(d[ethAddrsLen+2:], tci)
	shiftOffsets(&p.Offsets, header.VLANTagLen)
	old := p.Key.VLAN
	if old[1].TPID != 0 || !isOuterTPID(tpid) || (old[0].TPID != 0 && !isInnerTPID(old[0].TPID)) {
		p.KeyValid = false
	}
	p.Key.VLAN[1] = old[0]
	p.Key.VLAN[0] = flow.VLANTag{TPID: tpid, TCI: tci}
	return true
}

// popVLAN removes the outermost tag, if the key says there is one.
func popVLAN(p *packet.Packet) {
	if p.Key.VLAN[0].TPID == 0 || p.Len() < ethAddrsLen+header.VLANTagLen {
		return
	}
	d := p.Data()
	copy(d[header.VLANTagLen:header.VLANTagLen+ethAddrsLen], d[:ethAddrsLen])
	p.Pull(header.VLANTagLen)
	if !p.KeyValid || isOuterTPID(p.Key.EthType) {
		// A tag beyond the key's two (or a 0x9100 in inner position) moves
		// to where extraction parses it, and the network header behind it
		// may appear; or an earlier push left a stack the key could not
		// describe, which this pop may have undone. Rare enough to simply
		// parse the frame again, which makes the key valid once more.
		reextract(p)
		return
	}
	shiftOffsets(&p.Offsets, -header.VLANTagLen)
	p.Key.VLAN[0] = p.Key.VLAN[1]
	p.Key.VLAN[1] = flow.VLANTag{}
}

// shiftOffsets moves the recorded header offsets by delta bytes.
func shiftOffsets(o *flow.Offsets, delta int) {
	if o.L3 != flow.NoOffset {
		o.L3 = uint16(int(o.L3) + delta)
	}
	if o.L4 != flow.NoOffset {
		o.L4 = uint16(int(o.L4) + delta)
	}
}

// setVLANTCI rewrites the outermost tag's TCI under mask (0 = every bit).
func setVLANTCI(p *packet.Packet, mask, tci uint16) {
	if p.Key.VLAN[0].TPID == 0 || p.Len() < header.EthernetLen+2 {
		return
	}
	if mask == 0 {
		mask = 0xffff
	}
	d := p.Data()
	old := binary.BigEndian.Uint16(d[ethAddrsLen+2:])
	val := old&^mask | tci&mask
	binary.BigEndian.PutUint16(d[ethAddrsLen+2:], val)
	p.Key.VLAN[0].TCI = val
}

// CheckedLen is the length a CheckPktLen action compares: the frame as it
// is now (VLAN tags included, as pushed or popped so far; a tunnel's outer
// headers are not part of it, since decapsulation happened before and
// encapsulation happens at output), without the Ethernet padding behind
// an IPv4 or IPv6 datagram shorter than the frame. That is what Open
// vSwitch's userspace datapath compares (the packet's size less its L2
// padding), so a minimum-size frame carrying a 28-byte datagram counts as
// 42 bytes, not 60. p.KeyValid must be true.
func CheckedLen(p *packet.Packet) int {
	n := p.Len()
	l3 := int(p.Offsets.L3)
	if p.Offsets.L3 == flow.NoOffset {
		return n
	}
	d := p.Data()
	var ipLen int
	switch p.Key.EthType {
	case header.EtherTypeIPv4:
		if l3+header.IPv4TotalLenOff+2 > len(d) {
			return n
		}
		ipLen = int(binary.BigEndian.Uint16(d[l3+header.IPv4TotalLenOff:]))
	case header.EtherTypeIPv6:
		if l3+header.IPv6PayloadLenOff+2 > len(d) {
			return n
		}
		ipLen = header.IPv6Len + int(binary.BigEndian.Uint16(d[l3+header.IPv6PayloadLenOff:]))
	default:
		return n
	}
	if l3+ipLen < n {
		return l3 + ipLen
	}
	return n
}

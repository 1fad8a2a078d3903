package actions

import (
	"encoding/binary"

	"github.com/vswitch-go/vswitch/datapath/flow"
	"github.com/vswitch-go/vswitch/datapath/header"
	"github.com/vswitch-go/vswitch/datapath/packet"
)

// MPLS and PBB: OpenFlow 1.3's label stack and 802.1ah encapsulation.
//
// flow.Extract stops at an MPLS or PBB header, so the key describes only
// the top entry or the outer I-SID. The rewrites here therefore find their
// header from the bytes (Ethernet addresses, then every VLAN tag), not
// from p.Offsets, and the pushes and pops, which change what extraction
// sees behind them, parse the frame again: an MPLS or PBB frame parses in
// a few nanoseconds since parsing stops at that header, and a pop to IP
// needs the network header parsed anyway.

const (
	mplsLen      = 4
	lseLabelMask = 0xfffff000
	lseTCMask    = 0x00000e00
	lseBoS       = 0x00000100
	lseTTLMask   = 0x000000ff

	// pbbLen is what PushPBB inserts: type, I-TAG TCI, customer addresses.
	pbbLen     = 2 + 4 + ethAddrsLen
	pbbISIDMax = 0xffffff
)

func isMPLSType(t uint16) bool { return t == header.EtherTypeMPLS || t == header.EtherTypeMPLSMcast }

// typeOffset returns the offset of the Ethernet type that follows the MAC
// addresses and every complete VLAN tag, or -1 for a frame too short to
// have one. It walks all tags, not only the two the key holds, so the
// encapsulation actions find the same header whether or not an earlier
// PushVLAN left the key unable to describe the stack.
func typeOffset(d []byte) int {
	pos := ethAddrsLen
	for pos+header.VLANTagLen+2 <= len(d) && isOuterTPID(binary.BigEndian.Uint16(d[pos:])) {
		pos += header.VLANTagLen
	}
	if pos+2 > len(d) {
		return -1
	}
	return pos
}

// topLSE returns the offset of the top MPLS label stack entry, or -1 when
// the frame is not MPLS or the entry is cut off.
func topLSE(d []byte) int {
	pos := typeOffset(d)
	if pos < 0 || !isMPLSType(binary.BigEndian.Uint16(d[pos:])) || pos+2+mplsLen > len(d) {
		return -1
	}
	return pos + 2
}

// reextract parses the frame again after a change extraction would see
// differently beyond what an action can patch; it keeps the metadata the
// frame does not carry.
func reextract(p *packet.Packet) {
	id, tun := p.Key.TunnelID, p.Key.Tun
	flow.Extract(p.Data(), p.Key.InPort, &p.Key, &p.Offsets)
	p.Key.TunnelID, p.Key.Tun = id, tun
	p.KeyValid = true
}

// pushMPLS inserts a top label stack entry (see PushMPLS). It returns false
// only when the buffer has no headroom for it.
func pushMPLS(p *packet.Packet, typ uint16) bool {
	d := p.Data()
	pos := typeOffset(d)
	if pos < 0 {
		return true
	}
	old := binary.BigEndian.Uint16(d[pos:])
	if old < 0x0600 {
		return true // 802.3 length field: there is no type to replace
	}
	q := pos + 2 // what the new entry will cover
	var lse uint32
	switch {
	case isMPLSType(old):
		if q+mplsLen <= len(d) {
			lse = binary.BigEndian.Uint32(d[q:]) &^ lseBoS
		}
	case old == header.EtherTypeIPv4 && q+header.IPv4MinLen <= len(d) && d[q]>>4 == 4:
		lse = lseBoS | uint32(d[q+8])
	case old == header.EtherTypeIPv6 && q+header.IPv6Len <= len(d) && d[q]>>4 == 6:
		lse = lseBoS | uint32(d[q+7])
	default:
		lse = lseBoS
	}
	if p.Push(mplsLen) == nil {
		return false
	}
	d = p.Data()
	copy(d[:pos], d[mplsLen:mplsLen+pos])
	if typ != header.EtherTypeMPLSMcast {
		typ = header.EtherTypeMPLS
	}
	binary.BigEndian.PutUint16(d[pos:], typ)
	binary.BigEndian.PutUint32(d[q:], lse)
	reextract(p)
	return true
}

// popMPLS removes the top label stack entry and sets the type to typ.
func popMPLS(p *packet.Packet, typ uint16) {
	d := p.Data()
	lse := topLSE(d)
	if lse < 0 {
		return
	}
	pos := lse - 2
	copy(d[mplsLen:mplsLen+pos], d[:pos])
	binary.BigEndian.PutUint16(d[pos+mplsLen:], typ)
	p.Pull(mplsLen)
	reextract(p)
}

// setLSE rewrites the bits of the top label stack entry under mask.
func setLSE(p *packet.Packet, mask, val uint32) {
	d := p.Data()
	off := topLSE(d)
	if off < 0 {
		return
	}
	lse := binary.BigEndian.Uint32(d[off:])&^mask | val&mask
	binary.BigEndian.PutUint32(d[off:], lse)
	keepLSE(p, lse)
}

// keepLSE records a new top entry in the key, if extraction sees the
// stack (it does not behind an 802.3 header or a third tag, where the
// entry the bytes lead to is not the one the key describes).
func keepLSE(p *packet.Packet, lse uint32) {
	if isMPLSType(p.Key.EthType) {
		p.Key.MPLSLse = lse
	}
}

// decMPLSTTL decrements the top entry's TTL; false means drop.
func decMPLSTTL(p *packet.Packet) bool {
	d := p.Data()
	off := topLSE(d)
	if off < 0 {
		return true
	}
	lse := binary.BigEndian.Uint32(d[off:])
	ttl := lse & lseTTLMask
	if ttl <= 1 {
		return false
	}
	lse = lse&^lseTTLMask | (ttl - 1)
	binary.BigEndian.PutUint32(d[off:], lse)
	keepLSE(p, lse)
	return true
}

// innerTTL locates the TTL the top entry at off covers: the next entry's,
// or under the bottom of the stack the IPv4 TTL (isV4) or IPv6 hop limit,
// recognised by the IP version nibble as MPLS carries no payload type.
// at is -1 when there is none in the frame.
func innerTTL(d []byte, off int) (at int, isV4 bool) {
	in := off + mplsLen
	if binary.BigEndian.Uint32(d[off:])&lseBoS == 0 {
		if in+mplsLen > len(d) {
			return -1, false
		}
		return in + 3, false
	}
	if in >= len(d) {
		return -1, false
	}
	switch d[in] >> 4 {
	case 4:
		if in+header.IPv4MinLen <= len(d) && d[in]&0x0f >= 5 {
			return in + header.IPv4TTLOff, true
		}
	case 6:
		if in+header.IPv6Len <= len(d) {
			return in + header.IPv6HopLimitOff, false
		}
	}
	return -1, false
}

// copyTTLOut copies the covered TTL into the top entry.
func copyTTLOut(p *packet.Packet) {
	d := p.Data()
	off := topLSE(d)
	if off < 0 {
		return
	}
	at, _ := innerTTL(d, off)
	if at < 0 {
		return
	}
	d[off+3] = d[at]
	keepLSE(p, binary.BigEndian.Uint32(d[off:]))
}

// copyTTLIn copies the top entry's TTL into what it covers. The key holds
// nothing beneath the top entry, so it does not change.
func copyTTLIn(p *packet.Packet) {
	d := p.Data()
	off := topLSE(d)
	if off < 0 {
		return
	}
	at, isV4 := innerTTL(d, off)
	if at < 0 {
		return
	}
	if isV4 {
		setIPv4TTL(d, at-header.IPv4TTLOff, d[off+3])
		return
	}
	d[at] = d[off+3]
}

// pushPBB inserts an I-TAG (see PushPBB); false means no headroom.
func pushPBB(p *packet.Packet, tci uint32) bool {
	if p.Len() < header.EthernetLen {
		return true // not an Ethernet frame
	}
	if p.Push(pbbLen) == nil {
		return false
	}
	d := p.Data()
	// The old addresses now sit at pbbLen, where the customer addresses
	// belong; the backbone addresses are copies of them.
	copy(d[:ethAddrsLen], d[pbbLen:pbbLen+ethAddrsLen])
	binary.BigEndian.PutUint16(d[ethAddrsLen:], header.EtherTypePBB)
	binary.BigEndian.PutUint32(d[ethAddrsLen+2:], tci)
	reextract(p)
	return true
}

// pbbTCI returns the offset of the outermost I-TAG's TCI, or -1.
func pbbTCI(d []byte) int {
	pos := typeOffset(d)
	if pos < 0 || binary.BigEndian.Uint16(d[pos:]) != header.EtherTypePBB || pos+2+4 > len(d) {
		return -1
	}
	return pos + 2
}

// popPBB strips the backbone encapsulation (see PopPBB). A frame with no
// complete customer Ethernet header behind the I-TAG is left alone.
func popPBB(p *packet.Packet) {
	d := p.Data()
	off := pbbTCI(d)
	if off < 0 || off+4+header.EthernetLen > len(d) {
		return
	}
	p.Pull(off + 4)
	reextract(p)
}

// setPBBISID rewrites the I-SID of the outermost I-TAG.
func setPBBISID(p *packet.Packet, isid uint32) {
	d := p.Data()
	off := pbbTCI(d)
	if off < 0 {
		return
	}
	isid &= pbbISIDMax
	d[off+1], d[off+2], d[off+3] = byte(isid>>16), byte(isid>>8), byte(isid)
	if p.Key.EthType == header.EtherTypePBB {
		p.Key.PBBISID = isid
	}
}

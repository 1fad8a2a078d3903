package vnethdr

import (
	"encoding/binary"
	"hash/crc32"
	"math/bits"

	"github.com/vswitch-go/vswitch/datapath/header"
)

// sum returns the one's-complement sum of b as 16-bit big-endian words
// (an odd last byte padded with zero), folded to 16 bits.
//
// It adds 64-bit little-endian loads with end-around carry: 2^16 ≡ 1
// modulo 0xffff, so a sum of 64-bit words folds to the same value as a sum
// of 16-bit words, and the one's-complement sum of byte-swapped words is
// the byte-swapped sum (RFC 1071), so one swap at the end gives the
// big-endian result on any architecture. Long inputs go through the vector
// code first where there is one (sum_amd64.go).
func sum(b []byte) uint16 {
	// The vector prefix starts at offset 0 and covers a multiple of 64
	// bytes, so the rest's words line up with it.
	s, b := sumVector(b)
	var c uint64
	for len(b) >= 64 {
		s, c = bits.Add64(s, binary.LittleEndian.Uint64(b[0:8]), c)
		s, c = bits.Add64(s, binary.LittleEndian.Uint64(b[8:16]), c)
		s, c = bits.Add64(s, binary.LittleEndian.Uint64(b[16:24]), c)
		s, c = bits.Add64(s, binary.LittleEndian.Uint64(b[24:32]), c)
		s, c = bits.Add64(s, binary.LittleEndian.Uint64(b[32:40]), c)
		s, c = bits.Add64(s, binary.LittleEndian.Uint64(b[40:48]), c)
		s, c = bits.Add64(s, binary.LittleEndian.Uint64(b[48:56]), c)
		s, c = bits.Add64(s, binary.LittleEndian.Uint64(b[56:64]), c)
		b = b[64:]
	}
	for len(b) >= 8 {
		s, c = bits.Add64(s, binary.LittleEndian.Uint64(b), c)
		b = b[8:]
	}
	if len(b) >= 4 {
		s, c = bits.Add64(s, uint64(binary.LittleEndian.Uint32(b)), c)
		b = b[4:]
	}
	if len(b) >= 2 {
		s, c = bits.Add64(s, uint64(binary.LittleEndian.Uint16(b)), c)
		b = b[2:]
	}
	if len(b) == 1 {
		s, c = bits.Add64(s, uint64(b[0]), c)
	}
	s, c = bits.Add64(s, c, 0)
	s += c
	return bits.ReverseBytes16(fold64(s))
}

// The vector sum's bounds (sum_amd64.go), here for the tests on every
// architecture.

// avx2Min is the shortest input worth the vector loop's setup and final
// reduction.
const avx2Min = 256

// avx2Chunk bounds one sumAVX2 call: each lane of each of its four
// accumulators takes one 16-bit word per 64 bytes, and the four are added
// lane by lane at the end, so 2^16-1 times 4 words of 2^16-1 stay below
// 2^32 with room to spare at 256 KiB (4,096 words a lane).
const avx2Chunk = 256 << 10

// fold64 reduces a one's-complement accumulator to 16 bits.
func fold64(s uint64) uint16 {
	s = (s >> 32) + (s & 0xffffffff)
	s = (s >> 32) + (s & 0xffffffff)
	s = (s >> 16) + (s & 0xffff)
	s = (s >> 16) + (s & 0xffff)
	s = (s >> 16) + (s & 0xffff)
	return uint16(s)
}

// fold reduces a 32-bit sum of 16-bit partial sums to 16 bits.
func fold(s uint32) uint16 { return fold64(uint64(s)) }

// pseudoSum is the one's-complement sum of the L4 pseudo-header for the IP
// header at ip (version-checked by the caller), protocol proto and L4
// length l4len, folded to 16 bits.
func pseudoSum(ip []byte, ipv6 bool, proto uint8, l4len int) uint16 {
	var s uint32
	if ipv6 {
		s = uint32(sum(ip[header.IPv6SrcOff:header.IPv6Len]))
		s += uint32(l4len>>16) + uint32(l4len&0xffff)
	} else {
		s = uint32(sum(ip[header.IPv4SrcOff:header.IPv4MinLen]))
		s += uint32(l4len & 0xffff)
	}
	s += uint32(proto)
	return fold(s)
}

// CompleteChecksum finishes a NEEDS_CSUM frame in place: sums
// frame[CsumStart:] (the field at CsumStart+CsumOffset already holds the
// pseudo-header sum, as Linux leaves it) and writes the folded result. A
// result of zero is written as 0xffff, as Linux does, because zero means
// "no checksum" for UDP. It does nothing if h lacks FlagNeedsCsum, so
// drivers may call it for every non-GSO frame.
func CompleteChecksum(h *Header, frame []byte) error {
	if h.Flags&FlagNeedsCsum == 0 {
		return nil
	}
	start := int(h.CsumStart)
	field := start + int(h.CsumOffset)
	if field+2 > len(frame) {
		return ErrCsumOffset
	}
	if h.CsumOffset == sctpCsumOffset {
		return completeSCTP(frame, start, field)
	}
	c := ^sum(frame[start:])
	if c == 0 {
		c = 0xffff
	}
	binary.BigEndian.PutUint16(frame[field:], c)
	return nil
}

// sctpCsumOffset is where SCTP's checksum sits in its common header. Linux
// hands SCTP packets over with NEEDS_CSUM too when the device claims CRC32c
// offload (veth and tap do): such a packet carries a zero checksum field
// that must become a CRC32c, not an Internet checksum. No protocol whose
// checksum is an Internet checksum has its field at offset 8 (TCP 16, UDP
// 6, ICMP 2), and the header does not say which kind the kernel meant, so
// the offset decides.
const sctpCsumOffset = header.SCTPChecksumOff

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// completeSCTP writes the CRC32c of frame[start:] (with the checksum field
// at field zeroed first) least significant byte first, as RFC 4960
// appendix B puts it on the wire.
func completeSCTP(frame []byte, start, field int) error {
	if field+4 > len(frame) {
		return ErrCsumOffset
	}
	clear(frame[field : field+4])
	binary.LittleEndian.PutUint32(frame[field:], crc32.Checksum(frame[start:], castagnoli))
	return nil
}

// FixL4Checksum recomputes the TCP, UDP, ICMPv4 or ICMPv6 checksum of an
// Ethernet frame (IPv4/IPv6, up to two VLAN tags) and rewrites it if it is
// wrong; it reports whether it changed the frame. It is for drivers that
// get no checksum metadata (AF_XDP), where a frame from a local sender may
// carry only the pseudo-header sum. Frames it cannot judge are left alone:
// IP fragments (the L4 checksum covers the whole datagram), IPv6 routing
// headers with segments left (the pseudo-header uses the final
// destination), other protocols, and UDP over IPv4 with checksum 0 (which
// means "none"). Bytes past the IP length (Ethernet padding) are ignored.
func FixL4Checksum(frame []byte) (changed bool) {
	var p parsed
	if !p.parse(frame, true) || p.fragment || p.routed {
		return false
	}
	l4 := frame[p.l4off:p.end]
	var field int
	switch p.proto {
	case header.IPProtoTCP:
		field = header.TCPChecksumOff
	case header.IPProtoUDP:
		field = header.UDPChecksumOff
	case header.IPProtoICMP:
		if p.ipv6 {
			return false
		}
		field = header.ICMPChecksumOff
	case header.IPProtoICMPv6:
		if !p.ipv6 {
			return false
		}
		field = header.ICMPv6ChecksumOff
	default:
		return false
	}
	if len(l4) < field+2 {
		return false
	}
	old := binary.BigEndian.Uint16(l4[field:])
	if p.proto == header.IPProtoUDP && old == 0 && !p.ipv6 {
		return false
	}
	var s uint32
	if p.proto != header.IPProtoICMP {
		s = uint32(pseudoSum(frame[p.l3off:], p.ipv6, p.proto, len(l4)))
	}
	s += uint32(sum(l4))
	if fold(s) == 0xffff && old != 0 {
		// It verifies. One's-complement arithmetic makes 0 and 0xffff the
		// same value, so a TCP or ICMP checksum of 0 would pass too, but
		// only a sender that got it wrong writes 0 (and for UDP over IPv6
		// it means "missing"): recompute it then.
		return false
	}
	// The sum included the old field; take it back out.
	s += uint32(^old)
	c := ^fold(s)
	if c == 0 && p.proto == header.IPProtoUDP {
		c = 0xffff
	}
	if c == old {
		return false
	}
	binary.BigEndian.PutUint16(l4[field:], c)
	return true
}

// CompletePartialL4Checksum completes the TCP or UDP checksum of an
// Ethernet frame (IPv4/IPv6, up to two VLAN tags) whose checksum field holds
// only the pseudo-header sum, which is what a local sender behind a veth
// with tx checksum offload leaves there (CHECKSUM_PARTIAL), and reports
// whether it changed the frame. It is for drivers that get no checksum
// metadata (AF_XDP). Unlike FixL4Checksum it looks at the field before it
// sums the payload: a frame whose field is anything else is left alone
// after a header parse, so frames that arrive complete (a sender with tx
// checksum offload off, a NIC) cost no pass over their payload, the
// difference between 1.5 KB frames at line rate and a sum over each; and a
// checksum that is wrong for another reason stays wrong, as it would on a
// wire, instead of being made to verify. A complete checksum that happens
// to equal the pseudo-header sum (1 in 65,536) is summed, verifies and is
// left alone. Frames it cannot judge are left alone as by FixL4Checksum.
func CompletePartialL4Checksum(frame []byte) (changed bool) {
	var p parsed
	if !p.parse(frame, true) || p.fragment || p.routed {
		return false
	}
	var field int
	switch p.proto {
	case header.IPProtoTCP:
		field = header.TCPChecksumOff
	case header.IPProtoUDP:
		field = header.UDPChecksumOff
	default:
		return false
	}
	l4 := frame[p.l4off:p.end]
	if len(l4) < field+2 {
		return false
	}
	old := binary.BigEndian.Uint16(l4[field:])
	ps := pseudoSum(frame[p.l3off:], p.ipv6, p.proto, len(l4))
	// 0 and 0xffff are the same one's-complement value.
	if old != ps && !(old == 0 && ps == 0xffff) && !(old == 0xffff && ps == 0) {
		return false
	}
	return FixL4Checksum(frame)
}

// Sum is the one's-complement sum of b as big-endian 16-bit words (an odd
// last byte padded with zero), folded to 16 bits and not complemented:
// sums of pieces of even length add up (with end-around carry) to the sum
// of their concatenation, so callers can checksum headers they build apart
// from the payload they gather behind them.
func Sum(b []byte) uint16 { return sum(b) }

// Fold reduces a sum of Sums and 16- or 32-bit big-endian values (lengths,
// the protocol number) to a 16-bit one's-complement sum, for callers that
// add up a checksum from pieces.
func Fold(s uint64) uint16 { return fold64(s) }

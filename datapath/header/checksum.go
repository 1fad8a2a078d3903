package header

import "encoding/binary"

// One's-complement checksum arithmetic (RFC 1071, RFC 1624), shared by
// the rewrites that keep checksums right incrementally (actions), the
// tracker's translation of ICMP errors and fragment reassembly.

// CsumDelta accumulates the change of one 16-bit word of checksummed data
// from old to val, as RFC 1624 eqn. 3 needs it: ~m + m'.
func CsumDelta(acc uint32, old, val uint16) uint32 {
	return acc + uint32(^old) + uint32(val)
}

// CsumDelta32 accumulates the change of a 32-bit field (two words).
func CsumDelta32(acc uint32, old, val uint32) uint32 {
	acc = CsumDelta(acc, uint16(old>>16), uint16(val>>16))
	return CsumDelta(acc, uint16(old), uint16(val))
}

// CsumDeltaBytes accumulates the change of an even-length field given as
// its old and new bytes (IPv6 addresses).
func CsumDeltaBytes(acc uint32, old, val []byte) uint32 {
	for i := 0; i+1 < len(old) && i+1 < len(val); i += 2 {
		acc = CsumDelta(acc, binary.BigEndian.Uint16(old[i:]), binary.BigEndian.Uint16(val[i:]))
	}
	return acc
}

// CsumAdjust returns checksum c updated by an accumulated delta:
// HC' = ~(~HC + ~m + m'). The end-around carry never yields +0 from a
// non-zero sum, so a checksum of 0xffff (the all-zero-data case) cannot
// appear, matching a checksum computed from scratch.
func CsumAdjust(c uint16, acc uint32) uint16 {
	s := uint32(^c) + acc
	s = (s & 0xffff) + (s >> 16)
	s = (s & 0xffff) + (s >> 16)
	return ^uint16(s)
}

// AdjustField applies delta to the big-endian checksum field at b[off:off+2].
func AdjustField(b []byte, off int, acc uint32) {
	c := binary.BigEndian.Uint16(b[off:])
	binary.BigEndian.PutUint16(b[off:], CsumAdjust(c, acc))
}

// CsumSum adds b to a one's-complement sum as big-endian 16-bit words (an
// odd last byte as the high half of a word).
func CsumSum(acc uint32, b []byte) uint32 {
	for len(b) >= 2 {
		acc += uint32(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		acc += uint32(b[0]) << 8
	}
	return acc
}

// CsumFold folds a one's-complement sum to 16 bits (not inverted).
func CsumFold(acc uint32) uint16 {
	for acc > 0xffff {
		acc = acc>>16 + acc&0xffff
	}
	return uint16(acc)
}

// SetIPv4Checksum computes the header checksum of the IPv4 header at h
// (its IHL says how long) and writes it.
func SetIPv4Checksum(h []byte) {
	ihl := int(h[0]&0x0f) * 4
	h[IPv4ChecksumOff], h[IPv4ChecksumOff+1] = 0, 0
	binary.BigEndian.PutUint16(h[IPv4ChecksumOff:], ^CsumFold(CsumSum(0, h[:ihl])))
}

// Package checksumref holds reference checksums for tests: written straight
// from their RFCs, one bit at a time, sharing no code with the table-driven
// implementations the datapath and drivers use, so that a test can check
// one against the other.
package checksumref

// CRC32c is CRC32c (Castagnoli, reflected polynomial 0x82f63b78), as SCTP
// uses it (RFC 4960 appendix B).
func CRC32c(b []byte) uint32 {
	crc := ^uint32(0)
	for _, c := range b {
		crc ^= uint32(c)
		for range 8 {
			if crc&1 != 0 {
				crc = crc>>1 ^ 0x82f63b78
			} else {
				crc >>= 1
			}
		}
	}
	return ^crc
}

package vnethdr

import "golang.org/x/sys/cpu"

// The checksum in AVX2. The portable sum adds one 64-bit word per
// add-with-carry, and those adds form one chain through the carry flag: 8
// bytes a cycle at best, about 20 GB/s here, which left it about 5% of a
// tunnel's CPU for a TCP stream (every segment is summed once when the
// port cuts a super-frame and once when it merges a run). AVX2 splits 32
// bytes into their sixteen 16-bit words in 32-bit lanes, which take 2^16
// words before they can overflow, and adds them with no carry chain.

var haveAVX2 = cpu.X86.HasAVX2

// sumAVX2 adds the little-endian 16-bit words of the n bytes at p (n a
// multiple of 64, at most avx2Chunk) into eight 32-bit lanes at out.
//
//go:noescape
func sumAVX2(p *byte, n int, out *[8]uint32)

// sumVector sums the longest prefix of b whose length is a multiple of 64
// with AVX2, as one's-complement little-endian words, and returns that sum
// (not folded) and the rest of b; with no AVX2 or a short b it returns 0
// and b.
func sumVector(b []byte) (uint64, []byte) {
	if !haveAVX2 || len(b) < avx2Min {
		return 0, b
	}
	var s uint64
	var lanes [8]uint32
	for len(b) >= 64 {
		n := min(len(b)&^63, avx2Chunk)
		sumAVX2(&b[0], n, &lanes)
		for _, l := range lanes {
			s += uint64(l)
		}
		b = b[n:]
	}
	return s, b
}
